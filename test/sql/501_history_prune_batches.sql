-- Issue 10, finding 11: history pruning ran inside the caller's acquire and deleted every expired
-- row at once (868 ms for one acquire at 900k rows; never finishing under a short
-- statement_timeout, so history grew without bound).  A grant now prunes at most one batch of
-- 500 rows, now and then; repeated grants drain the backlog, and purge() prunes all of it.
\set VERBOSITY terse
SET fencelock.history = on;
SET fencelock.history_retention = 86400;  -- one day
-- A backlog of 20000 rows older than the retention.
INSERT INTO fencelock.history (resource, fence, owner, granted_how, granted_at, expires_at)
SELECT 'old:' || g, 1, 'o', 'new', now() - interval '30 days', now() - interval '30 days'
  FROM generate_series(1, 20000) AS g;
-- 3000 grants, one at a time; rows of history each one deleted (this transaction's statistics).
DO $$
DECLARE
    rel oid := 'fencelock.history'::regclass;
    before int8;
    most int8 := 0;
BEGIN
    FOR i IN 1 .. 3000 LOOP
        before := pg_stat_get_xact_tuples_deleted(rel);
        PERFORM fencelock.acquire('prune:' || i, 'o', '1 hour');
        most := greatest(most, pg_stat_get_xact_tuples_deleted(rel) - before);
    END LOOP;
    CREATE TEMP TABLE prune_result AS
    SELECT most AS most_deleted_by_one_grant, pg_stat_get_xact_tuples_deleted(rel) AS deleted;
END $$;
-- Pruned in batches: some grants pruned (about 12 in 3000), none more than 500 rows.
SELECT most_deleted_by_one_grant BETWEEN 1 AND 500 AS bounded, deleted > 0 AS draining,
       deleted % 500 = 0 AS whole_batches
  FROM prune_result;
-- Some of the backlog is left (3000 grants prune about 6000 rows); purge() prunes the rest.
SELECT count(*) > 0 AS backlog_left FROM fencelock.history WHERE resource LIKE 'old:%';
SELECT fencelock.purge('1 year') >= 0 AS purged;
SELECT count(*) AS backlog_after_purge FROM fencelock.history WHERE resource LIKE 'old:%';
SELECT count(*) AS recent_kept FROM fencelock.history WHERE resource LIKE 'prune:%';
SELECT count(*) FILTER (WHERE fencelock.release('prune:' || g, 'o')) AS released
  FROM generate_series(1, 3000) AS g;
DELETE FROM fencelock.history WHERE resource LIKE 'prune:%';
DROP TABLE prune_result;
RESET fencelock.history;
RESET fencelock.history_retention;
