-- PostgreSQL 17 added infinite intervals ('infinity', '-infinity'); 15 has no such input.  A ttl
-- or a wait of either is refused like any interval out of range, and nothing is granted.
-- (src/compat.h FL_INTERVAL_IS_FINITE; left out on older majors.)
\set VERBOSITY terse
SELECT fencelock.acquire('inf:r', 'o', 'infinity'::interval);
SELECT fencelock.acquire('inf:r', 'o', '-infinity'::interval);
SELECT fencelock.acquire('inf:r', 'o', '1 minute', 'infinity'::interval);
SELECT fencelock.acquire('inf:r', 'o', '1 minute', '-infinity'::interval);
SELECT count(*) AS leases FROM fencelock.leases WHERE resource = 'inf:r';
