-- Issue 35, defect 4: a fence trigger with a column list (UPDATE OF) or a WHEN condition fires
-- only for some rows, and a stale holder's write it skips commits unchecked: declared with
-- UPDATE OF note, an UPDATE that assigns only the fence lowered the stored fence from 10 to 5.
-- Such a trigger is refused (39P01) at CREATE TRIGGER, also as CREATE OR REPLACE TRIGGER over a
-- whole one, and at each firing (one made while the guard was off, or with check_function_bodies
-- off as in a restore, where CREATE TRIGGER only warns).
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

-- At firing: a trigger made with check_function_bodies off (as in a restore: only a warning)...
\set VERBOSITY terse
SET check_function_bodies = off;
CREATE TRIGGER restored BEFORE UPDATE OF last_fence ON d4 FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
RESET check_function_bodies;
\set VERBOSITY default
UPDATE d4 SET last_fence = 11 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER restored ON d4;
-- ... and one made while the event trigger was disabled, lease-bound, for each kind of write.
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

DROP TABLE d4, d4l, d4p;
DROP FUNCTION d4_noop();
