-- Issue 35, the search for unbounded inputs: a transaction's grants, renewals and releases wait
-- for its commit in a per-session list of about 64 bytes an event, and that array only grew: one
-- transaction of many events kept its memory (in TopMemoryContext) for the rest of the session.
-- The list now has a context of its own, and one that grew past 1024 events gives back its
-- memory at the transaction's end, committed or rolled back; a small one is kept.  The counts
-- per nesting level (observe/count.c's other array) give theirs back past 64 levels.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.resource_stats_reset();
SELECT total_bytes AS top_before FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext' \gset

-- One transaction of 10000 events: 5000 grants and 5000 releases of one resource.
BEGIN;
DO $$ BEGIN
  FOR i IN 1..5000 LOOP
    PERFORM fencelock.acquire('pm:big', 'o', '1 hour');
    PERFORM fencelock.release('pm:big', 'o');
  END LOOP;
END $$;
SELECT count(*) AS lists, sum(total_bytes) > 512 * 1024 AS over_512kB_while_open
  FROM pg_backend_memory_contexts WHERE name = 'fencelock pending events';
COMMIT;
SELECT grants, holds FROM fencelock.resource_stats WHERE resource = 'pm:big';
SELECT count(*) AS lists, coalesce(sum(total_bytes), 0) < 64 * 1024 AS under_64kB
  FROM pg_backend_memory_contexts WHERE name = 'fencelock pending events';
SELECT total_bytes - :top_before < 256 * 1024 AS top_memory_grew_under_256kB
  FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext';

-- Rolled back: nothing counted, and the memory is given back too.
BEGIN;
DO $$ BEGIN
  FOR i IN 1..3000 LOOP
    PERFORM fencelock.acquire('pm:big', 'o', '1 hour');
    PERFORM fencelock.release('pm:big', 'o');
  END LOOP;
END $$;
ROLLBACK;
SELECT grants, holds FROM fencelock.resource_stats WHERE resource = 'pm:big';
SELECT count(*) AS lists, coalesce(sum(total_bytes), 0) < 64 * 1024 AS under_64kB
  FROM pg_backend_memory_contexts WHERE name = 'fencelock pending events';

-- Small transactions are counted as before; the context stays small.
SELECT fencelock.acquire('pm:small', 'o', '1 hour') > 0 AS granted;
SELECT fencelock.release('pm:small', 'o') AS released;
SELECT count(*) AS lists, coalesce(sum(total_bytes), 0) < 64 * 1024 AS under_64kB
  FROM pg_backend_memory_contexts WHERE name = 'fencelock pending events';
SELECT grants, holds FROM fencelock.resource_stats WHERE resource = 'pm:small';
SELECT total_bytes - :top_before < 256 * 1024 AS top_memory_grew_under_256kB
  FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext';

-- The counts per nesting level (128 bytes a level): a grant under 5000 savepoints.  PostgreSQL's
-- own memory for so many savepoints is taken first, by the same transaction without a grant.
BEGIN;
\set ECHO none
SELECT 'SAVEPOINT s' || i FROM generate_series(1, 5000) i \gexec
\set ECHO all
COMMIT;
SELECT total_bytes AS top_before FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext' \gset
BEGIN;
\set ECHO none
SELECT 'SAVEPOINT s' || i FROM generate_series(1, 5000) i \gexec
\set ECHO all
SELECT fencelock.acquire('pm:deep', 'o', '1 hour') > 0 AS granted_deep;
SELECT fencelock.release('pm:deep', 'o') AS released_deep;
COMMIT;
SELECT grants, holds FROM fencelock.resource_stats WHERE resource = 'pm:deep';
SELECT total_bytes - :top_before < 256 * 1024 AS top_memory_grew_under_256kB
  FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext';
