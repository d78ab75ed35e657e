-- Every release ships an upgrade script: install the oldest version, update it in place with
-- a lease in it, and list what the updated extension contains.
\set VERBOSITY terse
DROP EXTENSION fencelock CASCADE;
CREATE EXTENSION fencelock VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'fencelock';
SELECT fencelock.acquire('upgrade:r', 'o') AS fence_before_update;
ALTER EXTENSION fencelock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencelock';
-- Leases survive the update and fences keep growing.
SELECT fencelock.release('upgrade:r', 'o'), fencelock.acquire('upgrade:r', 'o2') AS fence_after_update;
-- The objects of the updated extension, in a stable order.  PostgreSQL 18 also records the row
-- types of the extension's tables and views (and their array types) as members: left out, so
-- every major lists the same objects.
SELECT pg_describe_object(classid, objid, 0) AS object
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencelock')
   AND NOT EXISTS (SELECT FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem
                     JOIN pg_class c ON c.oid = coalesce(nullif(t.typrelid, 0), e.typrelid)
                    WHERE classid = 'pg_type'::regclass AND t.oid = objid AND c.relkind <> 'c')
 ORDER BY 1;
