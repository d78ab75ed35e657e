-- Issue 10, finding 15 (waiting part): stats.grants counts only grants that are kept.  A round
-- of acquire_all that does not get every resource is rolled back; its grants of the free
-- resources were counted all the same.  Also: nothing of such a round survives (no row, no
-- history), and a takeover rolled back with its round is neither counted nor logged.
\set VERBOSITY terse
SELECT fencelock.acquire('rb:zbusy', 'holder', '1 minute') IS NOT NULL AS held;
SELECT fencelock.stats_reset();

-- Try-once (wait 0): rb:a and rb:b are granted, rb:zbusy (last in byte order) is not; the round is rolled back.
SELECT fencelock.acquire_all(ARRAY['rb:a', 'rb:b', 'rb:zbusy'], 'g') IS NULL AS none;
SELECT grants, reacquires, takeovers, busy FROM fencelock.stats;

-- With a wait: every round until the deadline grants rb:a and rb:b, then gives them back.
SELECT fencelock.acquire_all(ARRAY['rb:a', 'rb:b', 'rb:zbusy'], 'g', '1 minute', '300 milliseconds') IS NULL AS none_after_wait;
SELECT grants, reacquires, takeovers, busy >= 2 AS busy_counted, waits, wait_timeouts FROM fencelock.stats;
SELECT count(*) AS rows_left FROM fencelock.leases WHERE resource IN ('rb:a', 'rb:b');

-- A takeover in a rolled-back round: the expired lease on rb:old stays the old holder's.
SELECT fencelock.acquire('rb:old', 'old', '100 milliseconds') IS NOT NULL AS old_held;
SELECT pg_sleep(0.2);
SELECT fencelock.acquire_all(ARRAY['rb:zbusy', 'rb:old'], 'g') IS NULL AS none;
SELECT grants, takeovers FROM fencelock.stats;
SELECT owner FROM fencelock.leases WHERE resource = 'rb:old';

-- When every resource is had, each grant counts once.
SELECT cardinality(fencelock.acquire_all(ARRAY['rb:a', 'rb:b', 'rb:old'], 'g')) AS granted;
SELECT grants, takeovers FROM fencelock.stats;
-- The waiting acquire counts its grant once too.
SELECT fencelock.release('rb:zbusy', 'holder') AS released;
SELECT fencelock.acquire('rb:zbusy', 'g', '1 minute', '1 second') IS NOT NULL AS got;
SELECT grants FROM fencelock.stats;

SELECT fencelock.release_all(ARRAY['rb:a', 'rb:b', 'rb:old', 'rb:zbusy'], 'g') AS released;
SELECT fencelock.purge('0') >= 0 AS purged;
SELECT fencelock.stats_reset();
