-- Issue 20, defect 11: the counts that follow the transaction's outcome (grants, reacquires,
-- takeovers, renewals, releases, revokes) were added at PREPARE TRANSACTION, so a grant undone by
-- ROLLBACK PREPARED was counted.  A prepared transaction's counts now wait in shared memory for
-- its end: added when COMMIT PREPARED commits it, dropped when ROLLBACK PREPARED (or a failed
-- PREPARE) rolls it back.  (The server runs with max_prepared_transactions > 0.)
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.acquire('pc:held', 'h', '1 hour') IS NOT NULL AS held;
SELECT fencelock.stats_reset();

-- Rolled back: nothing counted, nothing issued.
BEGIN;
SELECT fencelock.acquire('pc:rolled-back', 'a') AS fence;
SELECT fencelock.renew('pc:held', 'h', '1 hour') AS renewed;
PREPARE TRANSACTION 'fencelock_502_rollback';
SELECT grants, renewals FROM fencelock.stats;
ROLLBACK PREPARED 'fencelock_502_rollback';
SELECT grants, reacquires, renewals, releases, revokes FROM fencelock.stats;
SELECT fencelock.current_fence('pc:rolled-back') IS NULL AS nothing_issued;

-- Committed: counted at COMMIT PREPARED, not before; what a savepoint rolled back is not.
BEGIN;
SELECT fencelock.acquire('pc:kept', 'a') AS fence;
SELECT fencelock.acquire('pc:kept', 'a') AS same_fence;
SELECT fencelock.renew('pc:held', 'h', '1 hour') AS renewed;
SAVEPOINT s;
SELECT fencelock.acquire('pc:savepoint', 'a') AS fence;
ROLLBACK TO SAVEPOINT s;
SELECT fencelock.revoke('pc:held') IS NOT NULL AS revoked;
PREPARE TRANSACTION 'fencelock_502_commit';
SELECT grants, reacquires, renewals, releases, revokes FROM fencelock.stats;
COMMIT PREPARED 'fencelock_502_commit';
SELECT grants, reacquires, renewals, releases, revokes FROM fencelock.stats;

-- A PREPARE that fails (its identifier is in use) rolls back: nothing counted.
BEGIN;
PREPARE TRANSACTION 'fencelock_502_taken';
BEGIN;
SELECT fencelock.release('pc:kept', 'a') AS released;
PREPARE TRANSACTION 'fencelock_502_taken';
ROLLBACK PREPARED 'fencelock_502_taken';
SELECT grants, reacquires, renewals, releases, revokes FROM fencelock.stats;

-- Prepared before stats_reset, committed after it: counted after the reset, at its commit.
BEGIN;
SELECT fencelock.release('pc:kept', 'a') AS released;
PREPARE TRANSACTION 'fencelock_502_across_reset';
SELECT fencelock.stats_reset();
COMMIT PREPARED 'fencelock_502_across_reset';
SELECT grants, reacquires, renewals, releases, revokes FROM fencelock.stats;

-- Ordinary transactions count as before.
BEGIN;
SELECT fencelock.acquire('pc:plain', 'a') AS fence;
COMMIT;
SELECT grants, releases FROM fencelock.stats;
SELECT count(*) AS prepared_left FROM pg_prepared_xacts WHERE gid LIKE 'fencelock_502_%';
TRUNCATE fencelock.lease, fencelock.fence_floor;
