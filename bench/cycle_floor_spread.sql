-- Row 3 (bench/callgrind.sh only): row 2's floor, two bare UPDATEs by primary key, on the keys of
-- bench/cycle_spread.sql, in a table of 1 000 or 1 000 000 rows: how a plain table pays for growth.
\set res 1000 * random(1, 1000)
\set owner random(1, 1000000000)
UPDATE bench_floor SET owner = :owner, fence = fence + 1, acquired_at = clock_timestamp(),
    expires_at = clock_timestamp() + interval '30 seconds'
  WHERE resource = :res AND set_config('synchronous_commit', 'on', true) IS NOT NULL;
UPDATE bench_floor SET owner = NULL, expires_at = clock_timestamp() WHERE resource = :res;
