-- Contention per resource (issue 26): fencelock.resource_stats counts, for each resource, busy
-- attempts, grants and takeovers, hold time, waits, refused releases and stale fences with how
-- late the stale write came after the grant that superseded it.  Grants and releases count when
-- their transaction commits, attempts at once.  (The server runs with the defaults:
-- max_resources 5000, max_waiters 0.)
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.resource_stats_reset();
SELECT resources, evicted FROM fencelock.resource_stats_info;

-- Five busy attempts on a held resource and a 300 ms hold.
SELECT fencelock.acquire('rs:hot', 'a', '10s') AS fence;
SELECT count(*) FILTER (WHERE f IS NULL) AS busy_answers
  FROM (SELECT fencelock.acquire('rs:hot', 'b', '10s') AS f FROM generate_series(1, 5)) AS t;
SELECT pg_sleep(0.3);
SELECT fencelock.release('rs:hot', 'a') AS released;
SELECT fencelock.release('rs:hot', 'b') AS released_by_other;
SELECT resource, grants, takeovers, busy, holds, hold_time_ms >= 300 AS held_300ms,
       max_hold_ms >= 300 AND max_hold_ms < 10000 AS max_hold_300ms, releases_refused,
       last_grant IS NOT NULL AS last_grant, held
  FROM fencelock.resource_stats WHERE resource = 'rs:hot';

-- Counts follow the transaction: a rolled-back grant and a release undone by a savepoint's
-- rollback are not counted; the grant committed in the same transaction is.
BEGIN;
SELECT fencelock.acquire('rs:rolled', 'a') AS fence;
ROLLBACK;
BEGIN;
SELECT fencelock.acquire('rs:kept', 'a') AS fence;
SAVEPOINT s;
SELECT fencelock.release('rs:kept', 'a') AS released;
ROLLBACK TO SAVEPOINT s;
SELECT grants FROM fencelock.resource_stats WHERE resource = 'rs:kept';
COMMIT;
SELECT resource, grants, holds, held FROM fencelock.resource_stats
 WHERE resource IN ('rs:rolled', 'rs:kept') ORDER BY 1;
-- The same owner's live lease again is no new grant; its release ends the one hold.
SELECT fencelock.acquire('rs:kept', 'a') AS same_fence;
SELECT fencelock.release('rs:kept', 'a') AS released;
SELECT grants, holds, held FROM fencelock.resource_stats WHERE resource = 'rs:kept';

-- A takeover ends the expired lease's hold at its deadline; a stale lease-bound write 400 ms
-- after the takeover is refused and counted with how late it came.
CREATE TABLE rs_docs (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON rs_docs FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=rs:lb');
SELECT fencelock.acquire('rs:lb', 'a', '100ms') AS fence_a;
INSERT INTO rs_docs VALUES (1, 'a', 1);
SELECT pg_sleep(0.15);
SELECT fencelock.acquire('rs:lb', 'b', '30s') AS fence_b;
SELECT pg_sleep(0.4);
UPDATE rs_docs SET v = 'late', fence = 1 WHERE id = 1;
SELECT grants, takeovers, holds, max_hold_ms >= 90 AND max_hold_ms < 140 AS held_until_deadline,
       stale_rejected, max_stale_ms >= 300 AS stale_300ms, max_stale_ms < 5000 AS stale_bounded
  FROM fencelock.resource_stats WHERE resource = 'rs:lb';
-- assert_fence's refusals count too.
DO $$ BEGIN PERFORM fencelock.assert_fence('rs:lb', 1);
EXCEPTION WHEN SQLSTATE 'FL001' THEN RAISE NOTICE 'refused'; END $$;
SELECT stale_rejected FROM fencelock.resource_stats WHERE resource = 'rs:lb';

-- FL001's detail says how late the write came, from a second on (below, outputs stay the same).
SELECT pg_sleep(0.7);
DO $$
DECLARE d text;
BEGIN
    UPDATE rs_docs SET v = 'later', fence = 1 WHERE id = 1;
EXCEPTION WHEN SQLSTATE 'FL001' THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RAISE NOTICE '%', regexp_replace(d, '[0-9]+\.[0-9] s ago', 'N s ago');
END $$;
SELECT max_stale_ms >= 1000 AS stale_1s FROM fencelock.resource_stats WHERE resource = 'rs:lb';

-- A wait that times out: counted with its time, the waiters queued (this one) and the timeout.
SELECT fencelock.acquire('rs:lb', 'c', '1s', wait => '100ms') AS fence_c;
SELECT waits, max_wait_ms >= 100 AS waited_100ms, wait_time_ms >= max_wait_ms AS total,
       wait_timeouts, max_waiters, waiters_refused
  FROM fencelock.resource_stats WHERE resource = 'rs:lb';

-- Readable by everyone, reset only by those allowed to; owner tokens are never shown.
CREATE ROLE fl_rs_reader;
SET ROLE fl_rs_reader;
SELECT count(*) > 0 AS readable FROM fencelock.resource_stats;
SELECT fencelock.resource_stats_reset();
RESET ROLE;
DROP ROLE fl_rs_reader;
SELECT count(*) AS owner_columns FROM pg_attribute
 WHERE attrelid = 'fencelock.resource_stats'::regclass AND attname ~ 'owner';
SELECT fencelock.resource_stats_reset();
SELECT count(*) AS rows_after_reset FROM fencelock.resource_stats;
DROP TABLE rs_docs;
SELECT fencelock.release('rs:lb', 'b');
