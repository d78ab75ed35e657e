-- Issue 20, defect 14: the direct lease-row path (src/store/row.c) compared owners byte by byte,
-- while the statements of src/store/rule.c compare them with the owner column's collation.  When a
-- superuser gave owner a nondeterministic (here case-insensitive) collation, the two disagreed:
-- 'ALICE' re-acquiring alice's live lease got NULL in READ COMMITTED (the direct path: another
-- owner's lease) and alice's fence in REPEATABLE READ (the statement: the same owner).  Both now
-- compare with the column's collation.  A nondeterministic collation needs ICU: on a server built
-- without it, the test says so and checks nothing else
-- (expected/115_lease_direct_nondeterministic_owner_1.out).
\set VERBOSITY terse
-- In a database of its own: the views fencelock.leases and fencelock.lease_holders, which read
-- owner, are dropped there so that the column's collation can change.
SELECT current_database() AS regress_db \gset
CREATE DATABASE fencelock_owner_collation;
\c fencelock_owner_collation
CREATE EXTENSION fencelock;
DO $$
BEGIN
  CREATE COLLATION owner_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
EXCEPTION WHEN feature_not_supported THEN
  NULL;  -- ICU is not supported in this build
END $$;
SELECT EXISTS (SELECT FROM pg_catalog.pg_collation WHERE collname = 'owner_ci') AS have_icu \gset
\if :have_icu
ALTER EXTENSION fencelock DROP VIEW fencelock.leases;
DROP VIEW fencelock.leases;
ALTER EXTENSION fencelock DROP VIEW fencelock.lease_holders;
DROP VIEW fencelock.lease_holders;
ALTER TABLE fencelock.lease ALTER COLUMN owner TYPE pg_catalog.text COLLATE owner_ci;
SELECT fencelock.acquire('ci', 'alice', '1 hour') AS fence;
-- The same owner, spelled otherwise: its live lease, with its fence, in both isolation levels.
SELECT fencelock.acquire('ci', 'ALICE', '1 hour') AS fence;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('ci', 'Alice', '1 hour') AS fence;
COMMIT;
SELECT fencelock.renew('ci', 'aLiCe', '1 hour') AS renewed;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.renew('ci', 'alicE', '1 hour') AS renewed;
COMMIT;
-- Another owner is refused in both.
SELECT fencelock.acquire('ci', 'bob', '1 hour') AS fence;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('ci', 'bob', '1 hour') AS fence;
COMMIT;
SELECT owner, fence, granted_how FROM fencelock.lease WHERE resource = 'ci';
SELECT fencelock.release('ci', 'ALICE') AS released;
SELECT owner IS NULL AS free FROM fencelock.lease WHERE resource = 'ci';
-- After its own lease expired, the same owner spelled otherwise gets a new fence granted 'after
-- own expiry' (e), not 'taken over' (t), in both levels.
SELECT fencelock.acquire(r, 'carol', '10 ms') AS fence FROM unnest(ARRAY['rc', 'rr']) AS r;
SELECT pg_sleep(0.05);
SELECT fencelock.acquire('rc', 'CAROL', '1 hour') AS fence;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('rr', 'Carol', '1 hour') AS fence;
COMMIT;
SELECT resource, owner, fence, granted_how FROM fencelock.lease
 WHERE resource IN ('rc', 'rr') ORDER BY resource;
-- Back to a deterministic collation: the direct path compares bytes again.
ALTER TABLE fencelock.lease ALTER COLUMN owner TYPE pg_catalog.text COLLATE pg_catalog."default";
SELECT fencelock.acquire('det', 'alice', '1 hour') AS fence;
SELECT fencelock.acquire('det', 'ALICE', '1 hour') AS fence;
\else
\echo 'no ICU collations on this server: nondeterministic collations cannot be made'
\endif
\c :regress_db
DROP DATABASE fencelock_owner_collation;
