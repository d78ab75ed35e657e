-- Issue 35, defect 4: a fence trigger with a column list (UPDATE OF) or a WHEN condition skips
-- rows, and a stale write it skips commits unchecked.  0.4.0 refuses one at CREATE TRIGGER and at
-- each firing (232); one made under 0.3.0 might never fire (its WHEN skipping exactly the stale
-- writes), so the update to 0.4.0 refuses to run while one exists (39P01, naming them all, a
-- partitioned table's once), and changes nothing; recreated whole, the update runs.
\set VERBOSITY terse
DROP EXTENSION fencelock CASCADE;
CREATE EXTENSION fencelock VERSION '0.3.0';
CREATE TABLE u4 (id int, last_fence bigint, note text);
CREATE TRIGGER fence BEFORE UPDATE ON u4 FOR EACH ROW
    WHEN (NEW.note IS DISTINCT FROM OLD.note) EXECUTE FUNCTION fencelock.fence_trigger();
CREATE TABLE u4l (id int, last_fence bigint, note text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OF note OR DELETE ON u4l FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=u4');
CREATE TABLE u4p (id int, last_fence bigint, note text) PARTITION BY LIST (id);
CREATE TABLE u4p_1 PARTITION OF u4p FOR VALUES IN (1);
CREATE TRIGGER fence BEFORE UPDATE OF note ON u4p FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger();
-- A whole fence trigger, and another function's trigger with both, are no obstacle.
CREATE TABLE u4w (id int, last_fence bigint, note text);
CREATE TRIGGER fence BEFORE UPDATE ON u4w FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
CREATE FUNCTION u4_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER other BEFORE UPDATE OF note ON u4w FOR EACH ROW WHEN (OLD.id > 0)
    EXECUTE FUNCTION u4_noop();

\set VERBOSITY default
\set SHOW_CONTEXT never
ALTER EXTENSION fencelock UPDATE;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
\set SHOW_CONTEXT errors
SELECT extversion FROM pg_extension WHERE extname = 'fencelock';

-- Recreated without UPDATE OF and WHEN, the update runs.
DROP TRIGGER fence ON u4;
CREATE TRIGGER fence BEFORE UPDATE ON u4 FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
DROP TRIGGER fence ON u4l;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON u4l FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=u4');
DROP TRIGGER fence ON u4p;
CREATE TRIGGER fence BEFORE UPDATE ON u4p FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
ALTER EXTENSION fencelock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencelock';

-- Back to a fresh install for what follows.
DROP TABLE u4, u4l, u4p, u4w;
DROP FUNCTION u4_noop();
DROP EXTENSION fencelock CASCADE;
CREATE EXTENSION fencelock;
