-- Row 5: claim one task with fencelock.claim (its own transaction, committed synchronously by
-- claim itself), then complete it with fencelock.complete, carrying the claim's fence.
\set w random(1, 1000000000)
SELECT id, fence FROM fencelock.claim(NULL::tasks_fl_1m, worker => :w, ttl => '30 seconds',
                                      max_rows => 1) \gset
SELECT fencelock.complete('tasks_fl_1m', :id::bigint, :fence);
