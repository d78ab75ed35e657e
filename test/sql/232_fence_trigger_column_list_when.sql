-- Issue 35, defect 4: a fence trigger with a column list (UPDATE OF) or a WHEN condition fires
-- only for some rows, and a stale holder's write it skips commits unchecked: declared with
-- UPDATE OF note, an UPDATE that assigns only the fence lowered the stored fence from 10 to 5.
-- Such a trigger is refused (39P01) at CREATE TRIGGER, also as CREATE OR REPLACE TRIGGER over a
-- whole one, and as a partition's clone, and at each firing (one made while the guard was off).
-- With check_function_bodies off, as in a restore, it is created again whole, with a warning.
\set VERBOSITY default
CREATE TABLE d4 (id int PRIMARY KEY, last_fence bigint, note text);
INSERT INTO d4 VALUES (1, 10, 'written under fence 10');
CREATE TRIGGER fence BEFORE UPDATE ON d4 FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');

-- Per-row mode: replacing the trigger by one that skips rows is refused; the whole one stays.
CREATE OR REPLACE TRIGGER fence BEFORE UPDATE OF note ON d4 FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE TRIGGER fence BEFORE UPDATE ON d4 FOR EACH ROW
    WHEN (NEW.note IS DISTINCT FROM OLD.note)
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
CREATE TRIGGER fence2 BEFORE UPDATE OF note ON d4 FOR EACH ROW
    WHEN (OLD.id > 0) EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
SELECT tgname, tgattr, tgqual IS NOT NULL AS has_when FROM pg_trigger
 WHERE tgrelid = 'd4'::regclass ORDER BY tgname;
-- The stale write the skipping trigger let through: refused, the fence stays 10.
UPDATE d4 SET last_fence = 5 WHERE id = 1;
SELECT id, last_fence FROM d4;

-- Lease-bound mode: the same, for INSERT, UPDATE, DELETE and the TRUNCATE statement trigger.
CREATE TABLE d4l (id int, last_fence bigint, note text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OF note OR DELETE ON d4l FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=d4');
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON d4l FOR EACH ROW
    WHEN (pg_catalog.current_setting('application_name') <> 'skip')
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=d4');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON d4l FOR EACH STATEMENT
    WHEN (pg_catalog.current_setting('application_name') <> 'skip')
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=d4');
-- On a partitioned table (its partitions would get clones), and inside CREATE SCHEMA.
CREATE TABLE d4p (id int, last_fence bigint, note text) PARTITION BY LIST (id);
CREATE TRIGGER fence BEFORE UPDATE OF note ON d4p FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger();
CREATE SCHEMA d4s
    CREATE TABLE t (id int, last_fence bigint, note text)
    CREATE TRIGGER fence BEFORE UPDATE OF note ON t FOR EACH ROW
        EXECUTE FUNCTION fencelock.fence_trigger();
SELECT count(*) AS d4s_schemas FROM pg_namespace WHERE nspname = 'd4s';
-- Other functions' triggers may have both.
CREATE FUNCTION d4_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER other BEFORE UPDATE OF note ON d4 FOR EACH ROW WHEN (OLD.id > 0)
    EXECUTE FUNCTION d4_noop();
DROP TRIGGER other ON d4;

-- With check_function_bodies off, as pg_dump's scripts and pg_restore set it (a 0.3.0 database
-- restored into this version may hold such a trigger), refusing would fail the restore and a
-- warning alone kept the trigger: the stale write it skipped still lowered the fence 10 -> 5.
-- There the trigger is created again without the column list and the WHEN condition (same
-- name, events, function and arguments), with a warning, and the stale write is refused.
CREATE TABLE d4r (id int PRIMARY KEY, last_fence bigint, note text);
INSERT INTO d4r VALUES (1, 10, 'x');
SET check_function_bodies = off;
CREATE TRIGGER fence BEFORE UPDATE OF note ON d4r FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
RESET check_function_bodies;
UPDATE d4r SET last_fence = 5 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT id, last_fence FROM d4r;
SELECT tgname, tgtype, tgattr, tgqual IS NOT NULL AS has_when, tgenabled FROM pg_trigger
 WHERE tgrelid = 'd4r'::regclass;
-- Lease-bound (INSERT OR UPDATE OF OR DELETE, and a TRUNCATE statement trigger with WHEN), names
-- and arguments that need quoting, and CREATE OR REPLACE TRIGGER over a whole trigger.
CREATE SCHEMA "d4 s";
CREATE TABLE "d4 s"."T""x" (id int, "fence col" bigint, note text);
CREATE TRIGGER "Fence ""q""" BEFORE INSERT OR UPDATE OR DELETE ON "d4 s"."T""x" FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence col', 'lease=d4''s');
\set VERBOSITY terse
SET check_function_bodies = off;
CREATE OR REPLACE TRIGGER "Fence ""q""" BEFORE INSERT OR UPDATE OF note OR DELETE
    ON "d4 s"."T""x" FOR EACH ROW WHEN (pg_catalog.current_setting('application_name') <> 'skip')
    EXECUTE FUNCTION fencelock.fence_trigger('fence col', 'lease=d4''s');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON "d4 s"."T""x" FOR EACH STATEMENT
    WHEN (pg_catalog.current_setting('application_name') <> 'skip')
    EXECUTE FUNCTION fencelock.fence_trigger('fence col', 'lease=d4''s');
RESET check_function_bodies;
SELECT tgname, tgtype, tgattr, tgqual IS NOT NULL AS has_when, tgenabled,
       encode(tgargs, 'escape') AS args
  FROM pg_trigger WHERE tgrelid = '"d4 s"."T""x"'::regclass ORDER BY tgname;
-- A partition gets clones of its parent's triggers (CREATE TABLE ... PARTITION OF, ALTER TABLE
-- ... ATTACH PARTITION): a parent's trigger that skips rows (made while the event trigger was
-- disabled) is refused there with check_function_bodies on...
CREATE TABLE d4q (id int, last_fence bigint, note text) PARTITION BY LIST (id);
ALTER EVENT TRIGGER fencelock_inheritance_guard DISABLE;
CREATE TRIGGER f_d BEFORE UPDATE OF note ON d4q FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
CREATE TRIGGER f_r BEFORE UPDATE ON d4q FOR EACH ROW WHEN (OLD.id > 0)
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
CREATE TRIGGER f_a BEFORE UPDATE OF note ON d4q FOR EACH ROW WHEN (OLD.id > 0)
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
ALTER EVENT TRIGGER fencelock_inheritance_guard ENABLE;
ALTER TABLE d4q DISABLE TRIGGER f_d, ENABLE REPLICA TRIGGER f_r, ENABLE ALWAYS TRIGGER f_a;
CREATE TABLE d4q1 PARTITION OF d4q FOR VALUES IN (1);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d4q2 (id int, last_fence bigint, note text);
ALTER TABLE d4q ATTACH PARTITION d4q2 FOR VALUES IN (2);
\echo :LAST_ERROR_SQLSTATE
-- ... and widened with it off, its enabled state kept, the partitions' clones following.
SET check_function_bodies = off;
ALTER TABLE d4q ATTACH PARTITION d4q2 FOR VALUES IN (2);
RESET check_function_bodies;
SELECT tgrelid::regclass, tgname, tgattr, tgqual IS NOT NULL AS has_when, tgenabled,
       tgparentid <> 0 AS clone
  FROM pg_trigger WHERE tgrelid IN ('d4q'::regclass, 'd4q2'::regclass) ORDER BY 1, 2;
-- ALTER TRIGGER ... RENAME changes only the name: the widened trigger stays whole.
ALTER TRIGGER f_a ON d4q RENAME TO f_always;
SELECT tgrelid::regclass, tgname, tgattr, tgqual IS NOT NULL AS has_when FROM pg_trigger
 WHERE tgrelid IN ('d4q'::regclass, 'd4q2'::regclass) AND tgname = 'f_always' ORDER BY 1;
\set VERBOSITY default

-- At firing: a trigger made while the event trigger was disabled, lease-bound, for each kind of
-- write.
ALTER EVENT TRIGGER fencelock_inheritance_guard DISABLE;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON d4l FOR EACH ROW
    WHEN (pg_catalog.current_setting('application_name') <> 'skip')
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=d4');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON d4l FOR EACH STATEMENT
    WHEN (pg_catalog.current_setting('application_name') <> 'skip')
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=d4');
ALTER EVENT TRIGGER fencelock_inheritance_guard ENABLE;
\set VERBOSITY terse
INSERT INTO d4l VALUES (1, 1, 'x');
TRUNCATE d4l;
-- An UPDATE OF list made the same way, after the whole trigger had fired (and was resolved).
UPDATE d4 SET last_fence = 12 WHERE id = 1;
ALTER EVENT TRIGGER fencelock_inheritance_guard DISABLE;
CREATE OR REPLACE TRIGGER fence BEFORE UPDATE OF last_fence ON d4 FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
ALTER EVENT TRIGGER fencelock_inheritance_guard ENABLE;
UPDATE d4 SET last_fence = 13 WHERE id = 1;
SELECT id, last_fence FROM d4;

DROP TABLE d4, d4l, d4p, d4r, d4q;
DROP SCHEMA "d4 s" CASCADE;
DROP FUNCTION d4_noop();
