# Leases keep their length when the server's wall clock steps (issue 38).  The server runs under
# libfaketime, whose offset the test changes through a file, as an NTP step or `date -s` would move
# the wall clock, while the monotonic clock runs on (FAKETIME_DONT_FAKE_MONOTONIC).  The test times
# everything on its own monotonic clock:
#   - +60 s with a 10 s lease held: the lease is neither lost nor taken over early; a queued
#     waiter gets it 10 s after the grant, and an 8 s wait on a held lease lasts 8 s;
#   - -60 s with a 10 s lease held: a waiter gets it 10 s after the grant, not 70 s; a 4 s wait
#     lasts 4 s;
#   - a lease that has expired (its holder's renew answered false) stays expired after the -60 s
#     step: renew still false, the leases view says expired, another owner gets it;
#   - writes under a superseded fence are refused throughout (lease-bound fence trigger);
#   - a restart with the wall clock still behind: the lease clock is lifted to the last grant, so
#     the lease expired before the restart stays expired.
# Skipped where libfaketime is not installed (Debian package libfaketime).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(clock_gettime usleep CLOCK_MONOTONIC);

my ($libfaketime) = grep { -e $_ } (glob('/usr/lib/*/faketime/libfaketime.so.1'),
	'/usr/lib/faketime/libfaketime.so.1');
plan skip_all => 'libfaketime is not installed (Debian package libfaketime)'
  unless defined $libfaketime;

my $node = fl_node('clock', start => 0);
my $offset_file = $node->basedir . '/faketime';

# The server's wall clock: the real one plus OFFSET ("+60", "-60"), read by libfaketime at every
# call.  Replaced by a rename, so that no reader ever sees a half-written file.
sub step
{
	my ($offset) = @_;
	PostgreSQL::Test::Utils::append_to_file("$offset_file.new", "$offset\n");
	rename("$offset_file.new", $offset_file) or die "rename: $!";
}

sub start_faked
{
	local $ENV{LD_PRELOAD} = $libfaketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $offset_file;
	local $ENV{FAKETIME_NO_CACHE} = '1';
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
	$node->start;
}

step('+0');
start_faked();
$node->safe_psql('postgres', q{
	CREATE EXTENSION fencelock;
	CREATE TABLE w (res text PRIMARY KEY, last_fence bigint);
	INSERT INTO w VALUES ('fwd', 0), ('back', 0), ('short', 0);
	CREATE TRIGGER fence BEFORE UPDATE ON w FOR EACH ROW
	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=res');
	SELECT fencelock.acquire('hold', 'keeper', '10 minutes');
});

my $t0 = clock_gettime(CLOCK_MONOTONIC);
sub elapsed { return clock_gettime(CLOCK_MONOTONIC) - $t0; }
sub sql { return $node->safe_psql('postgres', $_[0]); }

# The server's wall clock, as the server reads it, minus the test's: the step is in force.
sub wall_offset
{
	return sql(q{SELECT round(extract(epoch FROM clock_timestamp()))}) - time();
}

# Background waiters: each runs one SQL statement; the test notes when each one ends, on its own
# monotonic clock.  A waiter still running 30 s after it started (a wait the step stretched) is
# ended by the test, and its time is counted as 30 s.  (Not statement_timeout: PostgreSQL's
# timeouts are scheduled on the wall clock, and a step fires them early or late.)
my %bg;
sub waiter
{
	my ($name, $sql) = @_;
	$bg{$name} = fl_background($node, $name, $sql);
	$bg{$name}{started} = elapsed();
}

sub poll_waiters
{
	for my $w (values %bg)
	{
		next if defined $w->{ended};
		$w->{h}->pump_nb;
		if ($w->{h}->pumpable && elapsed() - $w->{started} >= 30)
		{
			$w->{h}->kill_kill;
			${ $w->{err} } .= 'ended by the test after 30 s';
			$w->{ended} = elapsed();
			next;
		}
		next if $w->{h}->pumpable;
		$w->{h}->finish;
		chomp ${ $w->{out} };
		$w->{ended} = elapsed();
	}
}

sub wait_waiters
{
	for (;;)
	{
		poll_waiters();
		last unless grep { !defined $_->{ended} } values %bg;
		usleep(20_000);
	}
}

# A length measured here ends when this script sees it end: on a loaded machine (the suite runs
# four majors on two cores) that can be a second or two late, never early.  The faults this test
# is for are off by far more: 5 s early across +60 s, 20 s or more late across -60 s.
sub within
{
	my ($got, $want, $what) = @_;
	ok($got >= $want - 1.0 && $got <= $want + 2.5,
		sprintf('%s: %.2f s (expected %d s, 1 s early to 2.5 s late)', $what, $got, $want));
}

# t = 0, wall clock as is: a 10 s lease, a waiter queued for it, and an 8 s wait on a lease held
# for 10 minutes.
my $f_fwd = sql(q{SELECT fencelock.acquire('fwd', 'o1', '10 s')});
my $t_fwd = elapsed();
waiter('fwd', q{SELECT fencelock.acquire('fwd', 'o2', '1 minute', wait => '20 s')});
waiter('wait8', q{SELECT fencelock.acquire('hold', 'o2', '1 minute', wait => '8 s') IS NULL});
$node->poll_query_until('postgres', q{SELECT fencelock.waiters('fwd') = 1 AND fencelock.waiters('hold') = 1})
  or die 'waiters did not queue';

# +60 s, while both wait.
step('+60');
note(sprintf('stepped +60 s %.2f s after the wait of 8 s began', elapsed() - $bg{wait8}{started}));
cmp_ok(abs(wall_offset() - 60), '<=', 2, 'the server\'s wall clock stepped forward 60 s');
is(sql(q{SELECT fencelock.acquire('fwd', 'o3', '1 minute') IS NULL}), 't',
	'+60 s: another owner does not take a 10 s lease 1 s after its grant');
is(sql(q{SELECT state FROM fencelock.leases WHERE resource = 'fwd'}), 'held',
	'+60 s: the leases view shows it held');
is(join(' ', fl_error($node, 'postgres', "UPDATE w SET last_fence = $f_fwd WHERE res = 'fwd'")),
	'', '+60 s: its holder still writes under its fence');

# With the clock 60 s ahead: a 10 s lease to step back across, and a 1 s lease that expires.
my $f_back = sql(q{SELECT fencelock.acquire('back', 'o1', '10 s')});
my $t_back = elapsed();
my $f_short = sql(q{SELECT fencelock.acquire('short', 'o1', '1 s')});
waiter('back', q{SELECT fencelock.acquire('back', 'o2', '1 minute', wait => '20 s')});
waiter('wait4', q{SELECT fencelock.acquire('hold', 'o3', '1 minute', wait => '4 s') IS NULL});
$node->poll_query_until('postgres', q{SELECT fencelock.waiters('back') = 1})
  or die 'waiter did not queue';
usleep(1_500_000);
is(sql(q{SELECT fencelock.renew('short', 'o1', '1 s')}), 'f',
	'the 1 s lease expired: its holder\'s renew answers false');

# -60 s: back to the real time, while the lease of 10 s is held and two wait.
step('+0');
note(sprintf('stepped -60 s %.2f s after the wait of 4 s began', elapsed() - $bg{wait4}{started}));
cmp_ok(abs(wall_offset()), '<=', 2, 'the server\'s wall clock stepped back 60 s');
is(sql(q{SELECT fencelock.renew('short', 'o1', '1 s')}), 'f',
	'-60 s: the expired lease stays expired (renew false)');
is(sql(q{SELECT state FROM fencelock.leases WHERE resource = 'short'}), 'expired',
	'-60 s: the leases view shows it expired');
my $f_short2 = sql(q{SELECT fencelock.acquire('short', 'o2', '1 minute')});
ok($f_short2 ne '' && $f_short2 > $f_short, '-60 s: another owner gets the expired lease');
my ($state) = fl_error($node, 'postgres',
	"UPDATE w SET last_fence = $f_short WHERE res = 'short'");
is($state, 'FL001', '-60 s: the expired holder\'s write is refused');

wait_waiters();
for my $name (sort keys %bg)
{
	is(${ $bg{$name}{err} }, '', "waiter $name ended without error");
}
within($bg{fwd}{ended} - $t_fwd, 10, 'the 10 s lease held across +60 s lasted');
within($bg{back}{ended} - $t_back, 10, 'the 10 s lease held across -60 s lasted');
is(${ $bg{wait8}{out} }, 't', 'the 8 s wait across +60 s ended without the lease');
within($bg{wait8}{ended} - $bg{wait8}{started}, 8, 'the 8 s wait across +60 s lasted');
is(${ $bg{wait4}{out} }, 't', 'the 4 s wait across -60 s ended without the lease');
within($bg{wait4}{ended} - $bg{wait4}{started}, 4, 'the 4 s wait across -60 s lasted');

my $f_back2 = ${ $bg{back}{out} } || 0;
($state) = fl_error($node, 'postgres', "UPDATE w SET last_fence = $f_fwd WHERE res = 'fwd'");
is($state, 'FL001', 'the superseded holder of fwd is refused');
($state) = fl_error($node, 'postgres', "UPDATE w SET last_fence = $f_back WHERE res = 'back'");
is($state, 'FL001', 'the superseded holder of back is refused');
is(join(' ', fl_error($node, 'postgres', "UPDATE w SET last_fence = $f_back2 WHERE res = 'back'")),
	'', 'the new holder of back writes');

# A restart with the wall clock behind the lease clock: the server started with its wall clock
# 60 s ahead (so the lease clock is too), a 1 s lease left to expire and another grant after it;
# then the server restarted with its wall clock back at the real time.  The lease clock is lifted
# to the last grant, so the expired lease stays expired.
$node->stop;
step('+60');
start_faked();
sql(q{SELECT fencelock.acquire('restart', 'o1', '1 s')});
usleep(1_200_000);
is(sql(q{SELECT fencelock.renew('restart', 'o1', '1 s')}), 'f', 'the lease expired before the restart');
sql(q{SELECT fencelock.acquire('restart-marker', 'o1', '1 minute')});
$node->stop;
step('+0');
start_faked();
is(sql(q{SELECT state FROM fencelock.leases WHERE resource = 'restart'}), 'expired',
	'after a restart with the wall clock 60 s back: the expired lease stays expired');
is(sql(q{SELECT fencelock.renew('restart', 'o1', '1 s')}), 'f',
	'after the restart: its holder\'s renew still answers false');
like(slurp_file($node->logfile), qr/lease clock lifted by 5\d\.\d+ s/,
	'the restart lifted the lease clock to the last grant (logged)');

$node->stop;
done_testing();
