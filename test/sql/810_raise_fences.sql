-- raise_fences(above): after restoring an older pg_dump, every fence issued from then on exceeds
-- the bound.  Leases below it are freed at the bound (as revoke leaves them), the purge floor is
-- raised to it for resources without a row, and nothing is ever lowered.  (The restore itself is
-- in test/t/860_dump_restore.pl.)
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor;
CREATE ROLE regress_raise_app;

SET ROLE regress_raise_app;
SELECT fencelock.acquire('rf:held', 'app-token', '1 hour') AS held_fence;
SELECT fencelock.acquire('rf:free', 'w1'), fencelock.release('rf:free', 'w1');
-- Not executable by PUBLIC.
SELECT fencelock.raise_fences(100);
RESET ROLE;
SELECT fencelock.acquire('rf:high', 'w1') AS high_fence, fencelock.release('rf:high', 'w1');
SELECT fencelock.raise_fences(0) AS nothing_below_zero;

-- Give rf:high a fence above the bound first: it must keep it.
DO $$ BEGIN FOR i IN 1 .. 5 LOOP PERFORM fencelock.revoke('rf:high'); END LOOP; END $$;
SELECT fencelock.current_fence('rf:high') AS high_before;
SELECT fencelock.raise_fences(5) AS raised;
SELECT resource, state, owner, fence, granted_how FROM fencelock.leases ORDER BY resource;
SELECT floor FROM fencelock.fence_floor;

SET ROLE regress_raise_app;
-- The holder from before the raise has lost its lease: renew and release fail, its fence is refused.
SELECT fencelock.renew('rf:held', 'app-token') AS renewed,
       fencelock.release('rf:held', 'app-token') AS released;
BEGIN;
SELECT fencelock.assert_fence('rf:held', 1);
ROLLBACK;
-- Every next grant is above the bound: old resources, and one the lease table never had.
SELECT fencelock.acquire('rf:held', 'app-token-2') AS held_next,
       fencelock.acquire('rf:free', 'w2') AS free_next,
       fencelock.acquire('rf:new', 'w1') AS new_resource;
RESET ROLE;

-- A lower bound lowers nothing.
SELECT fencelock.raise_fences(2) AS raised_by_lower_bound;
SELECT floor FROM fencelock.fence_floor;
SELECT resource, fence FROM fencelock.lease ORDER BY resource;

-- Arguments.
SELECT fencelock.raise_fences(NULL);
SELECT fencelock.raise_fences(-1);
SELECT fencelock.raise_fences(9223372036854775807);
SELECT fencelock.raise_fences(9223372036854775806) AS raised_to_the_last;
SELECT fencelock.acquire('rf:last', 'w1') AS the_last_fence;

-- Task tables keep their fences in their own rows: README's step for them is an UPDATE, which
-- the table's fence trigger accepts (it raises the fence).  The old worker's fence is refused
-- afterwards, and the next claim of every row is above the bound.
CREATE TABLE rf_jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                      lease_until timestamptz, attempt integer NOT NULL DEFAULT 0,
                      fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('rf_jobs');
INSERT INTO rf_jobs (id) VALUES (1), (2);
SELECT id, fence FROM fencelock.claim(NULL::rf_jobs, worker => 'w1', ttl => '100 ms', max_rows => 1);
UPDATE rf_jobs SET fence = 100 WHERE fence < 100;
SELECT fencelock.complete('rf_jobs', 1, 1);
SELECT pg_sleep(0.15);   -- w1's claim of row 1 lapses
SELECT id, fence FROM fencelock.claim(NULL::rf_jobs, worker => 'w2', ttl => '1 hour', max_rows => 2)
 ORDER BY id;
DROP TABLE rf_jobs;

TRUNCATE fencelock.lease, fencelock.fence_floor;
DROP ROLE regress_raise_app;
