-- Issue 20, defect 7: a MERGE with an UPDATE action that leaves the fence column alone is
-- refused (FL002) when the row's fence does not change (PostgreSQL tells the trigger the union of
-- all UPDATE actions' columns).  The guard that finds the MERGE kept the statements being run in
-- an array of 64 levels: a MERGE run 64 or more function levels deep was not seen, and passed.
-- The statements are now a list without a limit.  The test cluster preloads fencelock; the
-- session that loads it on first use is test/t/250_merge_guard_first_load.pl.
\set VERBOSITY terse
CREATE TABLE deep (id int PRIMARY KEY, v text, f bigint);
CREATE TRIGGER fence BEFORE UPDATE ON deep FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('f');
INSERT INTO deep VALUES (1, 'start', 5);

-- run_at_depth(L, stmt) runs stmt L levels down: each level is a statement of its own (SELECT
-- ... INTO, through SPI), so stmt is the (L + 2)th statement counting the client's SELECT and
-- the EXECUTE.
CREATE FUNCTION run_at_depth(levels int, stmt text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    IF levels > 0 THEN
        SELECT run_at_depth(levels - 1, stmt) + 1 INTO n;
        RETURN n;
    END IF;
    EXECUTE stmt;
    RETURN 0;
END $$;

-- The MERGE with an unfenced UPDATE action is refused at the top, and as the 2nd, 64th, 65th,
-- 66th and 152nd statement of the nesting (the 65th was the first the array did not hold).
MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'top';
SELECT run_at_depth(0, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'level 0'$$);
SELECT run_at_depth(62, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'level 62'$$);
SELECT run_at_depth(63, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'level 63'$$);
SELECT run_at_depth(64, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'level 64'$$);
SELECT run_at_depth(150, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'level 150'$$);
SELECT * FROM deep;

-- As deep, what must pass still passes: a plain UPDATE that sets the same fence, a MERGE whose
-- every UPDATE action assigns it, and the unfenced MERGE when its action does change the fence.
SELECT run_at_depth(150, $$UPDATE deep SET v = 'update', f = 5$$) AS levels;
SELECT run_at_depth(150, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0
    WHEN MATCHED THEN UPDATE SET v = 'fenced merge', f = 5$$) AS levels;
SELECT run_at_depth(150, $$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET v = 'x'
    WHEN MATCHED THEN UPDATE SET v = 'new fence', f = 6$$) AS levels;
SELECT * FROM deep;

-- When the nested statements have returned (here with an error, caught), the statement that
-- fires the trigger is the outer one again: an UPDATE that keeps its fence passes.
CREATE TABLE outer_t (id int PRIMARY KEY, v text, f bigint);
CREATE TRIGGER fence BEFORE UPDATE ON outer_t FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('f');
INSERT INTO outer_t VALUES (1, 'start', 7);
CREATE FUNCTION try_merge() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM run_at_depth(80, $m$MERGE INTO deep USING (VALUES (1)) s(id) ON deep.id = s.id
        WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'inner'$m$);
    RETURN 'merged';
EXCEPTION WHEN sqlstate 'FL002' THEN
    RETURN 'refused';
END $$;
UPDATE outer_t SET v = try_merge(), f = 7;
SELECT * FROM outer_t;
SELECT * FROM deep;

DROP FUNCTION try_merge(), run_at_depth(int, text);
DROP TABLE deep, outer_t;
