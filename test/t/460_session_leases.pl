# Session-bound leases (acquire(..., session => true)) end with the session that took them:
#   - pg_terminate_backend: released at once, fence kept, the waiter behind it served;
#   - the client killed with SIGKILL: the idle backend sees the connection close and releases;
#   - a backend crash (the server restarts): the lease is free afterwards, an ordinary lease is not;
#   - without shared_preload_libraries the call is refused (55000);
#   - leader election: three candidates wait with session-bound leases; each time the leader's
#     backend dies the next one leads, never two at once, and a LISTENer sees every change.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = fl_node('session',
	conf => "fencelock.history = on\nfencelock.notify = on\nrestart_after_crash = on\n");
my $timeout = $PostgreSQL::Test::Utils::timeout_default;

# Poll until SQL returns the expected value (or the test's timeout); returns the last value.
sub wait_for { return fl_wait_for($node, @_); }

sub backend_of
{
	my ($app) = @_;
	return wait_for(qq{SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app'
	                     AND wait_event = 'PgSleep'}, '1') eq '1'
	  ? $node->safe_psql('postgres',
		qq{SELECT pid FROM pg_stat_activity WHERE application_name = '$app'})
	  : undef;
}

# --- pg_terminate_backend: released at once, the waiter behind it gets the next fence ---
my $holder = fl_background($node, 'holder',
	q{SELECT fencelock.acquire('s:term', 'h-token', '5 minutes', '0', true)},
	q{SELECT pg_sleep(300)});
my $pid = backend_of('holder');
ok($pid, 'the session-bound holder is running');
my $fence = $node->safe_psql('postgres', q{SELECT fence FROM fencelock.lease WHERE resource = 's:term'});
my $waiter = fl_background($node, 'waiter',
	q{SELECT fencelock.acquire('s:term', 'w-token', '5 minutes', '60 seconds')});
is(wait_for(q{SELECT waiters FROM fencelock.leases WHERE resource = 's:term'}, '1'), '1',
	'a waiter queues behind the session-bound lease');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$waiter->{h}->finish;
$holder->{h}->finish;
is(${ $waiter->{out} }, ($fence + 1) . "\n", 'the waiter is granted the next fence once the holder is terminated');
is($node->safe_psql('postgres', qq{SELECT ended_how FROM fencelock.history
                                   WHERE resource = 's:term' AND fence = $fence}),
	'released', 'history: the terminated session released its lease');
my ($ended, $granted) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT (SELECT ended_at FROM fencelock.history WHERE resource = 's:term' AND fence = $fence),
	       (SELECT granted_at FROM fencelock.history WHERE resource = 's:term' AND fence = $fence + 1)});
cmp_ok($granted, 'ge', $ended, 'the next grant came after the release');

# --- the client vanishes (SIGKILL): the idle backend reads EOF, exits, and releases ---
my $client = fl_background($node, 'vanishing',
	q{SELECT fencelock.acquire('s:kill', 'k-token', '5 minutes', '0', true)},
	q{SELECT pg_sleep(0.2)});
# A client that stays connected, idle, and is then killed.
$client->{h}->finish;
is($node->safe_psql('postgres', q{SELECT state FROM fencelock.leases WHERE resource = 's:kill'}),
	'free', 'a session that disconnected released its lease');
my $idle = fl_client($node->connstr('postgres'));
$idle->query(q{SELECT fencelock.acquire('s:kill', 'k-token-2', '5 minutes', '0', true)});
is($node->safe_psql('postgres', q{SELECT state FROM fencelock.leases WHERE resource = 's:kill'}),
	'held', 'an idle client holds a session-bound lease');
$idle->{run}->signal('KILL');
$idle->{run}->finish;
is(wait_for(q{SELECT state FROM fencelock.leases WHERE resource = 's:kill'}, 'free'), 'free',
	'killing the client (SIGKILL) frees the lease long before its five-minute ttl');

# --- a backend crash: after the restart, session-bound leases of dead sessions are free ---
$node->safe_psql('postgres', q{SELECT fencelock.acquire('s:ordinary', 'o-token', '5 minutes')});
my $crasher = fl_background($node, 'crasher',
	q{SELECT fencelock.acquire('s:crash', 'c-token', '5 minutes', '0', true)},
	q{SELECT pg_sleep(300)});
my $cpid = backend_of('crasher');
my $cfence = $node->safe_psql('postgres', q{SELECT fence FROM fencelock.lease WHERE resource = 's:crash'});
kill 'KILL', $cpid;
$crasher->{h}->finish;
$node->poll_query_until('postgres', 'SELECT true') or die 'the server did not come back';
ok($node->log_contains('terminated by signal 9'), 'the backend crashed and the server restarted');
is($node->safe_psql('postgres', q{SELECT state FROM fencelock.leases WHERE resource = 's:crash'}),
	'free', 'after the crash the session-bound lease shows free');
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('s:crash', 'after-crash', '1 minute')}),
	$cfence + 1, 'and another owner is granted the next fence');
is($node->safe_psql('postgres', q{SELECT state FROM fencelock.leases WHERE resource = 's:ordinary'}),
	'held', 'an ordinary lease survives the crash until its ttl');

# --- without preload, session-bound leases are refused ---
my $plain = PostgreSQL::Test::Cluster->new('session_nopreload');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION fencelock');
my ($state) = fl_error($plain, 'postgres',
	q{SELECT fencelock.acquire('s:x', 'o', '1 minute', '0', true)});
is($state, '55000', 'without shared_preload_libraries session => true is refused');
is($plain->safe_psql('postgres', q{SELECT fencelock.acquire('s:x', 'o', '1 minute', '0', false)}),
	'1', 'and session => false works');
$plain->stop;

# --- leader election: three candidates, the leader's backend dies twice ---
my $listener = fl_client($node->connstr('postgres'));
$listener->query('LISTEN fencelock');
my @cand = map {
	fl_background($node, "cand$_",
		qq{SELECT fencelock.acquire('leader', 'cand$_', '30 seconds', '60 seconds', true)},
		q{SELECT pg_sleep(300)})
} (1 .. 3);
my @handover_ms;
for my $round (1 .. 2)
{
	my $leader = wait_for(q{SELECT count(*) FROM pg_stat_activity
	                         WHERE application_name LIKE 'cand%' AND wait_event = 'PgSleep'}, '1');
	is($leader, '1', "round $round: exactly one candidate leads");
	my ($app, $lpid) = split /\|/, $node->safe_psql('postgres', q{
		SELECT application_name, pid FROM pg_stat_activity
		 WHERE application_name LIKE 'cand%' AND wait_event = 'PgSleep'});
	is($node->safe_psql('postgres', q{SELECT owner FROM fencelock.leases WHERE resource = 'leader'}),
		$app, "round $round: the lease names the leading candidate");
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($lpid)");
	is(wait_for(q{SELECT count(*) FROM pg_stat_activity
	               WHERE application_name LIKE 'cand%' AND wait_event = 'PgSleep'}, '1'),
		'1', "round $round: another candidate leads after the leader died");
	push @handover_ms, $node->safe_psql('postgres', q{
		SELECT round(extract(epoch FROM n.granted_at - o.ended_at) * 1000)
		  FROM fencelock.history AS n JOIN fencelock.history AS o
		    ON o.resource = n.resource AND o.fence = n.fence - 1
		 WHERE n.resource = 'leader' ORDER BY n.fence DESC LIMIT 1});
}
note("handover after the leader's backend died: @handover_ms ms");
# A waiter that missed its wake-up would poll once a second at most: well under that means the
# release woke it.
cmp_ok($_, '<', 500, "handover in $_ ms: the ended session woke the next candidate") for @handover_ms;
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM fencelock.history AS a JOIN fencelock.history AS b
	    ON a.resource = b.resource AND a.fence < b.fence
	 WHERE a.resource = 'leader' AND b.granted_at < a.ended_at}),
	'0', 'leaderships never overlapped');
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                               WHERE application_name LIKE 'cand%'});
$_->{h}->finish for @cand;
my ($events) = $listener->query('SELECT 1');
note("listener saw:\n$events");
my @seen = $events =~ /"resource": "leader", "event": "(\w+)"/g;
is("@seen", 'granted session_ended granted session_ended granted session_ended',
	'a LISTENer saw every change of leader');
unlike($events, qr/cand\d/, 'notifications never carry an owner token');

done_testing();
