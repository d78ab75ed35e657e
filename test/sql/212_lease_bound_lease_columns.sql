-- Issue 20, defect 14 (second part): the lease-bound check (src/fence/bound.c) read fencelock.lease
-- directly by column position, fence third and holder sixth, and raised XX000 when a superuser had
-- moved a column (dropped and added again); it read a fence of another type as if it were a
-- bigint, a NULL fence as 0, and opened index 0 when the primary key was dropped.  It now finds
-- the columns by name and type where store/row.c lays out the table, and asks with a statement
-- (which casts to bigint and name) wherever the direct read would not be the same; READ COMMITTED
-- (the direct read) and REPEATABLE READ (the statement) give the same answers.  In a database of
-- its own, where the view fencelock.leases, which reads the columns, is dropped: the lease table is
-- left with its columns moved.
\set VERBOSITY terse
SELECT current_database() AS regress_db \gset
CREATE DATABASE fencelock_lease_columns;
\c fencelock_lease_columns
CREATE EXTENSION fencelock;
ALTER EXTENSION fencelock DROP VIEW fencelock.leases;
DROP VIEW fencelock.leases;
CREATE ROLE regress_lc_writer;
CREATE TABLE lc (id int PRIMARY KEY, fence bigint);
GRANT SELECT, INSERT, UPDATE, DELETE ON lc TO regress_lc_writer;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON lc FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=lc');
SELECT fencelock.acquire('lc', 'a', '1 hour') AS fence;

-- 1. holder dropped and added again, now the last column (it was XX000 in READ COMMITTED).
ALTER TABLE fencelock.lease DROP COLUMN holder;
ALTER TABLE fencelock.lease ADD COLUMN holder pg_catalog.name;
SELECT attnum FROM pg_attribute WHERE attrelid = 'fencelock.lease'::regclass AND attname = 'holder';
INSERT INTO lc VALUES (1, 1);
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO lc VALUES (2, 1);
COMMIT;
-- The holder is read from where it is now: a role that is not the holder may not write under
-- the lease, the holder may.
SET ROLE regress_lc_writer;
UPDATE lc SET fence = 1 WHERE id = 1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE lc SET fence = 1 WHERE id = 1;
COMMIT;
RESET ROLE;
UPDATE fencelock.lease SET holder = 'regress_lc_writer' WHERE resource = 'lc';
SET ROLE regress_lc_writer;
UPDATE lc SET fence = 1 WHERE id = 1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE lc SET fence = 1 WHERE id = 2;
COMMIT;
RESET ROLE;

-- 2. fence of another type: numeric, read through the statement's cast.
ALTER TABLE fencelock.lease ALTER COLUMN fence TYPE pg_catalog.numeric;
UPDATE lc SET fence = 1 WHERE id = 1;
UPDATE lc SET fence = 0 WHERE id = 1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE lc SET fence = 1 WHERE id = 1;
COMMIT;
-- The other statements that return a fence refuse one of another type (it was read as a bigint).
SELECT fencelock.current_fence('lc') AS fence;
SELECT fencelock.acquire('lc', 'a', '1 hour') AS fence;
ALTER TABLE fencelock.lease ALTER COLUMN fence TYPE pg_catalog.int8;

-- 3. fence moved to the end, its values kept (it was XX000 in READ COMMITTED).
ALTER TABLE fencelock.lease RENAME COLUMN fence TO fence_before;
ALTER TABLE fencelock.lease ADD COLUMN fence pg_catalog.int8;
UPDATE fencelock.lease SET fence = fence_before;
ALTER TABLE fencelock.lease DROP COLUMN fence_before;
ALTER TABLE fencelock.lease ALTER COLUMN fence SET NOT NULL;
SELECT fencelock.release('lc', 'a') AS released;
SELECT fencelock.acquire('lc', 'b', '1 hour') AS fence;
UPDATE lc SET fence = 2 WHERE id = 1;
UPDATE lc SET fence = 1 WHERE id = 2;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE lc SET fence = 2 WHERE id = 2;
COMMIT;

-- 4. A NULL fence is no fence issued, in both levels (a write carrying 0 used to pass).
ALTER TABLE fencelock.lease ALTER COLUMN fence DROP NOT NULL;
UPDATE fencelock.lease SET fence = NULL WHERE resource = 'lc';
UPDATE lc SET fence = 0 WHERE id = 1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE lc SET fence = 0 WHERE id = 1;
COMMIT;
-- So do current_fence and assert_fence (they answered 0).
SELECT fencelock.current_fence('lc') AS fence;
SELECT fencelock.assert_fence('lc', 0);
UPDATE fencelock.lease SET fence = 2 WHERE resource = 'lc';
ALTER TABLE fencelock.lease ALTER COLUMN fence SET NOT NULL;

-- 5. Without the primary key the statement finds the row (it was XX000: index 0).
ALTER TABLE fencelock.lease DROP CONSTRAINT lease_pkey;
UPDATE lc SET fence = 2 WHERE id = 1;
UPDATE lc SET fence = 1 WHERE id = 1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE lc SET fence = 2 WHERE id = 2;
COMMIT;
ALTER TABLE fencelock.lease ADD PRIMARY KEY (resource);

-- 6. holder dropped: the statement's error, with its SQLSTATE (42703), not XX000.
ALTER TABLE fencelock.lease DROP COLUMN holder;
\set VERBOSITY sqlstate
UPDATE lc SET fence = 2 WHERE id = 1;
\set VERBOSITY terse
ALTER TABLE fencelock.lease ADD COLUMN holder pg_catalog.name;

-- 7. holder of type text: read through the statements' cast to name, by the lease-bound check and
-- by assert_fence alike (it was read as a name: past the end of the text).
ALTER TABLE fencelock.lease ALTER COLUMN holder TYPE pg_catalog.text;
UPDATE fencelock.lease SET holder = 'regress_lc_writer' WHERE resource = 'lc';
SET ROLE regress_lc_writer;
UPDATE lc SET fence = 2 WHERE id = 1;
BEGIN;
SELECT fencelock.assert_fence('lc', 2);
COMMIT;
RESET ROLE;
ALTER TABLE fencelock.lease ALTER COLUMN holder TYPE pg_catalog.name;

-- With its columns moved, the table is still read directly, and the answers are the same.
UPDATE lc SET fence = 2 WHERE id = 1;
UPDATE lc SET fence = 1 WHERE id = 1;
SELECT * FROM lc ORDER BY id;

\c :regress_db
DROP DATABASE fencelock_lease_columns;
DROP ROLE regress_lc_writer;
