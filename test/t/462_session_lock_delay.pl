# Issue 20, defect 12: lock_delay applies when a session-bound lease's session ends.  In Chubby
# and Consul the delay is for exactly that involuntary loss: the holder did not release and may
# still act.  The rule (lease/session.c): a lease whose session ends while it holds it ends as if it had
# expired at that moment, so the same owner may take it again at once, another owner only
# lock_delay after the session's end; an explicit release() frees it at once, as before.  The
# direct path and the grant's statement agree, also while the exit could not update the row (a
# row lock held by another transaction: then the slot's record of the ended session says so).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $delay = 3;    # seconds of lock_delay
my $node = fl_node('lock_delay', conf => "fencelock.history = on\n");

sub wait_for { return fl_wait_for($node, @_); }

# A session-bound lease on $res, granted with lock_delay, held by a backend in pg_sleep.
sub hold
{
	my ($res, $owner) = @_;
	my $h = fl_background($node, "holder-$res",
		"SET fencelock.lock_delay = '${delay}s'",
		"SELECT fencelock.acquire('$res', '$owner', '5 minutes', '0', true)",
		'SELECT pg_sleep(300)');
	wait_for(qq{SELECT count(*) FROM pg_stat_activity
	            WHERE application_name = 'holder-$res' AND wait_event = 'PgSleep'}, '1') eq '1'
	  or die "holder of $res did not start";
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'holder-$res'");
	return ($pid, $h);
}

# Terminate the backend and wait until it is gone (its exit callbacks have run), or $secs pass;
# returns when it was gone (undef if it was not).
sub terminate
{
	my ($pid, $secs) = @_;
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	for (my $t = 0; $t < ($secs // $PostgreSQL::Test::Utils::timeout_default) * 20; $t++)
	{
		return time
		  if $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
		usleep(50_000);
	}
	return undef;
}

# Try-once grants; the RR form takes the statement path (the direct path is for READ COMMITTED).
sub try_direct
{
	my ($res, $owner) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(fencelock.acquire('$res', '$owner', '1 minute', '0')::text, 'busy')");
}

sub try_statement
{
	my ($res, $owner) = @_;
	return $node->safe_psql('postgres', qq{
		BEGIN ISOLATION LEVEL REPEATABLE READ;
		SELECT coalesce(fencelock.acquire('$res', '$owner', '1 minute', '0')::text, 'busy');
		COMMIT});
}

sub fence_of
{
	my ($res) = @_;
	return $node->safe_psql('postgres', "SELECT fence FROM fencelock.lease WHERE resource = '$res'");
}

# Poll a try-once grant until it succeeds; returns (fence, seconds since $since).
sub granted_after
{
	my ($try, $res, $owner, $since) = @_;
	for (my $t = 0; $t < $PostgreSQL::Test::Utils::timeout_default * 20; $t++)
	{
		my $got = $try->($res, $owner);
		return ($got, time - $since) if $got ne 'busy';
		usleep(50_000);
	}
	return ('busy', time - $since);
}

# --- the session is terminated: another owner waits lock_delay, on both paths ---
for my $path ([ 'direct', \&try_direct ], [ 'statement', \&try_statement ])
{
	my ($name, $try) = @$path;
	my $res = "d:$name";
	my ($pid, $h) = hold($res, 'old');
	my $fence = fence_of($res);
	my $ended = terminate($pid) // die "backend $pid did not end";
	$h->{h}->finish;
	is($try->($res, 'new'), 'busy', "$name: another owner is refused right after the session ended");
	is($node->safe_psql('postgres', "SELECT state FROM fencelock.leases WHERE resource = '$res'"),
		'expired', "$name: the lease shows expired, not free");
	my ($got, $after) = granted_after($try, $res, 'new', $ended);
	is($got, $fence + 1, "$name: and granted the next fence after the delay");
	cmp_ok($after, '>=', $delay - 0.5, "$name: not before lock_delay (${after}s)");
	is($node->safe_psql('postgres', qq{
		SELECT o.ended_how || ' ' || n.granted_how
		     || ' ' || (n.granted_at >= o.ended_at + interval '${delay}s')
		  FROM fencelock.history AS o JOIN fencelock.history AS n
		    ON n.resource = o.resource AND n.fence = o.fence + 1
		 WHERE o.resource = '$res' AND o.fence = $fence}),
		'taken over taken over true',
		"$name: history: the old grant ended at the session's end, taken over lock_delay later");
}

# --- the same owner takes it back at once, with a new fence ---
{
	my ($pid, $h) = hold('d:same', 'same');
	my $fence = fence_of('d:same');
	terminate($pid) // die "backend $pid did not end";
	$h->{h}->finish;
	is(try_direct('d:same', 'same'), $fence + 1, 'the same owner is granted it at once');
}

# --- the exit could not update the row (an open transaction locked it): the same rule ---
{
	my ($pid, $h) = hold('d:locked', 'old');
	my $fence = fence_of('d:locked');
	my $locker = fl_client($node->connstr('postgres'));
	$locker->query("BEGIN; SELECT fencelock.assert_fence('d:locked', $fence)");
	my $ended = terminate($pid, 5);
	ok(defined $ended, 'locked row: the session ends while the row is locked');
	$locker->query('COMMIT');
	$locker->quit;
	$h->{h}->finish;
	$ended //= time;
	is($node->safe_psql('postgres', q{SELECT session_bound FROM fencelock.leases
	                                   WHERE resource = 'd:locked'}),
		't', 'locked row: the exit left the row bound to the ended session');
	is(try_direct('d:locked', 'new'), 'busy', 'locked row: refused on the direct path');
	is(try_statement('d:locked', 'new'), 'busy', 'locked row: refused by the statement');
	my ($got, $after) = granted_after(\&try_direct, 'd:locked', 'new', $ended);
	is($got, $fence + 1, 'locked row: granted after the delay');
	cmp_ok($after, '>=', $delay - 0.5, "locked row: not before lock_delay (${after}s)");
}

# --- release() frees it at once, lock_delay or not ---
{
	my $c = fl_client($node->connstr('postgres'));
	$c->query("SET fencelock.lock_delay = '${delay}s'");
	my $fence = $c->query(q{SELECT fencelock.acquire('d:release', 'old', '5 minutes', '0', true)});
	$c->query(q{SELECT fencelock.release('d:release', 'old')});
	is(try_direct('d:release', 'new'), $fence + 1, 'an explicit release frees it at once');
	$c->quit;
}

# --- without lock_delay the session's end releases it, as before ---
{
	my $h = fl_background($node, 'holder-nodelay',
		q{SELECT fencelock.acquire('d:nodelay', 'old', '5 minutes', '0', true)},
		'SELECT pg_sleep(300)');
	wait_for(q{SELECT count(*) FROM pg_stat_activity
	           WHERE application_name = 'holder-nodelay' AND wait_event = 'PgSleep'}, '1');
	my $pid = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'holder-nodelay'});
	my $fence = fence_of('d:nodelay');
	terminate($pid) // die "backend $pid did not end";
	$h->{h}->finish;
	is(try_direct('d:nodelay', 'new'), $fence + 1, 'without lock_delay: free at once');
	is($node->safe_psql('postgres', q{SELECT granted_how FROM fencelock.leases
	                                   WHERE resource = 'd:nodelay'}),
		'after release', 'without lock_delay: the session end was a release');
}

fl_no_crash($node, 'lock_delay after session ends');
done_testing();
