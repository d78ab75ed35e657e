-- Issue 13: purge_tasks deletes done (and, with include_dead, dead) rows whose finished_at is
-- older than an interval, in statements of batch_size rows that skip rows someone holds locked;
-- it runs as the caller.  finished_at is an optional part of the convention, set by complete and
-- by whatever makes a row dead (fail, claim meeting a row out of attempts).
\set VERBOSITY terse
CREATE TABLE pt (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, max_attempts int DEFAULT 1,
                 finished_at timestamptz, payload text);
SELECT fencelock.enable_tasks('pt');
SELECT finished_at_col FROM fencelock.task_tables WHERE tbl = 'pt'::regclass;
INSERT INTO pt (id) SELECT g FROM generate_series(1, 10) AS g;

-- complete and fail (last attempt: dead) record when the row finished.
SELECT count(fencelock.complete('pt', id, fence)) AS completed
  FROM fencelock.claim(NULL::pt, 'w', '1 minute', 6);
SELECT count(fencelock.fail('pt', id, fence)) AS failed
  FROM fencelock.claim(NULL::pt, 'w', '1 minute', 2);
-- A running row whose lease lapsed on its last attempt is made dead by claim: finished too.
SELECT id, fence FROM fencelock.claim(NULL::pt, 'w', '1 minute') \gset
UPDATE pt SET lease_until = now() - interval '1 s', fence = :fence WHERE id = :id;
SELECT count(*) AS claimed FROM fencelock.claim(NULL::pt, 'w', '1 minute');
SELECT state, count(*), count(finished_at) AS with_finished_at FROM pt GROUP BY state ORDER BY state;

-- Nothing is older than an hour.
SELECT fencelock.purge_tasks('pt', '1 hour') AS purged_none;
-- Age the finished rows, then purge done rows only, in batches of 4 (6 rows: two statements).
UPDATE pt SET finished_at = finished_at - interval '2 hours', fence = fence WHERE finished_at IS NOT NULL;
SELECT fencelock.purge_tasks('pt', '1 hour', batch_size => 4) AS purged_done;
SELECT state, count(*) FROM pt GROUP BY state ORDER BY state;
-- (A done row that another transaction holds locked is skipped: claim_purge_locked.spec.)
-- Dead rows go too with include_dead.
SELECT fencelock.purge_tasks('pt', '1 hour', include_dead => true) AS purged_with_dead;
SELECT state, count(*) FROM pt GROUP BY state ORDER BY state;

-- Errors: a table without finished_at (42703), bad arguments (22023, 22004).
CREATE TABLE pt2 (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                  lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                  fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('pt2');
SELECT fencelock.purge_tasks('pt2', '1 day');
SELECT fencelock.purge_tasks('pt', '-1 day');
SELECT fencelock.purge_tasks('pt', '300000 years');
SELECT fencelock.purge_tasks('pt', '1 day', batch_size => 0);
SELECT fencelock.purge_tasks('pt', NULL);
SELECT fencelock.purge_tasks('pt', '1 day', include_dead => NULL);
SELECT fencelock.purge_tasks('pt', '1 day', batch_size => NULL);
SELECT fencelock.purge_tasks(NULL, '1 day');
SELECT fencelock.purge_tasks('pg_class', '1 day');

-- It runs as the caller: a role without DELETE on the table is refused (42501).
CREATE ROLE fl_purger;
GRANT SELECT, UPDATE ON pt TO fl_purger;
SET ROLE fl_purger;
SELECT fencelock.purge_tasks('pt', '0');
RESET ROLE;
GRANT DELETE ON pt TO fl_purger;
INSERT INTO pt (id, state, finished_at) VALUES (30, 'done', now() - interval '1 day');
SET ROLE fl_purger;
SELECT fencelock.purge_tasks('pt', '0', include_dead => true) AS purged_as_caller;
RESET ROLE;

DROP TABLE pt, pt2;
DROP ROLE fl_purger;
