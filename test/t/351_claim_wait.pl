# Waiting claims under load (issue 13): several workers wait on one task table; each committed
# INSERT of one row wakes exactly one of them, the oldest, which claims the row; a commit of ten
# rows wakes waiters until their max_rows cover the rows; a waiting worker holds no lock.  The
# waiters re-check only every 60 s (fencelock.claim_recheck), so every claim below came from a
# commit's wake-up.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('claimwait');
$node->safe_psql('postgres', q{
	CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
	                   lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
	                   fence bigint NOT NULL DEFAULT 0);
	SELECT fencelock.enable_tasks('jobs');
	CREATE TABLE got (worker text, id int, at timestamptz DEFAULT clock_timestamp());
});

# A waiting worker in the background: one claim of up to max_rows rows, waiting up to 30 s; the
# rows it got are recorded.
sub start_worker
{
	my ($name, $max_rows) = @_;
	my ($out, $err) = ('', '');
	my @cmd = (
		'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		'-c', "SET fencelock.claim_recheck = '60s'",
		'-c', "INSERT INTO got (worker, id) SELECT '$name', id FROM fencelock.claim(NULL::jobs, "
		  . "'$name', '1 minute', $max_rows, wait => '30 seconds')");
	return { name => $name, h => IPC::Run::start(\@cmd, '>', \$out, '2>', \$err), err => \$err };
}

sub waiting
{
	return $node->safe_psql('postgres', "SELECT waiting FROM fencelock.task_waiters('jobs')");
}

sub wait_for_waiting
{
	my ($n) = @_;
	$node->poll_query_until('postgres', "SELECT waiting = $n FROM fencelock.task_waiters('jobs')")
	  or die "timed out waiting for $n waiting claims";
}

sub wakeups
{
	return $node->safe_psql('postgres', "SELECT wakeups FROM fencelock.task_waiters('jobs')");
}

# Four workers wait, in order w1 .. w4.
my @w;
for my $i (1 .. 4)
{
	push @w, start_worker("w$i", 1);
	wait_for_waiting($i);
}
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_locks
	 WHERE locktype IN ('tuple', 'transactionid') AND pid <> pg_backend_pid()
	   AND pid IN (SELECT pid FROM pg_stat_activity WHERE query LIKE '%fencelock.claim%')
	   AND locktype = 'tuple'}),
	'0', 'waiting claims hold no tuple lock');

# One row: one worker (the first to wait) is woken and claims it; three keep waiting.
my $before = wakeups();
$node->safe_psql('postgres', 'INSERT INTO jobs (id) VALUES (1)');
$w[0]{h}->finish;
is($node->safe_psql('postgres', 'SELECT worker, id FROM got ORDER BY at'), 'w1|1',
	'one row: the oldest waiter claims it');
wait_for_waiting(3);
is(wakeups() - $before, 1, 'one row: one wake-up');

# Two rows in one transaction of two statements: the next two waiters, each one row.
$before = wakeups();
$node->safe_psql('postgres',
	'BEGIN; INSERT INTO jobs (id) VALUES (2); INSERT INTO jobs (id) VALUES (3); COMMIT;');
$w[1]{h}->finish;
$w[2]{h}->finish;
is($node->safe_psql('postgres', "SELECT string_agg(worker, ',' ORDER BY worker) FROM got WHERE id IN (2, 3)"),
	'w2,w3', 'two statements: the two next waiters');
wait_for_waiting(1);
is(wakeups() - $before, 2, 'two statements: two wake-ups');

# A rolled-back insert wakes nobody.
$before = wakeups();
$node->safe_psql('postgres', 'BEGIN; INSERT INTO jobs (id) VALUES (4); ROLLBACK;');
sleep 1;
is(waiting(), '1', 'after a rollback the last waiter still waits');
is(wakeups() - $before, 0, 'a rollback delivers no wake-up');

# Ten rows in one statement, three waiters of max_rows 4: the commit wakes all three (4 + 4 + 2
# rows), each claims what it finds.
$node->safe_psql('postgres', 'INSERT INTO jobs (id) VALUES (5)');
$w[3]{h}->finish;
my @big;
for my $i (1 .. 3)
{
	push @big, start_worker("b$i", 4);
	wait_for_waiting($i);
}
$before = wakeups();
$node->safe_psql('postgres', 'INSERT INTO jobs (id) SELECT g FROM generate_series(10, 19) AS g');
$_->{h}->finish for @big;
is( $node->safe_psql('postgres', q{
	SELECT count(DISTINCT worker), count(*) FROM got WHERE id >= 10}),
	'3|10', 'ten rows: the three waiters claimed them all');
is(wakeups() - $before, 3, 'ten rows: three wake-ups, as many as needed for ten rows');

# Rows that are not claimable (not ready, or not yet due) wake nobody.
my $late = start_worker('late', 1);
wait_for_waiting(1);
$before = wakeups();
$node->safe_psql('postgres', "INSERT INTO jobs (id, state) VALUES (30, 'paused')");
is(wakeups() - $before, 0, 'an INSERT of rows that are not ready wakes nobody');
$node->safe_psql('postgres', 'INSERT INTO jobs (id) VALUES (31)');
$late->{h}->finish;
is($node->safe_psql('postgres', "SELECT id FROM got WHERE worker = 'late'"), '31',
	'the next ready row wakes the waiter');
push @big, $late;
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM got"), '15|15',
	'no row was claimed twice');
is($_->{err}->$*, '', "worker $_->{name} had no error") for (@w, @big);

$node->stop;
done_testing();
