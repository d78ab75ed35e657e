-- Issue 10, finding 6 (quadratic bulk grants): a backend that first planned the grant while
-- fencelock.lease had one page kept a plan that scanned the table sequentially, so each grant of
-- a bulk statement read every row granted before it.  Kept plans now use the primary key
-- whatever the statistics were: a bulk grant makes no sequential scan of fencelock.lease.
\set VERBOSITY terse
-- In a database of its own, statistics of a small table (one row, one page), then a new backend:
-- no kept plans yet.
SELECT current_database() AS regress_db \gset
CREATE DATABASE fencelock_bulk;
\c fencelock_bulk
CREATE EXTENSION fencelock;
SELECT fencelock.acquire('bulk:seed', 'o', '1 hour') IS NOT NULL AS seeded;
VACUUM ANALYZE fencelock.lease;
SELECT relpages <= 1 AS one_page FROM pg_class WHERE oid = 'fencelock.lease'::regclass;
\c fencelock_bulk
BEGIN;
SELECT count(fencelock.acquire('bulk:' || g, 'o', '1 hour')) AS granted
  FROM generate_series(1, 3000) AS g;
-- Scans made by this transaction so far (pending statistics of this backend).
SELECT seq_scan AS seq_scans, idx_scan >= 3000 AS index_used
  FROM pg_stat_xact_user_tables WHERE relid = 'fencelock.lease'::regclass;
-- The same for renew, release, current_fence and a second round of grants.
SELECT count(*) FILTER (WHERE fencelock.renew('bulk:' || g, 'o', '1 hour')) AS renewed,
       count(fencelock.current_fence('bulk:' || g)) AS fences,
       count(*) FILTER (WHERE fencelock.release('bulk:' || g, 'o')) AS released,
       count(fencelock.acquire('bulk:' || g, 'p', '1 hour')) AS granted_again
  FROM generate_series(1, 3000) AS g;
SELECT seq_scan AS seq_scans
  FROM pg_stat_xact_user_tables WHERE relid = 'fencelock.lease'::regclass;
ROLLBACK;
\c :regress_db
DROP DATABASE fencelock_bulk;
