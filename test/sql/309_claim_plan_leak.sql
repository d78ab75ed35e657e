-- Issue 10, finding 15 (claim part): task_table_reset dropped the kept plans of a table without
-- freeing them when a call on the same table was still running (a nested call): they leaked, in
-- CacheMemoryContext, once per invalidation.  Now they are kept on a list and freed when the last
-- running call on the table ends.
\set VERBOSITY terse
CREATE TABLE lk (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('lk');
-- While claim runs, a trigger invalidates the table (a GRANT changes its pg_class row) and calls a
-- helper on it: the nested call builds the statements again while claim's are still executing.
CREATE FUNCTION lk_nested() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() = 1 THEN
        EXECUTE 'GRANT SELECT ON lk TO PUBLIC';
        PERFORM fencelock.heartbeat('lk', -1, 0, '1 s');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER lk_nested AFTER UPDATE ON lk FOR EACH ROW EXECUTE FUNCTION lk_nested();
INSERT INTO lk (id) SELECT g FROM generate_series(1, 60) AS g;
CREATE FUNCTION lk_plans() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_backend_memory_contexts
     WHERE name = 'CachedPlanSource' AND ident LIKE '%.lk AS t%' $$;
-- A few rounds to reach a steady state, then many more: the number of kept plans stays the same.
SELECT count(*) FROM (SELECT fencelock.claim(NULL::lk, 'w', '30 s', 1) FROM generate_series(1, 5)) AS c;
SELECT lk_plans() AS plans_before \gset
SELECT count(*) FROM (SELECT fencelock.claim(NULL::lk, 'w', '30 s', 1) FROM generate_series(1, 50)) AS c;
SELECT lk_plans() - :plans_before AS plans_leaked, :plans_before <= 4 AS at_most_one_per_statement;
DROP TABLE lk;
DROP FUNCTION lk_nested(), lk_plans();
