-- Row 5, ten rows per claim: fencelock.claim with max_rows => 10 (its own transaction, committed
-- synchronously by claim itself), then fencelock.complete_all for the ten rows, each under its
-- own fence, in one statement (claim_sql_10.sql does the same by hand).
\set w random(1, 1000000000)
SELECT array_agg(id) AS ids, array_agg(fence) AS fences
  FROM fencelock.claim(NULL::tasks_fl_10, worker => :w, ttl => '30 seconds', max_rows => 10) \gset
SELECT fencelock.complete_all('tasks_fl_10', :ids::bigint[], :fences::bigint[]);
