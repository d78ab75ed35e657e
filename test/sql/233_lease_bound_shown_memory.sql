-- Issue 35, the search for unbounded inputs: a transaction's lease-bound writes remember the
-- fence shown per lease (about 1 kB each), and the hash table kept that memory for the rest of
-- the session: one transaction writing rows of 300 leases (lease_column) left 300 kB behind in
-- every later transaction of the session.  A table that grew past 64 entries is now dropped at
-- the transaction's end; a small one is kept.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
CREATE TABLE sm (id int, tenant text, last_fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON sm FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=tenant');
SELECT count(fencelock.acquire('sm:' || i, 'o', '1 hour')) AS granted FROM generate_series(1, 300) i;
INSERT INTO sm SELECT i, 'sm:' || i, fencelock.current_fence('sm:' || i) FROM generate_series(1, 300) i;
SELECT count(*) AS tables_kept, coalesce(sum(total_bytes), 0) < 64 * 1024 AS under_64kB
  FROM pg_backend_memory_contexts
 WHERE 'fencelock fences shown' IN (name, ident);
-- A transaction of a few leases keeps its table (no allocation per transaction).
INSERT INTO sm SELECT i, 'sm:' || i, fencelock.current_fence('sm:' || i) FROM generate_series(1, 3) i;
SELECT count(*) AS tables_kept, coalesce(sum(total_bytes), 0) < 64 * 1024 AS under_64kB
  FROM pg_backend_memory_contexts
 WHERE 'fencelock fences shown' IN (name, ident);
-- The remembered fences still serve the transaction: a DELETE after the shown write passes, a
-- stale write is refused.
BEGIN;
INSERT INTO sm VALUES (0, 'sm:7', fencelock.current_fence('sm:7'));
DELETE FROM sm WHERE tenant = 'sm:7';
COMMIT;
INSERT INTO sm VALUES (0, 'sm:8', fencelock.current_fence('sm:8') - 1);
SELECT count(*) AS rows_left FROM sm;
DROP TABLE sm;
SELECT count(fencelock.release('sm:' || i, 'o')) AS released FROM generate_series(1, 300) i;
