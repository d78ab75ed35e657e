-- Issue 20, item 3 (the direct path and the statements must agree): more of what a superuser can
-- do to fencelock.lease, where changing the row directly (src/store/row.c, READ COMMITTED) would not
-- be what store/rule.c's statements do (REPEATABLE READ here).  Each time the direct path now gives
-- way, and both levels give the statement's answer; before, READ COMMITTED granted, renewed or
-- released where the statement refuses:
--   - an identity column: UPDATE may not set it (428C9);
--   - a missing column the statement sets (lock_delay): 42703;
--   - an extension owner that is no longer a superuser and lost UPDATE on the table: 42501.
-- In a database of its own, where the view fencelock.leases, which reads the columns, is dropped.
\set VERBOSITY terse
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_sl_owner SUPERUSER;
CREATE DATABASE fencelock_superuser_layouts OWNER regress_sl_owner;
\c fencelock_superuser_layouts
SET SESSION AUTHORIZATION regress_sl_owner;
CREATE EXTENSION fencelock;
RESET SESSION AUTHORIZATION;
ALTER EXTENSION fencelock DROP VIEW fencelock.leases;
DROP VIEW fencelock.leases;
SELECT fencelock.acquire(r, 'a', '1 hour') AS fence FROM unnest(ARRAY['rc', 'rr']) AS r;
SELECT fencelock.release(r, 'a') AS released FROM unnest(ARRAY['rc', 'rr']) AS r;

-- 1. fence an identity column.
ALTER TABLE fencelock.lease ALTER COLUMN fence ADD GENERATED ALWAYS AS IDENTITY;
SELECT fencelock.acquire('rc', 'b', '1 hour') AS fence;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('rr', 'b', '1 hour') AS fence;
COMMIT;
ALTER TABLE fencelock.lease ALTER COLUMN fence DROP IDENTITY;

-- 2. lock_delay dropped: the 0.2.0 grant sets it.
ALTER TABLE fencelock.lease DROP COLUMN lock_delay;
\set VERBOSITY sqlstate
SELECT fencelock.acquire('rc', 'b', '1 hour') AS fence;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('rr', 'b', '1 hour') AS fence;
COMMIT;
\set VERBOSITY terse
ALTER TABLE fencelock.lease ADD COLUMN lock_delay pg_catalog.interval;
SELECT fencelock.acquire(r, 'b', '1 hour') AS fence FROM unnest(ARRAY['rc', 'rr']) AS r;

-- 3. The extension's owner refused UPDATE on its table while a superuser, then made an ordinary
-- role: the statements, run as that owner, are refused from then on; so is the direct path, which
-- checks the owner's privileges at each call (the role's change does not invalidate the table).
REVOKE UPDATE ON fencelock.lease FROM regress_sl_owner;
SELECT fencelock.renew('rc', 'b', '2 hours') AS renewed;
ALTER ROLE regress_sl_owner NOSUPERUSER;
SELECT fencelock.renew('rc', 'b', '2 hours') AS renewed;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.renew('rr', 'b', '2 hours') AS renewed;
COMMIT;
SELECT fencelock.release('rc', 'b') AS released;
GRANT UPDATE ON fencelock.lease TO regress_sl_owner;
SELECT fencelock.release('rc', 'b') AS released;
SELECT resource, owner, fence FROM fencelock.lease ORDER BY resource;

\c :regress_db
DROP DATABASE fencelock_superuser_layouts;
DROP ROLE regress_sl_owner;
