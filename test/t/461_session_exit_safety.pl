# Issue 20, defects 1, 5 and 6: the end of a session that holds session-bound leases is handled
# in an exit callback, where nothing may wait (pg_terminate_backend cannot interrupt it, and a
# fast shutdown waits for it) and an ERROR becomes FATAL and skips the rest of the callback.
#   1. With waiters queued, terminating the holder does not crash the server: the list of
#      waiters to wake was built in SPI's memory and walked after SPI_finish had freed it (an
#      assert-enabled build clobbers freed memory: a segfault, and every backend restarted).  Its
#      loop over the released rows also read SPI_processed and SPI_tuptable after the history
#      statement of the first row had replaced them: of three leases only the first got its
#      history, notification and count.
#   5. The exit meets a row lock on the lease row (an open transaction's assert_fence, and a
#      PREPARED one): the backend still ends at once, its lease is free at once, and a fast
#      shutdown finishes with the prepared transaction holding the row.  Nor does it wait for a
#      synchronous standby that is gone, or for NOTIFY's lock held by a commit waiting for one.
#   6. The exit's update of the rows fails (default_transaction_read_only = on in the session, a
#      trigger that raises): the session still counts as ended and its lease is free at once, not
#      after its five-minute ttl.  Also sessions that end inside a transaction (one holding its
#      own lease row locked, one aborted).
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

# allows_streaming: synchronous replication is only requested with max_wal_senders > 0.
my $node = fl_node('exit_safety',
	init => { allows_streaming => 1 },
	conf => "fencelock.history = on\nfencelock.notify = on\nmax_prepared_transactions = 2\n");

# Poll (every 50 ms, up to $secs seconds) until SQL returns $want; returns the last value.
sub wait_for { return fl_wait_for($node, @_); }

# The pid of the backend of application $app once it sleeps in pg_sleep.
sub sleeping_backend
{
	my ($app) = @_;
	wait_for(qq{SELECT count(*) FROM pg_stat_activity
	            WHERE application_name = '$app' AND wait_event = 'PgSleep'}, '1') eq '1'
	  or die "$app did not start";
	return $node->safe_psql('postgres',
		qq{SELECT pid FROM pg_stat_activity WHERE application_name = '$app'});
}

# Whether the backend is gone within $secs seconds (its exit callbacks have all run by then).
sub gone_within
{
	my ($pid, $secs) = @_;
	return wait_for("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0', $secs) eq '0';
}

sub fence_of
{
	my ($res) = @_;
	return $node->safe_psql('postgres',
		"SELECT fence FROM fencelock.lease WHERE resource = '$res'");
}

# A session-bound lease on $res held by a backend sleeping in pg_sleep; returns its pid.
sub hold
{
	my ($res, $app, @more) = @_;
	my $h = fl_background($node, $app,
		"SELECT fencelock.acquire('$res', '$app-token', '5 minutes', '0', true)",
		@more, 'SELECT pg_sleep(300)');
	return (sleeping_backend($app), $h);
}

# --- 1. waiters queued behind a session lease; the holder (of three) is terminated ---
my ($pid, $holder) = hold('x:uaf', 'uaf-holder',
	q{SELECT fencelock.acquire(r, 'uaf-holder-token', '5 minutes', '0', true)
	    FROM unnest(ARRAY['x:uaf-b', 'x:uaf-c']) AS r});
my $fence = fence_of('x:uaf');
my @waiters;
for my $i (1 .. 2)
{
	push @waiters, fl_background($node, "uaf-waiter$i",
		"SELECT fencelock.acquire('x:uaf', 'w$i', '5 minutes', '60 seconds')");
	is(wait_for(q{SELECT fencelock.waiters('x:uaf')}, $i), $i, "1: waiter $i queues");
}
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$holder->{h}->finish;
$waiters[0]->{h}->finish;
is(${ $waiters[0]->{out} }, ($fence + 1) . "\n",
	'1: the first waiter is granted the next fence once the holder is terminated');
$node->safe_psql('postgres', q{SELECT fencelock.release('x:uaf', 'w1')});
$waiters[1]->{h}->finish;
is(${ $waiters[1]->{out} }, ($fence + 2) . "\n", '1: and the second after the first releases');
is($node->safe_psql('postgres', q{SELECT string_agg(resource || ' ' || ended_how, ', ' ORDER BY resource)
                                   FROM fencelock.history WHERE owner = 'uaf-holder-token'}),
	'x:uaf released, x:uaf-b released, x:uaf-c released', '1: the exit released all three');
fl_no_crash($node, '1: terminating a holder with waiters');

# --- 5a. an open transaction holds a row lock on the lease row ---
($pid, $holder) = hold('x:locked', 'locked-holder');
$fence = fence_of('x:locked');
my $locker = fl_client($node->connstr('postgres'));
$locker->query("BEGIN; SELECT fencelock.assert_fence('x:locked', $fence)");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(gone_within($pid, 5), '5: pg_terminate_backend ends a holder whose lease row is locked');
is($node->safe_psql('postgres', q{SELECT state FROM fencelock.leases WHERE resource = 'x:locked'}),
	'free', '5: its lease is free while the row lock is still held');
$locker->query('COMMIT');
$holder->{h}->finish;
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('x:locked', 'next', '1 minute', '0')}),
	$fence + 1, '5: another owner is granted it at once when the lock goes');
$locker->quit;

# --- 5b. a PREPARED transaction holds the row: a fast shutdown still finishes ---
($pid, $holder) = hold('x:prepared', 'prepared-holder');
$fence = fence_of('x:prepared');
$node->safe_psql('postgres', qq{BEGIN; SELECT fencelock.assert_fence('x:prepared', $fence);
                                PREPARE TRANSACTION 'fl_461_hold'});
my ($stopped, $log_at);
{
	local $ENV{PGCTLTIMEOUT} = 20;
	$stopped = $node->stop('fast', fail_ok => 1);
}
ok($stopped, '5: pg_ctl stop -m fast finishes while a prepared transaction locks the lease row');
$node->stop('immediate') unless $stopped;
$holder->{h}->finish;
$node->start;
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'fl_461_hold'}),
	'1', '5: the prepared transaction survived the shutdown');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'fl_461_hold'});
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('x:prepared', 'next', '1 minute', '0')}),
	$fence + 1, '5: after the restart the lease is free for another owner');

# --- 5c. synchronous replication to a standby that is gone: the exit's commit does not wait for
# it, nor for NOTIFY's lock, which a grant (with fencelock.notify = on) stuck in that wait holds ---
my ($pid_a, $holder_a) = hold('x:syncrep', 'syncrep-holder');
my ($pid_b, $holder_b) = hold('x:notify', 'notify-holder');
$node->append_conf('postgresql.conf', "synchronous_standby_names = 'fl_461_gone'\n");
$node->reload;
wait_for(q{SHOW synchronous_standby_names}, 'fl_461_gone');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid_a)");
ok(gone_within($pid_a, 5), '5: a session ends while synchronous commits wait for a standby that is gone');
my $notifier = fl_background($node, 'stuck-notifier',
	q{SELECT fencelock.acquire('x:granted-with-notify', 'o', '1 minute')});
is(wait_for(q{SELECT wait_event FROM pg_stat_activity WHERE application_name = 'stuck-notifier'},
		'SyncRep', 10),
	'SyncRep', "5: meanwhile a grant's commit waits for the standby, holding NOTIFY's lock");
$log_at = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid_b)");
ok(gone_within($pid_b, 5), "5: and while a notifier's commit waits for it, holding NOTIFY's lock");
is($node->safe_psql('postgres', q{SELECT string_agg(state, ' ' ORDER BY resource)
                                   FROM fencelock.leases WHERE resource IN ('x:syncrep', 'x:notify')}),
	'free free', '5: both leases are free');
ok($node->log_contains(qr/session_ended notifications of ended session \d+ not sent/, $log_at),
	'5: the notification that could not be sent is logged');
$node->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
$node->reload;
$_->{h}->finish for ($holder_a, $holder_b, $notifier);

# --- 6a. default_transaction_read_only = on in the ended session ---
($pid, $holder) = hold('x:readonly', 'readonly-holder', 'SET default_transaction_read_only = on');
$fence = fence_of('x:readonly');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(gone_within($pid, 5), '6: the read-only session ends');
$holder->{h}->finish;
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('x:readonly', 'next', '1 minute', '0')}),
	$fence + 1, '6: its lease is granted to another owner at once, not after its ttl');
is($node->safe_psql('postgres',
		qq{SELECT ended_how FROM fencelock.history WHERE resource = 'x:readonly' AND fence = $fence}),
	'released', '6: the exit released it in a read-write transaction of its own');

# --- the session ends inside a transaction: one that locks its own lease row, one aborted ---
($pid, $holder) = hold('x:in-xact', 'in-xact-holder', 'BEGIN',
	q{SELECT fencelock.renew('x:in-xact', 'in-xact-holder-token', '5 minutes')});
$fence = fence_of('x:in-xact');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(gone_within($pid, 5), 'in a transaction: the session ends');
$holder->{h}->finish;
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('x:in-xact', 'next', '1 minute', '0')}),
	$fence + 1, 'in a transaction that locked its own lease row: the lease is free at once');
$holder = fl_background($node, 'aborted-holder',
	q{SELECT fencelock.acquire('x:aborted', 'aborted-token', '5 minutes', '0', true)},
	'BEGIN', 'SELECT 1 / 0');
$holder->{h}->finish;
wait_for(q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aborted-holder'}, '0');
is($node->safe_psql('postgres',
		q{SELECT ended_how FROM fencelock.history WHERE resource = 'x:aborted'}),
	'released', 'a client that leaves in an aborted transaction: the exit released its lease');

# --- 6b. any error in the exit's update: a trigger that raises ---
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.fl_461_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    IF current_setting('application_name') = 'doomed-holder' THEN
	        RAISE EXCEPTION 'fl_081: refused';
	    END IF;
	    RETURN NEW;
	END $$;
	CREATE TRIGGER fl_461_refuse BEFORE UPDATE ON fencelock.lease
	    FOR EACH ROW EXECUTE FUNCTION public.fl_461_refuse()});
($pid, $holder) = hold('x:error', 'doomed-holder');
$fence = fence_of('x:error');
$log_at = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(gone_within($pid, 5), '6: a session whose exit update fails ends');
$holder->{h}->finish;
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('x:error', 'next', '1 minute', '0')}),
	$fence + 1, '6: its lease is granted to another owner at once all the same');
ok($node->log_contains(qr/could not update the lease rows of ended session \d+: fl_081: refused/,
		$log_at),
	'6: the error is logged, not raised as FATAL');
unlike(slurp_file($node->logfile, $log_at), qr/FATAL:  fl_081/, '6: no FATAL from the exit');
$node->safe_psql('postgres', q{DROP TRIGGER fl_461_refuse ON fencelock.lease;
                               DROP FUNCTION public.fl_461_refuse()});

fl_no_crash($node, 'every session end');
done_testing();
