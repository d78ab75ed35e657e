-- Issue 35, defect 7: a lease's value had no size bound: an ordinary role stored 16 MB per lease
-- and per share, and every reader of leases and lease_holders fetched it.  Every value given to
-- acquire, acquire_shared, acquire_permit or set_value is now at most fencelock.max_value_bytes
-- (8 kB by default, the jsonb's size uncompressed), else 54000 and nothing is granted or
-- changed; a superuser may raise the bound, an ordinary role may not.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.lease_holder, fencelock.fence_floor, fencelock.lease_value;
CREATE ROLE d7_app;
GRANT USAGE ON SCHEMA fencelock TO d7_app;
SHOW fencelock.max_value_bytes;
-- A value of 16 MB, and one just under and one just over the bound.
CREATE TEMP TABLE d7_v AS
SELECT pg_catalog.jsonb_build_object('blob', repeat('x', 16 * 1024 * 1024)) AS huge,
       pg_catalog.jsonb_build_object('blob', repeat('x', 8150)) AS fits,
       pg_catalog.jsonb_build_object('blob', repeat('x', 8200)) AS over;
-- Sizes as jsonb, uncompressed (pg_column_size of a value not stored in a table).
SELECT pg_column_size(fits::text::jsonb) AS fits_bytes, pg_column_size(over::text::jsonb) AS over_bytes
  FROM d7_v;
GRANT SELECT ON d7_v TO d7_app;

SET ROLE d7_app;
-- An ordinary role cannot raise the bound.
SET fencelock.max_value_bytes = '1MB';
\echo :LAST_ERROR_SQLSTATE
-- acquire with a value: refused, and no lease granted.
SELECT fencelock.acquire('d7:lease', 'o', '1 minute', value => huge) FROM d7_v;
\echo :LAST_ERROR_SQLSTATE
SELECT fencelock.acquire('d7:lease', 'o', '1 minute', value => over) FROM d7_v;
SELECT fencelock.current_fence('d7:lease') AS no_grant;
-- The same with a wait (the waiting acquire reads it the same way), and on a share and a permit.
SELECT fencelock.acquire('d7:lease', 'o', '1 minute', '1 second', value => over) FROM d7_v;
SELECT fencelock.acquire_shared('d7:shared', 'r', '1 minute', value => over) FROM d7_v;
SELECT fencelock.acquire_permit('d7:permit', 'p', '1 minute', 2, value => over) FROM d7_v;
SELECT count(*) AS holders FROM fencelock.lease_holders;
-- A value within the bound is kept.
SELECT fencelock.acquire('d7:lease', 'o', '1 minute', value => fits) AS fence FROM d7_v;
SELECT fencelock.acquire_shared('d7:shared', 'r', '1 minute', value => fits) AS shared_fence FROM d7_v;
-- set_value over the bound: refused, the value kept is the one before.
SELECT fencelock.set_value('d7:lease', 'o', over) FROM d7_v;
SELECT fencelock.set_value('d7:shared', 'r', huge) FROM d7_v;
SELECT value = (SELECT fits FROM d7_v) AS lease_value_kept
  FROM fencelock.leases WHERE resource = 'd7:lease';
SELECT value = (SELECT fits FROM d7_v) AS share_value_kept
  FROM fencelock.lease_holders WHERE resource = 'd7:shared';
SELECT fencelock.set_value('d7:shared', 'r', '{"node": "b"}') AS small_value_set;
-- In a savepoint, the refusal leaves the transaction usable and nothing behind.
BEGIN;
SAVEPOINT s;
SELECT fencelock.acquire('d7:xact', 'o', '1 minute', value => over) FROM d7_v;
ROLLBACK TO s;
SELECT fencelock.current_fence('d7:xact') AS no_grant_in_savepoint;
COMMIT;
RESET ROLE;

-- The error in full.
\set VERBOSITY default
SELECT fencelock.set_value('d7:lease', 'o', over) FROM d7_v;
\set VERBOSITY terse
-- A superuser may raise it (for a session, or for a role with ALTER ROLE ... SET).
SET fencelock.max_value_bytes = '32kB';
SELECT fencelock.set_value('d7:lease', 'o', over) AS raised FROM d7_v;
RESET fencelock.max_value_bytes;
SELECT fencelock.release('d7:lease', 'o'), fencelock.release('d7:shared', 'r');

DROP TABLE d7_v;
REVOKE USAGE ON SCHEMA fencelock FROM d7_app;
DROP ROLE d7_app;
