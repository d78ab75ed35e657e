-- Row 5, ten rows per claim: fencelock.claim with max_rows => 10 (its own transaction, committed
-- synchronously by claim itself), then, in one transaction, fencelock.complete for each row with
-- its own fence (claim_sql_10.sql does the same by hand).
\set w random(1, 1000000000)
SELECT array_agg(id ORDER BY id) AS ids, array_agg(fence ORDER BY id) AS fences
  FROM fencelock.claim(NULL::tasks_fl_10, worker => :w, ttl => '30 seconds', max_rows => 10) \gset
BEGIN;
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[1], (:fences::bigint[])[1]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[2], (:fences::bigint[])[2]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[3], (:fences::bigint[])[3]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[4], (:fences::bigint[])[4]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[5], (:fences::bigint[])[5]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[6], (:fences::bigint[])[6]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[7], (:fences::bigint[])[7]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[8], (:fences::bigint[])[8]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[9], (:fences::bigint[])[9]);
SELECT fencelock.complete('tasks_fl_10', (:ids::bigint[])[10], (:fences::bigint[])[10]);
COMMIT;
