-- Task-table claiming: every bad input is refused with a clear error before anything is written.
\set VERBOSITY terse

-- == enable_tasks: one error lists everything missing or mistyped, with the DDL to fix it ==
CREATE TABLE bare (id int PRIMARY KEY, payload text);
\set VERBOSITY default
SELECT fencelock.enable_tasks('bare');
CREATE TABLE mistyped (id int PRIMARY KEY, state varchar(10), lease_owner text,
                       lease_until timestamp, attempt numeric, fence integer,
                       run_after date, priority text);
SELECT fencelock.enable_tasks('mistyped');
-- No primary key (the columns are fine).
CREATE TABLE nokey (id int, state text, lease_owner text, lease_until timestamptz, attempt int,
                    fence bigint);
SELECT fencelock.enable_tasks('nokey');
-- Missing columns and no primary key, in one error.
CREATE TABLE nothing (payload text);
SELECT fencelock.enable_tasks('nothing');
-- A column named explicitly must exist, optional or not.
CREATE TABLE ok (id int PRIMARY KEY, state text, lease_owner text, lease_until timestamptz,
                 attempt int, fence bigint, gen bigint GENERATED ALWAYS AS (id * 2) STORED);
SELECT fencelock.enable_tasks('ok', run_after_col => 'not_there');
-- One column cannot play two parts; a generated column cannot be written.
SELECT fencelock.enable_tasks('ok', lease_owner_col => 'state');
SELECT fencelock.enable_tasks('ok', fence_col => 'gen');
\set VERBOSITY terse
SELECT fencelock.enable_tasks('ok', state_col => NULL);
SELECT fencelock.enable_tasks(NULL);
-- Nothing was enabled by the failed calls.
SELECT count(*) AS enabled FROM fencelock.task_tables
 WHERE tbl IN ('bare'::regclass, 'mistyped'::regclass, 'nokey'::regclass, 'nothing'::regclass,
               'ok'::regclass);
SELECT count(*) AS triggers FROM pg_trigger WHERE tgname = 'fencelock_fence';

-- == Not a table: views, sequences, composite types, temporary tables ==
CREATE VIEW ok_view AS SELECT * FROM ok;
CREATE SEQUENCE ok_seq;
CREATE TYPE ok_type AS (id int, state text);
CREATE TEMP TABLE ok_temp (LIKE ok INCLUDING ALL);
SELECT fencelock.enable_tasks('ok_view');
SELECT fencelock.enable_tasks('ok_seq');
SELECT fencelock.enable_tasks('ok_type');
SELECT fencelock.enable_tasks('ok_temp');
SELECT fencelock.enable_tasks('no_such_table');

-- == claim: a table's row type, enabled, and sane arguments ==
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1');     -- not enabled yet
\set VERBOSITY default
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1');
\set VERBOSITY terse
SELECT fencelock.enable_tasks('ok');
SELECT * FROM fencelock.claim(NULL::int, worker => 'w-1');
SELECT * FROM fencelock.claim('ok', worker => 'w-1');
SELECT * FROM fencelock.claim(NULL::ok_view, worker => 'w-1');
SELECT * FROM fencelock.claim(NULL::ok_type, worker => 'w-1');
SELECT * FROM fencelock.claim(NULL::ok, worker => NULL);
SELECT * FROM fencelock.claim(NULL::ok, worker => '');
SELECT * FROM fencelock.claim(NULL::ok, worker => repeat('w', 257));
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1', ttl => NULL);
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1', ttl => '0');
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1', ttl => '-1 s');
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1', ttl => '2 days');
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1', max_rows => 0);
SELECT * FROM fencelock.claim(NULL::ok, worker => 'w-1', max_rows => NULL);
SELECT count(*) AS valid_call FROM fencelock.claim(NULL::ok, worker => repeat('w', 256));

-- == heartbeat, complete, fail: the table, the id, the fence ==
INSERT INTO ok (id, state, attempt, fence) VALUES (1, 'ready', 0, 0);
SELECT fencelock.complete(NULL, 1, 1);
SELECT fencelock.complete('bare', 1, 1);
SELECT fencelock.complete('ok_view', 1, 1);
SELECT fencelock.complete('ok', NULL::int, 1);
SELECT fencelock.complete('ok', 1, NULL);
SELECT fencelock.complete('ok', true, 1);
SELECT fencelock.heartbeat('ok', 1, 1, '-1 s');
SELECT fencelock.heartbeat('ok', 1, 1, NULL);
SELECT fencelock.fail('ok', 1, 1, backoff => '-1 min');
SELECT state, fence FROM ok;

DROP VIEW ok_view;
DROP TABLE bare, mistyped, nokey, nothing, ok, ok_temp;
DROP SEQUENCE ok_seq;
DROP TYPE ok_type;
