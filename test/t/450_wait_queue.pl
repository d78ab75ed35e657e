# Waiting acquire under load: waiters are served in arrival order, one release wakes one waiter
# (no herd of retries), a waiter holds no row lock while it sleeps; and without
# shared_preload_libraries the same calls still work by polling, while the counters say they
# need the preload.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = fl_node('waitq');
$node->safe_psql('postgres', q{
	CREATE TABLE served (name text, at timestamptz DEFAULT clock_timestamp());
	SELECT fencelock.acquire('fifo', 'holder', '1 minute');
	SELECT fencelock.stats_reset();
});

# Start a waiter in the background: wait up to 30 s, record the grant, hold 200 ms, release.
sub start_waiter
{
	my ($node, $name) = @_;
	my ($out, $err) = ('', '');
	my @cmd = (
		'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		'-c', "SELECT fencelock.acquire('fifo', '$name', '1 minute', '30 seconds') IS NOT NULL",
		'-c', "INSERT INTO served (name) VALUES ('$name')",
		'-c', 'SELECT pg_sleep(0.2)',
		'-c', "SELECT fencelock.release('fifo', '$name')");
	return { h => IPC::Run::start(\@cmd, '>', \$out, '2>', \$err), out => \$out, err => \$err };
}

sub wait_for_waiters
{
	my ($node, $n) = @_;
	$node->poll_query_until('postgres', "SELECT fencelock.waiters('fifo') = $n")
	  or die "timed out waiting for $n waiters";
}

my @w;
for my $i (1 .. 3)
{
	push @w, start_waiter($node, "w$i");
	wait_for_waiters($node, $i);
}

# While three backends wait, none of them holds a lock on the lease row: the holder renews at
# once, and no tuple lock or transaction-ID wait is outstanding.
is( $node->safe_psql('postgres',
		"SET statement_timeout = '2s'; SELECT fencelock.renew('fifo', 'holder', '1 minute')"),
	't', 'the holder renews while others wait');
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_locks
	 WHERE locktype = 'tuple' OR (locktype = 'transactionid' AND NOT granted)}),
	'0', 'waiters hold no row lock while they sleep');

$node->safe_psql('postgres', "SELECT fencelock.release('fifo', 'holder')");
for my $x (@w)
{
	$x->{h}->finish;
	is(${ $x->{err} }, '', 'waiter finished without error');
}
is($node->safe_psql('postgres', q{SELECT string_agg(name, ',' ORDER BY at) FROM served}),
	'w1,w2,w3', 'waiters are served in arrival order');

# Each hand-off is one wake-up: the failed attempts are the three first tries plus at most a
# few timer wake-ups of the head, not a retry storm from every waiter.
my ($busy, $waits, $timeouts) = split /\|/,
  $node->safe_psql('postgres', 'SELECT busy, waits, wait_timeouts FROM fencelock.stats');
cmp_ok($busy, '<=', 8, "few failed attempts ($busy) for three queued waiters");
is($waits, 3, 'three waits counted');
is($timeouts, 0, 'no wait timed out');
is($node->safe_psql('postgres', "SELECT state FROM fencelock.leases WHERE resource = 'fifo'"),
	'free', 'the last waiter released the lease');

# A newcomer does not barge ahead of queued waiters: with w4 waiting behind a holder, a waiting
# newcomer w5 queues behind w4 even though it arrives when the lease is being released.
$node->safe_psql('postgres', "TRUNCATE served; SELECT fencelock.acquire('fifo', 'holder', '1 minute')");
my $w4 = start_waiter($node, 'w4');
wait_for_waiters($node, 1);
my $w5 = start_waiter($node, 'w5');
wait_for_waiters($node, 2);
$node->safe_psql('postgres', "SELECT fencelock.release('fifo', 'holder')");
$_->{h}->finish for ($w4, $w5);
is($node->safe_psql('postgres', q{SELECT string_agg(name, ',' ORDER BY at) FROM served}),
	'w4,w5', 'a later waiter does not overtake an earlier one');
# Two attempts race for a free lease: the waiter's UPDATE waits for the holder's uncommitted
# grant, then re-checks the row under a lock and fails.  It must not keep that lock while it
# sleeps, or the holder's release would wait for the waiter's whole deadline.
$node->safe_psql('postgres',
	"SELECT fencelock.acquire('epq', 'nobody'); SELECT fencelock.release('epq', 'nobody')");
my ($hout, $herr) = ('', '');
my $holder = IPC::Run::start(
	[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'),
	  '-c', q{BEGIN; SELECT fencelock.acquire('epq', 'holder', '1 minute'); SELECT pg_sleep(1); COMMIT;},
	  '-c', q{SET statement_timeout = '3s'; SELECT fencelock.release('epq', 'holder')} ],
	'>', \$hout, '2>', \$herr);
usleep(300_000);
my $epq_waiter = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
	  "SELECT fencelock.acquire('epq', 'waiter', '1 minute', '15 seconds') IS NOT NULL" ],
	'>', \my $wout, '2>', \my $werr);
$holder->finish;
$epq_waiter->finish;
is($herr, '', 'the holder releases at once although a waiter re-checked its row');
is($wout, "t\n", 'and the waiter gets the lease');

# Queues are per database: a waiter for "x" in one database does not hold up a waiter for "x"
# in another, where it is free.
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', q{
	CREATE EXTENSION fencelock;
	CREATE TABLE served (name text, at timestamptz DEFAULT clock_timestamp());
	SELECT fencelock.acquire('fifo', 'holder', '1 minute');
});
my ($oout, $oerr) = ('', '');
my $other_waiter = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('other'), '-c',
	  "SELECT fencelock.acquire('fifo', 'other-waiter', '1 minute', '20 seconds') IS NOT NULL" ],
	'>', \$oout, '2>', \$oerr);
$node->poll_query_until('other', "SELECT fencelock.waiters('fifo') = 1")
  or die 'the waiter in the other database never queued';
is($node->safe_psql('postgres', "SELECT fencelock.waiters('fifo')"), '0',
	'a queue in another database is not counted here');
is( $node->safe_psql('postgres', q{
	SELECT fencelock.acquire('fifo', 'here', '1 minute', '3 seconds') IS NOT NULL
	   AND clock_timestamp() - statement_timestamp() < interval '2 seconds'}),
	't', 'a waiting acquire for a free resource is not queued behind another database\'s waiter');
$node->safe_psql('other', "SELECT fencelock.release('fifo', 'holder')");
$other_waiter->finish;
is($oout, "t\n", 'the other database\'s waiter got its own lease');
$node->stop;

# Without shared_preload_libraries: the extension installs, leases and the trigger work,
# waiting falls back to polling, and the counters explain what is missing.
my $plain = PostgreSQL::Test::Cluster->new('nopreload');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', q{
	CREATE EXTENSION fencelock;
	CREATE TABLE served (name text, at timestamptz DEFAULT clock_timestamp());
	SELECT fencelock.acquire('fifo', 'holder', '1 minute');
});
my $pw = start_waiter($plain, 'polling-waiter');
usleep(300_000);
$plain->safe_psql('postgres', "SELECT fencelock.release('fifo', 'holder')");
$pw->{h}->finish;
like(${ $pw->{out} }, qr/\At\n\s*t\n\z/, 'a waiter without preload gets the lease by polling');
is($plain->safe_psql('postgres', "SELECT fencelock.waiters('fifo') IS NULL"), 't',
	'waiters() is NULL without preload');
my ($state, $msg) = fl_error($plain, 'postgres', 'SELECT * FROM fencelock.stats');
is($state, '55000', 'stats need shared_preload_libraries (SQLSTATE 55000)');
like($msg, qr/shared_preload_libraries/, 'and the message says so');
$plain->stop;

done_testing();
