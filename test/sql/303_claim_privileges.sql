-- Task-table claiming runs as the caller: a role claims only in tables it may UPDATE, only a
-- table's owner enables it, and nobody but the extension reads or writes fencelock.task_tables.
\set VERBOSITY terse
CREATE ROLE regress_queue_owner;
CREATE ROLE regress_worker;
CREATE ROLE regress_reader;
CREATE SCHEMA regress_q AUTHORIZATION regress_queue_owner;

SET ROLE regress_queue_owner;
CREATE TABLE regress_q.jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                             lease_owner text, lease_until timestamptz,
                             attempt int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0);
INSERT INTO regress_q.jobs (id) VALUES (1), (2), (3);
GRANT USAGE ON SCHEMA regress_q TO regress_worker, regress_reader;
GRANT SELECT, UPDATE ON regress_q.jobs TO regress_worker;
GRANT SELECT ON regress_q.jobs TO regress_reader;
RESET ROLE;

-- Only the owner enables a table, even a role allowed to update it.
SET ROLE regress_worker;
SELECT fencelock.enable_tasks('regress_q.jobs');
RESET ROLE;
SET ROLE regress_queue_owner;
SELECT fencelock.enable_tasks('regress_q.jobs');
-- The owner cannot read or write fencelock.task_tables directly.
SELECT * FROM fencelock.task_tables;
UPDATE fencelock.task_tables SET fence_col = 'id';
DELETE FROM fencelock.task_tables;
RESET ROLE;

-- A role that may UPDATE the table claims in it; the others are refused by the table's own
-- privileges.
SET ROLE regress_worker;
SELECT id, lease_owner, fence FROM fencelock.claim(NULL::regress_q.jobs, worker => 'w-1');
SELECT fencelock.complete('regress_q.jobs', 1, 1) AS completed;
RESET ROLE;
SET ROLE regress_reader;
SELECT id FROM fencelock.claim(NULL::regress_q.jobs, worker => 'w-2');
SELECT fencelock.complete('regress_q.jobs', 2, 1);
RESET ROLE;

-- Row-level security applies to claims, as to any statement of the caller.
ALTER TABLE regress_q.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_odd ON regress_q.jobs TO regress_worker USING (id % 2 = 1);
SET ROLE regress_worker;
SELECT id FROM fencelock.claim(NULL::regress_q.jobs, worker => 'w-1', max_rows => 10);
RESET ROLE;
ALTER TABLE regress_q.jobs DISABLE ROW LEVEL SECURITY;

-- A hostile search_path cannot redirect the statements: a "=" on text that always says true,
-- in a schema searched first, changes nothing.
CREATE SCHEMA regress_evil AUTHORIZATION regress_worker;
SET ROLE regress_worker;
CREATE FUNCTION regress_evil.always(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.always);
SET search_path = regress_evil, pg_catalog, public;
SELECT id, state FROM fencelock.claim(NULL::regress_q.jobs, worker => 'w-1', max_rows => 10);
RESET search_path;
RESET ROLE;
SELECT id, state, lease_owner FROM regress_q.jobs ORDER BY id;

DROP SCHEMA regress_evil CASCADE;
DROP SCHEMA regress_q CASCADE;
DROP ROLE regress_queue_owner, regress_worker, regress_reader;
