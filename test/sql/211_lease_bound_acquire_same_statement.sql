-- Issue 20, defect 8: acquire and a lease-bound write in one statement.  The grant made by the
-- statement (in the VALUES of an INSERT, the SET list of an UPDATE, or a CTE) is the lease's latest
-- fence, so the write that carries it is accepted, in READ COMMITTED (where src/fence/bound.c reads
-- the lease row directly) as in REPEATABLE READ (where a statement reads it).  READ COMMITTED used
-- to refuse it: XX000 "unexpected result 1 locking the row of lease" for a lease that had a row
-- (the row's newest version was made by this same statement, after its snapshot), FL001 for a
-- lease granted for the first time (the statement's snapshot did not show the new row).
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
CREATE TABLE same_stmt (id int PRIMARY KEY, lease text, v text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON same_stmt FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease_column=lease');

-- A purge floor of 10, so that a lease granted for the first time gets 11: store/fence.c raises the new
-- row's fence in a second change, whose version the check must read.
SELECT fencelock.acquire('floor', 'x', '1 hour') AS fence;
UPDATE fencelock.lease SET fence = 10 WHERE resource = 'floor';
SELECT fencelock.release('floor', 'x') AS released;
SELECT fencelock.purge('0 seconds') AS purged;

-- Leases with a row, released: the next grant, made inside the write, takes a new fence.
SELECT fencelock.acquire(r, 'A', '1 hour') AS fence
  FROM unnest(ARRAY['old-rc', 'old-rr', 'cte-rc', 'cte-rr']) AS r;
SELECT fencelock.release(r, 'A') AS released
  FROM unnest(ARRAY['old-rc', 'old-rr', 'cte-rc', 'cte-rr']) AS r;

-- READ COMMITTED, each statement its own transaction.
SHOW transaction_isolation;
-- INSERT, a lease granted for the first time (it was FL001).
INSERT INTO same_stmt VALUES (1, 'new-rc', 'a', fencelock.acquire('new-rc', 'B', '1 hour'))
  RETURNING *;
-- INSERT, a lease with a row (it was XX000).
INSERT INTO same_stmt VALUES (2, 'old-rc', 'a', fencelock.acquire('old-rc', 'B', '1 hour'))
  RETURNING *;
-- UPDATE: the same owner's live lease keeps its fence, though the row changes again.
UPDATE same_stmt SET v = 'b', fence = fencelock.acquire(lease, 'B', '2 hours')
  WHERE id IN (1, 2) RETURNING *;
-- UPDATE after a release: another owner's grant, a new fence.
SELECT fencelock.release('old-rc', 'B') AS released;
UPDATE same_stmt SET v = 'c', fence = fencelock.acquire(lease, 'C', '1 hour')
  WHERE id = 2 RETURNING *;
-- A CTE that grants, and the INSERT that writes under the grant; the fence is then shown for the
-- rest of the transaction, and a DELETE under it passes.
BEGIN ISOLATION LEVEL READ COMMITTED;
WITH g AS (SELECT fencelock.acquire('cte-rc', 'B', '1 hour') AS f)
INSERT INTO same_stmt SELECT 3, 'cte-rc', 'a', g.f FROM g RETURNING *;
DELETE FROM same_stmt WHERE id = 3;
COMMIT;

-- The same in REPEATABLE READ, where the statement reads the lease row.
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO same_stmt VALUES (11, 'new-rr', 'a', fencelock.acquire('new-rr', 'B', '1 hour'))
  RETURNING *;
INSERT INTO same_stmt VALUES (12, 'old-rr', 'a', fencelock.acquire('old-rr', 'B', '1 hour'))
  RETURNING *;
UPDATE same_stmt SET v = 'b', fence = fencelock.acquire(lease, 'B', '2 hours')
  WHERE id IN (11, 12) RETURNING *;
SELECT fencelock.release('old-rr', 'B') AS released;
UPDATE same_stmt SET v = 'c', fence = fencelock.acquire(lease, 'C', '1 hour')
  WHERE id = 12 RETURNING *;
WITH g AS (SELECT fencelock.acquire('cte-rr', 'B', '1 hour') AS f)
INSERT INTO same_stmt SELECT 13, 'cte-rr', 'a', g.f FROM g RETURNING *;
DELETE FROM same_stmt WHERE id = 13;
COMMIT;

-- READ COMMITTED again, a released lease and a new one.
SELECT fencelock.release('old-rc', 'C') AS released;
UPDATE same_stmt SET v = 'd', fence = fencelock.acquire(lease, 'D', '1 hour')
  WHERE id = 2 RETURNING *;
INSERT INTO same_stmt VALUES (4, 'new-auto', 'a', fencelock.acquire('new-auto', 'B', '1 hour'))
  RETURNING *;

-- A superuser's statement that changes the lease row itself and writes under the new fence: the
-- row was changed by this very command, after the snapshot the direct path would use, so the
-- check asks with a statement, which sees the change.
WITH u AS (UPDATE fencelock.lease SET fence = fence + 1 WHERE resource = 'new-auto'
           RETURNING fence)
INSERT INTO same_stmt SELECT 5, 'new-auto', 'a', u.fence FROM u RETURNING *;

-- A stale fence in the same kind of statement is still refused.
INSERT INTO same_stmt VALUES (6, 'old-rc', 'a',
    fencelock.acquire('old-rc', 'D', '1 hour') - 1);

SELECT resource, owner, fence FROM fencelock.lease ORDER BY resource;
SELECT * FROM same_stmt ORDER BY id;

DROP TABLE same_stmt;
TRUNCATE fencelock.lease, fencelock.fence_floor;
