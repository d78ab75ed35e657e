-- Issue 10, finding 15 (lease parts).
-- (a) purge(idle) with idle shorter than the holder's lock_delay deleted a row still inside its
-- delay, and the resource was then granted to another owner at once.  A purge never deletes a row
-- whose expires_at + lock_delay is still ahead, nor a held lease.
-- (b) grants counted grants that acquire_all (or the caller) rolled back.  Grants, reacquires,
-- takeovers, renewals and releases now count when their transaction commits.
\set VERBOSITY terse
SET fencelock.lock_delay = '1h';
SELECT fencelock.acquire('pd:delayed', 'a', '10 milliseconds') IS NOT NULL AS granted;
RESET fencelock.lock_delay;
SELECT fencelock.acquire('pd:held', 'h', '1 hour') IS NOT NULL AS held;
SELECT fencelock.acquire('pd:free', 'f', '1 hour') IS NOT NULL AND fencelock.release('pd:free', 'f') AS freed;
SELECT pg_sleep(0.05);
SELECT fencelock.purge('0') >= 1 AS purged;
SELECT resource, state FROM fencelock.leases WHERE resource LIKE 'pd:%' ORDER BY 1;
SELECT fencelock.acquire('pd:delayed', 'b') IS NULL AS still_delayed;
SELECT fencelock.release('pd:held', 'h') AS released;

-- (b) Counters follow the transaction's outcome.
SELECT fencelock.stats_reset();
BEGIN;
SELECT fencelock.acquire('cnt:rolled-back', 'a') IS NOT NULL AS granted;
ROLLBACK;
BEGIN;
SELECT fencelock.acquire('cnt:kept', 'a') IS NOT NULL AS granted;
SAVEPOINT s;
SELECT fencelock.acquire('cnt:savepoint', 'a') IS NOT NULL AS granted;
SELECT fencelock.renew('cnt:kept', 'a') AS renewed;
ROLLBACK TO SAVEPOINT s;
SELECT fencelock.release('cnt:kept', 'a') AS released;
COMMIT;
-- acquire_all grants cnt:all:a, then finds cnt:all:b busy and rolls its round back.
SELECT fencelock.acquire('cnt:all:b', 'other') IS NOT NULL AS busy_one;
SELECT fencelock.acquire_all(ARRAY['cnt:all:a', 'cnt:all:b'], 'g') IS NULL AS none_granted;
-- Counted: cnt:kept and cnt:all:b (granted), one release; nothing of what was rolled back.
SELECT grants, reacquires, renewals, releases, busy FROM fencelock.stats;
SELECT fencelock.release('cnt:all:b', 'other') AS released;
SELECT fencelock.purge('0') >= 0 AS purged;
