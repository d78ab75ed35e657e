-- Every form of acquire that README and doc/ show, and the forms people write beside them
-- (issue 24): each resolves to one function, grants, and binds the lease to the session only
-- when session => true says so.  acquire(r, o, ttl, session => true) without wait failed with
-- "function does not exist" before 0.4.0.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;

SELECT fencelock.acquire('form:2', 'o') AS two_args;
SELECT fencelock.acquire('form:3', 'o', '30 seconds') AS ttl;
SELECT fencelock.acquire('form:3i', 'o', interval '30 seconds') AS ttl_typed;
SELECT fencelock.acquire('form:4', 'o', '30 seconds', '5 seconds') AS ttl_wait;
SELECT fencelock.acquire('form:4i', 'o', '30 seconds', interval '5 seconds') AS ttl_wait_typed;
SELECT fencelock.acquire('form:4n', 'o', '30 seconds', wait => '5 seconds') AS wait_named;
SELECT fencelock.acquire('form:s', 'o', '30 seconds', session => true) AS session_only;
SELECT fencelock.acquire('form:sf', 'o', '30 seconds', session => false) AS session_false;
SELECT fencelock.acquire('form:s2', 'o', session => true) AS session_default_ttl;
SELECT fencelock.acquire('form:ws', 'o', '30 seconds', wait => '10 seconds', session => true)
       AS wait_and_session;
SELECT fencelock.acquire('form:ws5', 'o', '30 seconds', '5 seconds', true) AS positional_five;
SELECT fencelock.acquire(resource => 'form:all', owner => 'o', ttl => '30 seconds',
                         session => true) AS all_named;
SELECT fencelock.acquire('form:wait0', 'o', '30 seconds', wait => '0') AS wait_zero;

-- Which leases are bound to this session: exactly the session => true ones.
SELECT resource, state, session_bound FROM fencelock.leases
 WHERE resource LIKE 'form:%' ORDER BY resource;

-- A busy resource: the one-try forms answer NULL at once, the waiting one at its deadline.
SELECT fencelock.acquire('form:s', 'other', '30 seconds', session => true) IS NULL AS busy_session;
SELECT fencelock.acquire('form:3', 'other', '30 seconds', '10 ms') IS NULL AS busy_wait;

-- Arguments are checked as before: wait and session default to '0' and false, and an explicit
-- NULL for either is an error (22004), in every form.
SELECT fencelock.acquire('form:n', 'o', '30 seconds', wait => NULL) AS null_wait;
SELECT fencelock.acquire('form:n', 'o', '30 seconds', NULL) AS null_wait_positional;
SELECT fencelock.acquire('form:n2', 'o', '30 seconds', session => NULL) AS null_session;
SELECT fencelock.acquire('form:n2', 'o', '30 seconds', '0', NULL) AS null_session_positional;
SELECT count(*) AS no_lease_left_by_them FROM fencelock.leases WHERE resource LIKE 'form:n%';
SELECT fencelock.acquire('form:bad', 'o', '30 seconds', wait => '-1 second');
SELECT fencelock.acquire('form:bad', 'o', NULL, session => true);
SELECT fencelock.acquire(NULL, 'o', '30 seconds', session => true);

-- One function, as 0.4.0 installs it.
SELECT p.oid::pg_catalog.regprocedure, pg_catalog.pg_get_function_arguments(p.oid)
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'fencelock'::regnamespace AND p.proname = 'acquire';

-- The defaults are the one-try acquire: acquire(r, o, ttl) and acquire(r, o, ttl, '0') answer
-- alike in REPEATABLE READ (no "needs READ COMMITTED"), on a free and on a busy resource.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire('form:rr', 'o', '30 seconds') AS rr_default,
       fencelock.acquire('form:rr', 'o', '30 seconds', '0') AS rr_wait_zero,
       fencelock.acquire('form:rr', 'other', '30 seconds') IS NULL AS rr_busy_default,
       fencelock.acquire('form:rr', 'other', '30 seconds', '0') IS NULL AS rr_busy_wait_zero;
COMMIT;

-- ... and count alike: a grant and a busy try each (the stats count at commit).
SELECT fencelock.stats_reset();
SELECT fencelock.acquire('form:c1', 'o', '30 seconds') AS c1;
SELECT fencelock.acquire('form:c1', 'other', '30 seconds') IS NULL AS c1_busy;
SELECT grants, busy, waits FROM fencelock.stats;
SELECT fencelock.stats_reset();
SELECT fencelock.acquire('form:c2', 'o', '30 seconds', '0') AS c2;
SELECT fencelock.acquire('form:c2', 'other', '30 seconds', '0') IS NULL AS c2_busy;
SELECT grants, busy, waits FROM fencelock.stats;

SELECT fencelock.release(resource, 'o') FROM fencelock.leases WHERE resource LIKE 'form:%'
 ORDER BY resource;
