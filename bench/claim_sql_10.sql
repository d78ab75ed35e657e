-- Row 5, ten rows per claim: the hand-written claim of claim_sql_1k.sql taking up to ten rows in
-- one statement (their keys locked in claim order by an InitPlan), then one UPDATE that completes
-- them all, each under its own fence (claim_fl_10.sql: fencelock.complete_all).
\set w random(1, 1000000000)
WITH c AS (
    UPDATE tasks_sql_10 AS t
       SET state = 'running', lease_owner = :w, lease_until = clock_timestamp() + interval '30 seconds',
           attempt = t.attempt + 1, fence = t.fence + 1
     WHERE t.id = ANY (ARRAY(SELECT c.id FROM tasks_sql_10 AS c
                              WHERE c.state = 'ready'
                                 OR (c.state = 'running' AND (c.lease_until IS NULL OR c.lease_until <= clock_timestamp()))
                              ORDER BY c.id LIMIT 10 FOR UPDATE SKIP LOCKED))
       AND set_config('synchronous_commit', 'on', true) IS NOT NULL
    RETURNING t.id, t.fence)
SELECT array_agg(id) AS ids, array_agg(fence) AS fences FROM c \gset
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = u.f
  FROM ROWS FROM (unnest(:ids::bigint[]), unnest(:fences::bigint[])) AS u(i, f)
 WHERE t.id = u.i AND t.fence = u.f AND t.state = 'running';
