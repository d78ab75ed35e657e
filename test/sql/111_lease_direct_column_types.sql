-- The direct path (src/store/row.c) stores the values it computes as they are; store/rule.c's
-- statements coerce each value to its column's declared type, type modifier included.  When a
-- superuser has given a column of fencelock.lease a type modifier, the direct path must give way.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;

-- A type modifier: interval SECOND(0) keeps whole seconds, so the statement stores a lock_delay of
-- 1.5 s as 2 s; every grant below must store 00:00:02.
ALTER TABLE fencelock.lease ALTER COLUMN lock_delay TYPE interval SECOND(0);
SET fencelock.lock_delay = '1500ms';
SELECT fencelock.acquire('typmod', 'a', '1 hour') AS fence;
SELECT lock_delay FROM fencelock.lease WHERE resource = 'typmod';
SELECT fencelock.release('typmod', 'a') AS released;
SELECT fencelock.acquire('typmod', 'b', '1 hour') AS fence;
SELECT lock_delay FROM fencelock.lease WHERE resource = 'typmod';
RESET fencelock.lock_delay;
ALTER TABLE fencelock.lease ALTER COLUMN lock_delay TYPE pg_catalog.interval;
TRUNCATE fencelock.lease, fencelock.fence_floor;
