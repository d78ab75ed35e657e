-- The direct path (src/store/row.c) changes one row of fencelock.lease itself; store/rule.c's UPDATE
-- statements name the table without ONLY.  When a superuser has made fencelock.lease a partition,
-- the statement checks the partition constraint on the new version; when fencelock.lease has
-- inheritance children, the statement updates their matching rows too.  The direct path must
-- then give way to the statements instead of skipping either.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.acquire('part', 'a', '1 hour') AS fence;

-- 1. fencelock.lease as the partition for fences below 3: the grant that would issue fence 3
-- violates the partition constraint, and nothing is written.
CREATE TABLE lease_parts (LIKE fencelock.lease) PARTITION BY RANGE (fence);
ALTER TABLE lease_parts ATTACH PARTITION fencelock.lease FOR VALUES FROM (MINVALUE) TO (3);
SELECT fencelock.release('part', 'a') AS released;
SELECT fencelock.acquire('part', 'b', '1 hour') AS fence;
SELECT fencelock.release('part', 'b') AS released;
SELECT fencelock.acquire('part', 'c', '1 hour') AS fence;
SELECT owner, fence FROM fencelock.lease WHERE resource = 'part';
ALTER TABLE lease_parts DETACH PARTITION fencelock.lease;
DROP TABLE lease_parts;

-- 2. An inheritance child with a row for the same resource: the grant changes both rows.
CREATE TABLE lease_child () INHERITS (fencelock.lease);
INSERT INTO lease_child (resource, owner, fence) VALUES ('part', NULL, 7);
SELECT fencelock.acquire('part', 'c', '1 hour') AS fence;
SELECT tableoid::regclass AS "table", owner, fence FROM fencelock.lease WHERE resource = 'part'
 ORDER BY 1;
DROP TABLE lease_child;
-- ANALYZE clears the flag the dropped child left; the following tests get the direct path again.
ANALYZE fencelock.lease;
SELECT relhassubclass FROM pg_class WHERE oid = 'fencelock.lease'::regclass;
SELECT fencelock.release('part', 'c') AS released;
TRUNCATE fencelock.lease, fencelock.fence_floor;
