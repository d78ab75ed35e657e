-- Issue 10, finding 10: enable_tasks accepted a primary-key column as the fence or attempt
-- column (every claim then failed with 23505).  Every part that claim and the helpers write
-- (state, lease_owner, lease_until, attempt, fence, run_after, last_error) must now be outside the
-- primary key; priority and max_attempts are only read and may be key columns.
\set VERBOSITY default
CREATE TABLE kf (fence bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('kf');
CREATE TABLE ka (id int, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, n int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (id, n));
SELECT fencelock.enable_tasks('ka', attempt_col => 'n');
CREATE TABLE ks (id int, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, last_error text,
                 PRIMARY KEY (state, lease_owner, lease_until, id, last_error));
SELECT fencelock.enable_tasks('ks');
\set VERBOSITY terse
SELECT count(*) AS enabled FROM fencelock.task_tables
 WHERE tbl IN ('kf'::regclass, 'ka'::regclass, 'ks'::regclass);
-- priority in the key is fine.
CREATE TABLE kp (priority int, id int, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (priority, id));
SELECT fencelock.enable_tasks('kp');
INSERT INTO kp VALUES (1, 1), (0, 2);
SELECT priority, id, fence FROM fencelock.claim(NULL::kp, 'w-1', '30 s', 5);
-- A key changed after enable_tasks to take in the fence: claim refuses the table.
CREATE TABLE kl (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('kl');
INSERT INTO kl (id) VALUES (1);
ALTER TABLE kl DROP CONSTRAINT kl_pkey, ADD PRIMARY KEY (id, fence);
SELECT id FROM fencelock.claim(NULL::kl, 'w-1');
SELECT fence FROM kl;
DROP TABLE kf, ka, ks, kp, kl;
