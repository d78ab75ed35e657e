# Session-bound shares and permits (issue 27): acquire_shared and acquire_permit with
# session => true end with the session that took them.  pg_terminate_backend of a session that
# holds a share and a permit releases both: its holder rows leave their groups, the group of
# shares ends (it was the last holder) and a writer waiting for it is granted the next fence at
# once, the permit's slot is taken by the permit waiter behind it, and the other holders stay.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = fl_node('sessionholders', conf => "fencelock.history = on\n");
my $timeout = $PostgreSQL::Test::Utils::timeout_default;

sub wait_for { return fl_wait_for($node, @_); }

$node->safe_psql('postgres',
	q{SELECT fencelock.acquire_permit('sh:api', 'other', '5 minutes', 2)});
my $holder = fl_background($node, 'holder',
	q{SELECT fencelock.acquire_shared('sh:cfg', 'reader', '5 minutes', session => true),
	         fencelock.acquire_permit('sh:api', 'mine', '5 minutes', 2, session => true)},
	q{SELECT pg_sleep(300)});
is(wait_for(q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'holder'
              AND wait_event = 'PgSleep'}, '1'), '1', 'the session-bound holder is running');
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'holder'});
is($node->safe_psql('postgres', q{SELECT string_agg(resource || ' ' || owner || ' ' || session_bound,
	', ' ORDER BY resource, owner) FROM fencelock.lease_holders}),
	'sh:api mine true, sh:api other false, sh:cfg reader true', 'its share and permit are bound');

my $writer = fl_background($node, 'writer',
	q{SELECT fencelock.acquire('sh:cfg', 'writer', '5 minutes', '60 seconds')});
my $permit = fl_background($node, 'permit',
	q{SELECT fencelock.acquire_permit('sh:api', 'next', '5 minutes', 2, '60 seconds')});
is(wait_for(q{SELECT sum(waiters) FROM fencelock.leases WHERE resource LIKE 'sh:%'}, '2'), '2',
	'a writer and a permit wait behind the session');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$writer->{h}->finish;
$permit->{h}->finish;
$holder->{h}->finish;
is(${ $writer->{out} }, "2\n", 'the writer is granted the next fence once the reader is terminated');
is(${ $permit->{out} }, "3\n", 'the permit waiter takes the freed slot');
is($node->safe_psql('postgres', q{SELECT string_agg(resource || ' ' || owner || ' ' || slot,
	', ' ORDER BY resource, owner) FROM fencelock.lease_holders}),
	'sh:api next 2, sh:api other 1', 'the session\'s holders are gone, the other holder stays');
is($node->safe_psql('postgres', q{SELECT string_agg(resource || ' ' || owner || ' ' || ended_how,
	', ' ORDER BY resource, owner) FROM fencelock.history WHERE owner IN ('reader', 'mine')}),
	'sh:api mine released, sh:cfg reader released', 'history: both ended, released');

# A session's exit never waits for another transaction (issue 27, a review finding): set_value on
# a share changes its holder row under the lease row's lock, which the exit sweep skips, rather
# than the holder row alone, on which the sweep's DELETE would wait.  The session-bound holder is
# terminated while another session's set_value on it is uncommitted: the backend exits at once,
# its holder left to the liveness rule (it occupies nothing: its session has ended).
my $bound = fl_background($node, 'bound',
	q{SELECT fencelock.acquire_shared('sh:val', 'v', '5 minutes', session => true)},
	q{SELECT pg_sleep(300)});
is(wait_for(q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bound'
              AND wait_event = 'PgSleep'}, '1'), '1', 'a session-bound share is held');
my $bound_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'bound'});
my $valuer = fl_background($node, 'valuer', 'BEGIN',
	q{SELECT fencelock.set_value('sh:val', 'v', '{"step": 1}')}, q{SELECT pg_sleep(300)});
is(wait_for(q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'valuer'
              AND wait_event = 'PgSleep'}, '1'), '1', 'set_value on it is uncommitted');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($bound_pid)");
is(wait_for("SELECT count(*) FROM pg_stat_activity WHERE pid = $bound_pid", '0'), '0',
	'the terminated session exits while set_value on its share is uncommitted');
$bound->{h}->finish;
is($node->safe_psql('postgres', q{SELECT string_agg(owner || ' ' || state, ', ')
	FROM fencelock.lease_holders WHERE resource = 'sh:val'}), 'v expired',
	'its share is held no more: the sweep skipped the locked group, the liveness rule ends it');
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE application_name = 'valuer'});
$valuer->{h}->finish;
like(${ $valuer->{out} }, qr/\At\n/, 'the set_value that held the group was accepted');

done_testing();
