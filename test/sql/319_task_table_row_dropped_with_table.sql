-- Issue 35: fencelock.task_tables names a task table by OID (regclass) without a dependency, and
-- a dropped table's row stayed until the next enable_tasks pruned it: a table created later
-- under the same OID would have been a task table that nobody enabled.  The sql_drop event
-- trigger now removes the row when the table is dropped, in the dropping transaction (PostgreSQL
-- cannot be made to reuse an OID here: the test checks the row is gone).
\set VERBOSITY terse
CREATE SCHEMA regress_tdrop;
CREATE TABLE regress_tdrop.a (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                              lease_owner text, lease_until timestamptz,
                              attempt int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0);
CREATE TABLE regress_tdrop.b (LIKE regress_tdrop.a INCLUDING ALL);
CREATE TABLE regress_tdrop.c (LIKE regress_tdrop.a INCLUDING ALL);
SELECT count(fencelock.enable_tasks(t)) AS enabled
  FROM unnest('{regress_tdrop.a,regress_tdrop.b,regress_tdrop.c}'::regclass[]) AS t;
SELECT 'regress_tdrop.a'::regclass::oid AS a_oid \gset
SELECT tbl FROM fencelock.task_tables WHERE tbl::text LIKE 'regress_tdrop.%' ORDER BY 1::text;
-- DROP TABLE: the row goes with the table.
DROP TABLE regress_tdrop.a;
SELECT count(*) AS a_rows FROM fencelock.task_tables WHERE tbl::oid = :a_oid;
-- A drop rolled back keeps the row.
BEGIN;
DROP TABLE regress_tdrop.b;
ROLLBACK;
SELECT tbl FROM fencelock.task_tables WHERE tbl::text LIKE 'regress_tdrop.%' ORDER BY 1::text;
-- DROP SCHEMA ... CASCADE drops the rest, and their rows.
DROP SCHEMA regress_tdrop CASCADE;
SELECT count(*) AS rows_left FROM fencelock.task_tables AS t
 WHERE NOT EXISTS (SELECT FROM pg_class AS r WHERE r.oid = t.tbl);
