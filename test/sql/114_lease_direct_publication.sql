-- The direct path (src/store/row.c) must refuse what store/rule.c's UPDATE statements refuse: the
-- executor checks, before changing a row, that a table which publishes updates can be
-- replicated (CheckCmdReplicaIdentity): it needs a replica identity, and the publication's row
-- filter and column list must fit it.  A direct change that skipped the check would write
-- updates that logical decoding cannot filter or identify correctly.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.acquire('pub', 'a', '1 hour') AS fence;

-- 1. No replica identity, and a publication of updates: every call is refused, as the statement
-- is, and nothing is written.  A grant of a new resource too: it runs the UPDATE first.
ALTER TABLE fencelock.lease REPLICA IDENTITY NOTHING;
SET client_min_messages = error; -- no warning about wal_level
CREATE PUBLICATION lease_pub FOR TABLE fencelock.lease;
RESET client_min_messages;
SELECT fencelock.renew('pub', 'a', '2 hours') AS renewed;
SELECT fencelock.acquire('pub', 'a', '2 hours') AS fence;
SELECT fencelock.acquire('pub', 'b', '1 hour') AS fence;
SELECT fencelock.release('pub', 'a') AS released;
SELECT fencelock.acquire('pub-new', 'a', '1 hour') AS fence;
SELECT resource, owner, fence, expires_at < now() + interval '90 minutes' AS unchanged
  FROM fencelock.lease;
-- A publication of inserts alone asks for nothing.
ALTER PUBLICATION lease_pub SET (publish = 'insert');
SELECT fencelock.renew('pub', 'a', '2 hours') AS renewed;
ALTER PUBLICATION lease_pub SET (publish = 'insert, update');
ALTER TABLE fencelock.lease REPLICA IDENTITY DEFAULT;

-- 2. A row filter on a column outside the replica identity (the primary key).
ALTER PUBLICATION lease_pub SET TABLE fencelock.lease WHERE (owner IS NOT NULL);
SELECT fencelock.release('pub', 'a') AS released;
SELECT owner FROM fencelock.lease WHERE resource = 'pub';

-- 3. A column list that leaves out the replica identity.
ALTER PUBLICATION lease_pub SET TABLE fencelock.lease (owner, fence);
SELECT fencelock.release('pub', 'a') AS released;
SELECT owner FROM fencelock.lease WHERE resource = 'pub';

-- 4. A row filter and a column list on the key alone are fine.
ALTER PUBLICATION lease_pub SET TABLE fencelock.lease (resource, fence) WHERE (resource <> 'x');
SELECT fencelock.release('pub', 'a') AS released;
SELECT fencelock.acquire('pub', 'b', '1 hour') AS fence;
DROP PUBLICATION lease_pub;
TRUNCATE fencelock.lease, fencelock.fence_floor;
