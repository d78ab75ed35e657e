-- Row 5, ten rows per claim: fencelock.claim with max_rows => 10 (its own transaction, committed
-- synchronously by claim itself), then fencelock.complete for each row, in one statement.
\set w random(1, 1000000000)
SELECT array_agg(id) AS ids, array_agg(fence) AS fences
  FROM fencelock.claim(NULL::tasks_fl_10, worker => :w, ttl => '30 seconds', max_rows => 10) \gset
SELECT count(fencelock.complete('tasks_fl_10', u.i, u.f))
  FROM unnest(:ids::bigint[], :fences::bigint[]) AS u(i, f);
