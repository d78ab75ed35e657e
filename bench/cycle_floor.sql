-- Row 2, the floor: the least a durable grant and a release cost, as two bare UPDATEs by primary
-- key in two transactions.  The grant commits synchronously, as a fence must (set_config(..., true)
-- is SET LOCAL: the commit of this statement's own transaction waits for its WAL flush even in a
-- session with synchronous_commit = off); the release does not need to.
\set res random(1, :nrows)
\set owner random(1, 1000000000)
UPDATE bench_floor SET owner = :owner, fence = fence + 1, acquired_at = clock_timestamp(),
    expires_at = clock_timestamp() + interval '30 seconds'
  WHERE resource = :res AND set_config('synchronous_commit', 'on', true) IS NOT NULL;
UPDATE bench_floor SET owner = NULL, expires_at = clock_timestamp() WHERE resource = :res;
