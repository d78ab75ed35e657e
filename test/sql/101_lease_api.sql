-- The lease functions' contract: grant, busy, idempotent retry, renew, release, takeover after
-- expiry, and fences that only ever grow per resource.
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor;

-- A free resource is granted; the first fence on timeline 1 is 1.
SELECT fencelock.acquire('job:1', 'owner-a', '10 seconds') AS fence_a;
-- Another owner gets NULL while the lease is live.
SELECT fencelock.acquire('job:1', 'owner-b', '10 seconds') IS NULL AS busy;
-- The same owner again (a retry after a lost response) gets the same fence.
SELECT fencelock.acquire('job:1', 'owner-a', '20 seconds') AS same_fence;
SELECT fencelock.current_fence('job:1');
SELECT state, owner, fence, remaining > interval '15 seconds' AS extended
  FROM fencelock.leases WHERE resource = 'job:1';

-- Renew works only for the holder.
SELECT fencelock.renew('job:1', 'owner-b') AS renew_by_other;
SELECT fencelock.renew('job:1', 'owner-a', '1 minute') AS renew_by_holder;
SELECT remaining > interval '50 seconds' AS renewed FROM fencelock.leases WHERE resource = 'job:1';

-- Release works only for the holder, and the fence stays.
SELECT fencelock.release('job:1', 'owner-b') AS release_by_other;
SELECT state FROM fencelock.leases WHERE resource = 'job:1';
SELECT fencelock.release('job:1', 'owner-a') AS release_by_holder;
SELECT fencelock.release('job:1', 'owner-a') AS release_twice;
SELECT state, owner, fence, remaining FROM fencelock.leases WHERE resource = 'job:1';
SELECT fencelock.current_fence('job:1') AS fence_after_release;

-- The next grant, by anyone, gets a higher fence.
SELECT fencelock.acquire('job:1', 'owner-b', '50 milliseconds') AS fence_b;
-- Lease times use the clock at the call, not the transaction start: inside one transaction
-- the lease expires while the transaction is still open.
BEGIN;
SELECT pg_sleep(0.1);
SELECT state FROM fencelock.leases WHERE resource = 'job:1';
-- An expired lease cannot be renewed or released by its former holder ...
SELECT fencelock.renew('job:1', 'owner-b') AS renew_expired;
SELECT fencelock.release('job:1', 'owner-b') AS release_expired;
-- ... and is taken over by the next owner with a higher fence.
SELECT fencelock.acquire('job:1', 'owner-c') AS fence_c;
COMMIT;
-- The former holder's acquire after its lease expired and was taken over: busy.
SELECT fencelock.acquire('job:1', 'owner-b') IS NULL AS b_is_out;
-- The same owner re-acquiring after its own lease expired gets a new fence, not the old one.
SELECT fencelock.acquire('job:2', 'owner-d', '10 milliseconds') AS d1;
SELECT pg_sleep(0.05);
SELECT fencelock.acquire('job:2', 'owner-d') AS d2_new_fence;

-- Fences are per resource: a new resource starts at 1.
SELECT fencelock.acquire('job:3', 'owner-a') AS other_resource;
SELECT fencelock.current_fence('never-used') IS NULL AS never_issued;

-- A grant whose transaction rolls back issues nothing: the next grant reuses no fence twice.
BEGIN;
SELECT fencelock.acquire('job:4', 'owner-a') AS rolled_back;
ROLLBACK;
SELECT fencelock.current_fence('job:4') IS NULL AS nothing_issued;
SELECT fencelock.acquire('job:4', 'owner-b') AS after_rollback;


-- Bad input: a clear error with a SQLSTATE, and nothing written.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT count(*) AS rows_before FROM fencelock.leases \gset
SELECT fencelock.acquire(NULL, 'x');
SELECT fencelock.acquire('', 'x');
SELECT fencelock.acquire('r', NULL);
SELECT fencelock.acquire('r', '');
SELECT fencelock.acquire(repeat('r', 1025), 'x');
SELECT fencelock.acquire('r', repeat('o', 257));
SELECT fencelock.acquire('r', 'x', NULL);
SELECT fencelock.acquire('r', 'x', '0');
SELECT fencelock.acquire('r', 'x', '-5 seconds');
SELECT fencelock.acquire('r', 'x', '2 days');
SELECT fencelock.acquire('r', 'x', '170000000 years');
SELECT fencelock.renew('job:1', 'owner-c', '-1 second');
SELECT fencelock.renew(NULL, 'owner-c');
SELECT fencelock.release('job:1', NULL);
SELECT fencelock.current_fence(NULL);
\set VERBOSITY terse
SELECT count(*) = :rows_before AS nothing_written FROM fencelock.leases;
-- The longest accepted keys and owners, and the documented TTL limit.
SELECT fencelock.acquire(repeat('r', 1024), repeat('o', 256), '1 day') AS longest_ok;
SET fencelock.max_ttl = '1h';
SELECT fencelock.acquire('r', 'x', '2 hours');
RESET fencelock.max_ttl;
SET fencelock.max_ttl = 0;
SET fencelock.nonexistent = 1;
