-- Row 5, ten rows per claim: the hand-written claim of claim_sql_1k.sql taking up to ten rows in
-- one statement (their keys locked in claim order by an InitPlan), then, in one transaction, one
-- UPDATE per row that completes it with its own fence, as a worker finishing its jobs one by one
-- does (and as claim_fl_10.sql does with fencelock.complete).
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
SELECT array_agg(id ORDER BY id) AS ids, array_agg(fence ORDER BY id) AS fences FROM c \gset
BEGIN;
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[1] WHERE t.id = (:ids::bigint[])[1];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[2] WHERE t.id = (:ids::bigint[])[2];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[3] WHERE t.id = (:ids::bigint[])[3];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[4] WHERE t.id = (:ids::bigint[])[4];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[5] WHERE t.id = (:ids::bigint[])[5];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[6] WHERE t.id = (:ids::bigint[])[6];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[7] WHERE t.id = (:ids::bigint[])[7];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[8] WHERE t.id = (:ids::bigint[])[8];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[9] WHERE t.id = (:ids::bigint[])[9];
UPDATE tasks_sql_10 AS t SET state = 'done', lease_until = NULL, fence = (:fences::bigint[])[10] WHERE t.id = (:ids::bigint[])[10];
COMMIT;
