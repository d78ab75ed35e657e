-- Row 5: the hand-written claim users write without fencelock, with the same semantics as
-- fencelock.claim (no priority, run_after or max_attempts columns here): take the first ready row,
-- or a running row whose lease lapsed, skipping rows other workers hold; lease it and raise its
-- attempt and fence in the same UPDATE; commit synchronously (set_config(..., true) is SET LOCAL).
-- Then complete it carrying the fence, as fencelock.complete does.
\set w random(1, 1000000000)
UPDATE tasks_sql_1k AS t
   SET state = 'running', lease_owner = :w, lease_until = clock_timestamp() + interval '30 seconds',
       attempt = t.attempt + 1, fence = t.fence + 1
 WHERE t.id = (SELECT c.id FROM tasks_sql_1k AS c
                WHERE c.state = 'ready'
                   OR (c.state = 'running' AND (c.lease_until IS NULL OR c.lease_until <= clock_timestamp()))
                ORDER BY c.id LIMIT 1 FOR UPDATE SKIP LOCKED)
   AND set_config('synchronous_commit', 'on', true) IS NOT NULL
RETURNING t.id, t.fence \gset
UPDATE tasks_sql_1k AS t SET state = 'done', lease_until = NULL, fence = :fence WHERE t.id = :id;
