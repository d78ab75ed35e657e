-- Issue 13: between installing the 0.3.0 library and ALTER EXTENSION fencelock UPDATE, task
-- tables enabled under 0.2.0 keep working as they did (fencelock.task_tables has no backoff
-- columns yet: fail without a backoff leaves run_after alone); after the update they get the
-- default backoff policy, and enable_tasks again installs the wake triggers.
\set VERBOSITY terse
DROP EXTENSION fencelock CASCADE;
CREATE EXTENSION fencelock VERSION '0.2.0';
CREATE TABLE bu (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, run_after timestamptz, finished_at timestamptz);
SELECT fencelock.enable_tasks('bu');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'bu'::regclass ORDER BY 1;
INSERT INTO bu (id) VALUES (1), (2);
SELECT id, fence FROM fencelock.claim(NULL::bu, 'w', '1 min');
SELECT fencelock.fail('bu', 1, 1) AS failed;
SELECT id, state, run_after IS NULL AS run_after_unchanged FROM bu ORDER BY id;
SELECT id, fence FROM fencelock.claim(NULL::bu, 'w', '1 min');
SELECT fencelock.complete('bu', 1, 2) AS completed;
SELECT id, state, finished_at IS NULL AS no_finished_at FROM bu ORDER BY id;
ALTER EXTENSION fencelock UPDATE;
SELECT tbl, backoff_base, backoff_max, backoff_jitter, finished_at_col FROM fencelock.task_tables;
-- The default policy now applies; a waiting claim asks for enable_tasks again.
SELECT id, fence FROM fencelock.claim(NULL::bu, 'w', '1 min');
SELECT fencelock.fail('bu', 2, 1) AS failed;
SELECT run_after > now() + interval '4 s' AS backed_off FROM bu WHERE id = 2;
SELECT * FROM fencelock.claim(NULL::bu, 'w', '1 min', 1, wait => '1 s');
SELECT fencelock.enable_tasks('bu');
SELECT finished_at_col FROM fencelock.task_tables;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'bu'::regclass ORDER BY 1;
SELECT count(*) AS claimed FROM fencelock.claim(NULL::bu, 'w', '1 min', 1, wait => '10 ms');
DROP TABLE bu;
