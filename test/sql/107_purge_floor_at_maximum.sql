-- Issue 20, defect 13: the purge floor overflowed.  After a fence at 2^63-1 was purged, the floor
-- was 9223372036854775807 and floor + 1 was not checked: a new resource got the fence
-- -9223372036854775808, and its next grant fence 1 a second time.  No fence above such a floor
-- exists: a grant that needs one is refused with 22003 (as a grant on a row at that fence is, by
-- the statement's + 1 and by the direct path alike), and nothing of it is written.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
INSERT INTO fencelock.lease (resource, owner, fence, expires_at)
VALUES ('fm:max', NULL, 9223372036854775807, now() - interval '1 day');
SELECT fencelock.purge('0') AS purged;
SELECT floor FROM fencelock.fence_floor;

-- A new resource, and the purged one coming back: refused, whichever way it is asked for.
\set VERBOSITY default
SELECT fencelock.acquire('fm:new', 'a');
\set VERBOSITY terse
SELECT fencelock.acquire('fm:max', 'a');
SELECT fencelock.acquire('fm:new', 'a', '1 min');
SELECT fencelock.acquire('fm:new', 'a', '1 min', '1 s');
SELECT fencelock.acquire_all(ARRAY['fm:new', 'fm:other'], 'a');
-- In a savepoint, and caught by PL/pgSQL: the row inserted before the floor was read goes with it.
BEGIN;
SAVEPOINT s;
SELECT fencelock.acquire('fm:new', 'a');
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS lease_rows FROM fencelock.lease;
COMMIT;
DO $$
BEGIN
  PERFORM fencelock.acquire('fm:new', 'a');
EXCEPTION WHEN numeric_value_out_of_range THEN
  RAISE NOTICE 'refused: %', SQLERRM;
END $$;
SELECT count(*) AS lease_rows FROM fencelock.lease;
SELECT floor FROM fencelock.fence_floor;

-- One below the largest: the last fence is still issued, once.
UPDATE fencelock.fence_floor SET floor = 9223372036854775806;
SELECT fencelock.acquire('fm:last', 'a') AS last_fence;
SELECT fencelock.release('fm:last', 'a') AS released;
SELECT fencelock.acquire('fm:last', 'b');

-- A row at the largest fence: the direct path (READ COMMITTED) and the statement (REPEATABLE
-- READ) refuse the grant alike, and so does revoke; the row stays as it was.
TRUNCATE fencelock.lease, fencelock.fence_floor;
INSERT INTO fencelock.lease (resource, owner, fence, expires_at)
VALUES ('fm:row', NULL, 9223372036854775807, now() - interval '1 day');
SELECT fencelock.acquire('fm:row', 'a');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('fm:row', 'a');
ROLLBACK;
SELECT fencelock.revoke('fm:row');
SELECT resource, owner, fence FROM fencelock.lease ORDER BY resource;
TRUNCATE fencelock.lease, fencelock.fence_floor;
