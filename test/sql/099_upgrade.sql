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
-- The objects of the updated extension, in a stable order.
SELECT pg_describe_object(classid, objid, 0) AS object
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencelock')
 ORDER BY 1;
