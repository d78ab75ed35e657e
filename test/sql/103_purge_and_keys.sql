-- purge() removes idle rows but fences never go back; key() builds collision-free keys.
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor;
SELECT fencelock.acquire('p:held', 'o', '1 minute') AS held \gset
SELECT fencelock.acquire('p:free', 'o') IS NOT NULL, fencelock.release('p:free', 'o');
SELECT fencelock.acquire('p:free', 'o2') AS f2, fencelock.release('p:free', 'o2');
SELECT fencelock.acquire('p:free', 'o3') AS f3 \gset
SELECT fencelock.release('p:free', 'o3');
SELECT fencelock.acquire('p:expired', 'o', '1 millisecond') IS NOT NULL;
SELECT pg_sleep(0.01);

-- Rows idle for less than the given interval stay.
SELECT fencelock.purge('1 hour') AS purged_none;
-- Free and expired rows go; held ones stay.
SELECT fencelock.purge('0') AS purged;
SELECT resource, state FROM fencelock.leases WHERE resource LIKE 'p:%' ORDER BY 1;
-- A purged resource comes back above every fence purged before (the floor).
SELECT fencelock.acquire('p:free', 'o4') > :f3 AS above_floor;
SELECT fencelock.acquire('p:brand-new', 'o') > :f3 AS new_rows_above_floor_too;

\set VERBOSITY default
SELECT fencelock.purge(NULL);
SELECT fencelock.purge('-1 day');
\set VERBOSITY terse

-- key(): parts are escaped, so different part lists never give the same key.
SELECT fencelock.key('tenant-1', 'order', '42');
SELECT fencelock.key('a:b', 'c') <> fencelock.key('a', 'b:c') AS colon_escaped;
SELECT fencelock.key('a\', 'b') <> fencelock.key('a', '\b') AS backslash_escaped;
SELECT fencelock.key('a', '') <> fencelock.key('a') AS empty_part_counts;
SELECT fencelock.key('a\:b') AS escaped;
-- Injective over a generated set of awkward parts: no two part lists share a key.
WITH parts(p) AS (VALUES (''), (':'), ('\'), ('a'), ('a:'), (':a'), ('\:'), ('\\'), ('a\')),
lists AS (
    SELECT ARRAY[x.p] AS l FROM parts x
    UNION ALL SELECT ARRAY[x.p, y.p] FROM parts x, parts y
    UNION ALL SELECT ARRAY[x.p, y.p, z.p] FROM parts x, parts y, parts z)
SELECT count(*) AS lists, count(DISTINCT fencelock.key(VARIADIC l)) AS distinct_keys FROM lists;
\set VERBOSITY default
SELECT fencelock.key(VARIADIC NULL::text[]);
SELECT fencelock.key(VARIADIC '{}'::text[]);
SELECT fencelock.key('a', NULL);
SELECT fencelock.key(VARIADIC '{{a,b},{c,d}}'::text[]);
