-- Row 5 of the benchmark (doc/bench.md): task tables in the layout of doc/claim.md, each enabled
-- with fencelock.enable_tasks (fence trigger + partial claim index), so the hand-written query and
-- fencelock.claim work on identical tables with identical indexes.  Each table holds :finished
-- rows already done (ids 1 .. finished) and a queue of :queue ready rows after them.
--   tasks_sql_1k  the hand-written SKIP LOCKED query, 1 000 finished rows
--   tasks_fl_1k   fencelock.claim, 1 000 finished rows
--   tasks_fl_1m   fencelock.claim, 1 000 000 finished rows
--   tasks_sql_10, tasks_fl_10   the same two, ten rows per claim (a queue three times as long)

CREATE FUNCTION bench_tasks(tbl text, finished bigint, queue bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TABLE %I (
        id          bigint PRIMARY KEY,
        state       text NOT NULL DEFAULT ''ready'',
        lease_owner text,
        lease_until timestamptz,
        attempt     integer NOT NULL DEFAULT 0,
        fence       bigint NOT NULL DEFAULT 0,
        payload     text)', tbl);
    EXECUTE format('INSERT INTO %I (id, state, lease_owner, attempt, fence, payload)
        SELECT i, ''done'', ''w'', 1, 1, ''job '' || i FROM generate_series(1, $1) AS i', tbl)
        USING finished;
    EXECUTE format('INSERT INTO %I (id, payload)
        SELECT i, ''job '' || i FROM generate_series($1 + 1, $1 + $2) AS i', tbl)
        USING finished, queue;
    PERFORM fencelock.enable_tasks(tbl::regclass);
    -- The hand-written queries wait for nothing: their tables go without the wake trigger, so
    -- that fencelock.claim, whose table keeps it, pays for it alone.
    IF tbl LIKE 'tasks_sql%' THEN
        EXECUTE format('DROP TRIGGER IF EXISTS fencelock_wake ON %I', tbl);
    END IF;
END
$$;

-- After a run: drop the rows it finished and queue as many new ones, so every run starts from the
-- same number of finished rows and the same queue (bench/run.sh vacuums the table afterwards).
CREATE FUNCTION bench_refill(tbl text, finished bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    top bigint;
BEGIN
    EXECUTE format('WITH d AS (DELETE FROM %I WHERE id > $1 AND state = ''done'' RETURNING 1)
        SELECT count(*) FROM d', tbl) INTO n USING finished;
    EXECUTE format('SELECT max(id) FROM %I', tbl) INTO top;
    EXECUTE format('INSERT INTO %I (id, payload)
        SELECT i, ''job '' || i FROM generate_series($1 + 1, $1 + $2) AS i', tbl) USING top, n;
    RETURN n;
END
$$;

SELECT bench_tasks('tasks_sql_1k', 1000, :queue);
SELECT bench_tasks('tasks_fl_1k', 1000, :queue);
SELECT bench_tasks('tasks_fl_1m', 1000000, :queue);
SELECT bench_tasks('tasks_sql_10', 1000, 3 * :queue);
SELECT bench_tasks('tasks_fl_10', 1000, 3 * :queue);
VACUUM ANALYZE tasks_sql_1k, tasks_fl_1k, tasks_fl_1m, tasks_sql_10, tasks_fl_10;
