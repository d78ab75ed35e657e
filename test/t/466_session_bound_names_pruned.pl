# A session's record of the resources it bound is pruned (issue 35, defect 9).  A pooled
# connection that binds ever new names (acquire with session => true, then release) keeps only
# the ones it still holds, so that a session-bound grant costs the same after 60,000 names as
# after ten, and the backend's memory stays bounded.  The record lives in the backend's memory
# (src/lease/session.c): 10,000 more distinct names, each acquired and released in a transaction of its
# own, grow the memory of TopMemoryContext and of the record's own context ("fencelock session
# resources") by less than 64 kB (each name kept would take at least 24 bytes: 240 kB).  What the
# session still holds stays recorded through the prunes: at the session's end its exit sweep
# releases it (history: released), and so it does with a lease granted in a transaction the
# session prepared and committed later, and with one whose release rolled back.  Made to fail: on 8a3f85a the list was never pruned
# (TopMemoryContext grew by some 400 kB) and scanned on every grant.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('namespruned', conf => "fencelock.history = on\nmax_prepared_transactions = 2\n");

$node->safe_psql('postgres', q{
	CREATE PROCEDURE bind_names(first int, n int) LANGUAGE plpgsql AS $$
	BEGIN
	  FOR i IN first .. first + n - 1 LOOP
	    PERFORM fencelock.acquire('sp:' || i, 'pooled', '1 minute', session => true);
	    PERFORM fencelock.release('sp:' || i, 'pooled');
	    COMMIT;
	  END LOOP;
	END $$;
	CREATE FUNCTION record_bytes() RETURNS bigint LANGUAGE sql AS $$
	  SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts
	   WHERE name IN ('TopMemoryContext', 'fencelock session resources') $$});

my $c = fl_client($node->connstr('postgres'));
like($c->query(q{SELECT fencelock.acquire('sp:kept', 'pooled', '1 hour', session => true),
	fencelock.acquire('sp:rolled-back', 'pooled', '1 hour', session => true)}),
	qr/^\d+\|\d+$/, 'the pooled connection holds two session-bound leases');
$c->query(q{BEGIN; SELECT fencelock.acquire('sp:prepared', 'pooled', '1 hour', session => true);
	PREPARE TRANSACTION 'sp_grant'});
# Warm up past the first prune, then measure.
$c->query('CALL bind_names(1, 3000)');
my $before = $c->query('SELECT record_bytes()');
$node->safe_psql('postgres', q{COMMIT PREPARED 'sp_grant'});
$c->query('CALL bind_names(3001, 10000)');
my $after = $c->query('SELECT record_bytes()');
cmp_ok($after - $before, '<', 65536,
	"10,000 more distinct names bound and released: the record stays bounded ($before -> $after bytes)");

# A release whose transaction rolls back, with a prune in that transaction: the lease stays bound
# and recorded.
$c->query(q{BEGIN;
	SELECT fencelock.release('sp:rolled-back', 'pooled');
	DO $$ BEGIN FOR i IN 1 .. 2100 LOOP
	  PERFORM fencelock.acquire('sq:' || i, 'pooled', '1 minute', session => true);
	  PERFORM fencelock.release('sq:' || i, 'pooled');
	END LOOP; END $$;
	ROLLBACK});
my $pid = $c->query('SELECT pg_backend_pid()');
$c->quit;
is(fl_wait_for($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0'), '0',
	'the pooled connection has closed');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(resource || ' ' || ended_how, ', ' ORDER BY resource)
		  FROM fencelock.history WHERE resource IN ('sp:kept', 'sp:prepared', 'sp:rolled-back')}),
	'sp:kept released, sp:prepared released, sp:rolled-back released',
	'its exit sweep released what it still held, through every prune');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM fencelock.leases WHERE resource LIKE 'sp:%' AND state <> 'free'}),
	'0', 'no lease of the connection is held');

done_testing();
