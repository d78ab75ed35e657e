-- Waiting acquire, acquire_all/release_all, lock_delay, counters, history, and their settings.
-- The suite's cluster preloads fencelock (shared_preload_libraries), so counters are kept.
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.stats_reset();
SELECT grants, takeovers, busy, waits FROM fencelock.stats;

-- A waiting acquire returns NULL at its deadline while another owner holds the lease ...
SELECT fencelock.acquire('w:1', 'holder', '1 minute') AS held;
SELECT fencelock.acquire('w:1', 'waiter', '10 seconds', '200 milliseconds') IS NULL AS timed_out;
-- ... and takes the lease when the holder's lease runs out before the deadline (no release).
SELECT fencelock.acquire('w:2', 'holder', '300 milliseconds') AS held2;
SELECT fencelock.acquire('w:2', 'waiter', '10 seconds', '5 seconds') AS taken_over;
SELECT owner, granted_how FROM fencelock.leases WHERE resource = 'w:2';
-- wait => '0' is a single try; the holder's own waiting acquire returns its fence at once.
SELECT fencelock.acquire('w:1', 'other', '10 seconds', '0') IS NULL AS busy_no_wait;
SELECT fencelock.acquire('w:1', 'holder', '1 minute', '5 seconds') AS own_fence;

-- A waiting acquire needs READ COMMITTED (a release would stay invisible to its snapshot).
\set VERBOSITY default
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('w:1', 'rr-waiter', '10 seconds', '100 milliseconds');
ROLLBACK;
SELECT fencelock.acquire('w:1', 'x', '10 seconds', NULL);
SELECT fencelock.acquire('w:1', 'x', '10 seconds', '-1 second');
\set VERBOSITY terse

-- acquire_all: all or none, fences in the caller's order.
SELECT fencelock.acquire_all(ARRAY['all:c', 'all:a', 'all:b'], 'g1') AS fences;
SELECT resource, owner FROM fencelock.leases WHERE resource LIKE 'all:%' ORDER BY 1;
-- One of them busy: nothing is granted, and no fence is issued for the free ones.
SELECT fencelock.acquire('all:y', 'other') AS y;
SELECT fencelock.acquire_all(ARRAY['all:x', 'all:y', 'all:z'], 'g2') IS NULL AS none_granted;
SELECT count(*) AS partial_grants FROM fencelock.leases WHERE resource IN ('all:x', 'all:z');
-- ... and with a wait, still none once the deadline passes.
SELECT fencelock.acquire_all(ARRAY['all:x', 'all:y'], 'g2', '10 seconds', '100 milliseconds') IS NULL AS none_after_wait;
SELECT count(*) AS partial_grants FROM fencelock.leases WHERE resource = 'all:x';
SELECT fencelock.release_all(ARRAY['all:a', 'all:b', 'all:c', 'all:y'], 'g1') AS released;
\set VERBOSITY default
SELECT fencelock.acquire_all(ARRAY['all:a', 'all:a'], 'g3');
SELECT fencelock.acquire_all(ARRAY['all:a', NULL], 'g3');
SELECT fencelock.acquire_all('{}', 'g3');
SELECT fencelock.acquire_all(NULL, 'g3');
SELECT fencelock.acquire_all(ARRAY['all:a'], NULL);
SELECT fencelock.release_all(ARRAY[''], 'g3');
\set VERBOSITY terse

-- A cancel (statement_timeout) inside acquire_all, caught by a PL/pgSQL handler: the partial
-- grants are undone and the session is left in a clean state, with no transaction open.
SET statement_timeout = '300ms';
DO $$
BEGIN
    PERFORM fencelock.acquire_all(ARRAY['all:q1', 'w:1'], 'g9', '1 minute', '10 seconds');
EXCEPTION WHEN query_canceled THEN
    RAISE NOTICE 'acquire_all cancelled';
END $$;
RESET statement_timeout;
SELECT count(*) AS partial_grants FROM fencelock.leases WHERE resource = 'all:q1';
SELECT txid_current_if_assigned() IS NULL AS no_transaction_left_open;
SELECT fencelock.acquire('all:q1', 'g10') IS NOT NULL AS free_for_others;

-- lock_delay: a lease that expired without a release stays ungrantable to others for a while;
-- its own owner may come back, and a released lease is free at once.
SET fencelock.lock_delay = '1h';
SELECT fencelock.acquire('d:1', 'a', '10 milliseconds') AS d1;
SELECT pg_sleep(0.05);
SELECT fencelock.acquire('d:1', 'b') IS NULL AS delayed;
SELECT fencelock.acquire('d:1', 'a') AS own_again;
SELECT fencelock.release('d:1', 'a'), fencelock.acquire('d:1', 'b') AS after_release;
RESET fencelock.lock_delay;
-- The delay is the holder's, kept with its grant: an acquirer's own setting does not matter.
SELECT fencelock.acquire('d:2', 'a', '10 milliseconds') IS NOT NULL AS no_delay_holder;
SELECT pg_sleep(0.05);
SET fencelock.lock_delay = '1h';
SELECT fencelock.acquire('d:2', 'b') IS NOT NULL AS taken_over_at_once;
RESET fencelock.lock_delay;

-- Counters since the reset above.
SELECT grants, takeovers, reacquires, busy >= 3 AS some_busy, releases, releases_refused,
       waits, wait_timeouts, wait_time_ms > 0 AS waited
  FROM fencelock.stats;
SELECT fencelock.renew('w:2', 'waiter') AS renewed, fencelock.renew('w:2', 'nobody') AS refused;
SELECT renewals, renewals_refused FROM fencelock.stats;

-- Stale and unfenced writes are counted per table.
CREATE TABLE counted (id int PRIMARY KEY, last_fence bigint, v int);
CREATE TRIGGER fence BEFORE UPDATE ON counted FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
INSERT INTO counted VALUES (1, 10, 0);
UPDATE counted SET last_fence = 9, v = 1;
UPDATE counted SET last_fence = 8, v = 1;
UPDATE counted SET v = 1;
BEGIN;
SELECT fencelock.assert_fence('w:2', 0);
ROLLBACK;
SELECT "table", stale_rejected, unfenced_rejected FROM fencelock.table_stats;
SELECT stale_rejected, unfenced_rejected FROM fencelock.stats;
DROP TABLE counted;

-- History: grants and how they ended.
SET fencelock.history = on;
SELECT fencelock.acquire('h:1', 'a', '100 milliseconds') AS h1;
SELECT fencelock.renew('h:1', 'a', '100 milliseconds');
SELECT pg_sleep(0.15);
SELECT fencelock.acquire('h:1', 'b') AS h2;
SELECT fencelock.release('h:1', 'b');
SELECT fencelock.acquire('h:1', 'c', '10 milliseconds') AS h3;
SELECT pg_sleep(0.02);
SELECT fencelock.purge('0') >= 1 AS purged;
SELECT resource, fence, owner, granted_how, ended_how, ended_at IS NOT NULL AS ended,
       ended_at <= expires_at + interval '1 millisecond' OR ended_how = 'released' AS ended_in_time
  FROM fencelock.history WHERE resource = 'h:1' ORDER BY fence;
RESET fencelock.history;

-- fencelock.default_ttl is the ttl of calls that name none.
SET fencelock.default_ttl = '2min';
SELECT fencelock.acquire('ttl:default', 'a') IS NOT NULL AS granted;
SELECT remaining > interval '90 seconds' AS two_minutes FROM fencelock.leases WHERE resource = 'ttl:default';
RESET fencelock.default_ttl;
SELECT fencelock.renew('ttl:default', 'a') AS renewed;
SELECT remaining <= interval '30 seconds' AS thirty_seconds FROM fencelock.leases WHERE resource = 'ttl:default';

-- Settings reject values outside their documented ranges.
\set VERBOSITY default
SET fencelock.lock_delay = -1;
SET fencelock.default_ttl = 0;
SET fencelock.history_retention = '10s';
SET fencelock.log_level = 'chatty';
SET fencelock.max_tables = 10;
\set VERBOSITY terse
SET fencelock.log_level = 'notice';
SELECT fencelock.acquire('log:1', 'a', '1 millisecond') AS l1;
SELECT pg_sleep(0.01);
SELECT fencelock.acquire('log:1', 'b') AS l2_logged;
RESET fencelock.log_level;
SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'fencelock.%' ORDER BY 1;
SELECT fencelock.stats_reset();
