-- Task-table claiming: the README walkthrough (task-91), then claim order, max_rows, run_after,
-- lapsed leases, max_attempts, and the heartbeat / complete / fail helpers.
\set VERBOSITY terse

-- == The walkthrough: worker a lapses, worker b takes task-91 over, a's writes are refused ==
CREATE TABLE tasks (
    id          text PRIMARY KEY,
    state       text NOT NULL DEFAULT 'ready',
    lease_owner text,
    lease_until timestamptz,
    attempt_id  integer NOT NULL DEFAULT 0,    -- the attempt counter, under its own name
    fence       bigint NOT NULL DEFAULT 0,
    checkpoint  text,
    result      text
);
SELECT fencelock.enable_tasks('tasks', attempt_col => 'attempt_id');
INSERT INTO tasks (id) VALUES ('task-91');

-- Worker a claims task-91 with a short lease ...
SELECT id, state, lease_owner, attempt_id, fence AS fence_a
  FROM fencelock.claim(NULL::tasks, worker => 'worker-a', ttl => '100 ms') \gset
SELECT :'id' AS id, :'state' AS state, :'lease_owner' AS lease_owner, :attempt_id AS attempt_id,
       :fence_a AS fence_a;
-- ... writes a checkpoint under its fence, and pauses past the lease.
UPDATE tasks SET checkpoint = 'step-3', fence = :fence_a WHERE id = 'task-91';
SELECT pg_sleep(0.15);

-- Worker b claims it: a higher fence, the next attempt, and b writes its checkpoint step-12.
SELECT id, lease_owner, attempt_id, fence AS fence_b
  FROM fencelock.claim(NULL::tasks, worker => 'worker-b', ttl => '30 s') \gset
SELECT :'lease_owner' AS lease_owner, :attempt_id AS attempt_id, :fence_b > :fence_a AS b_is_higher;
UPDATE tasks SET checkpoint = 'step-12', fence = :fence_b WHERE id = 'task-91';

-- Worker a wakes up: its checkpoint and its final result are refused with FL001.
\set VERBOSITY default
UPDATE tasks SET checkpoint = 'step-4', fence = :fence_a WHERE id = 'task-91';
UPDATE tasks SET state = 'done', result = 'a''s result', fence = :fence_a WHERE id = 'task-91';
\set VERBOSITY terse
SELECT fencelock.complete('tasks', 'task-91', :fence_a);
-- Worker b's heartbeat, result and completion are accepted.
SELECT fencelock.heartbeat('tasks', 'task-91', :fence_b, '30 s') AS b_heartbeat;
UPDATE tasks SET result = 'b''s result', fence = :fence_b WHERE id = 'task-91';
SELECT fencelock.complete('tasks', 'task-91', :fence_b) AS b_complete;
SELECT id, state, lease_owner, lease_until, attempt_id, fence = :fence_b AS b_fence, checkpoint,
       result
  FROM tasks;
-- A finished task is never claimed again.
SELECT count(*) AS claimed FROM fencelock.claim(NULL::tasks, worker => 'worker-c');

-- == Claim order, max_rows, run_after, priority ==
CREATE TABLE jobs (
    id           bigint PRIMARY KEY,
    state        text NOT NULL DEFAULT 'ready',
    lease_owner  text,
    lease_until  timestamptz,
    attempt      integer NOT NULL DEFAULT 0,
    fence        bigint NOT NULL DEFAULT 0,
    run_after    timestamptz NOT NULL DEFAULT now(),
    priority     integer NOT NULL DEFAULT 0,
    max_attempts integer DEFAULT 3,
    last_error   text,
    payload      text
);
SELECT fencelock.enable_tasks('jobs');
-- The fence trigger and the partial index over claimable rows, in claim order.
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'jobs'::regclass;
SELECT indexrelid::regclass, pg_get_indexdef(indexrelid) FROM pg_index
 WHERE indrelid = 'jobs'::regclass AND NOT indisprimary;
-- enable_tasks is idempotent: a second call with the same columns keeps the index.
SELECT 'jobs_claim_idx'::regclass::oid AS index_before \gset
SELECT fencelock.enable_tasks('jobs');
-- (superuser only: nobody else may read fencelock.task_tables)
SELECT claim_index, claim_index::text::regclass::oid = :index_before AS same_index
  FROM fencelock.task_tables WHERE tbl = 'jobs'::regclass;

INSERT INTO jobs (id, priority, payload) VALUES
    (1, 5, 'low'), (2, 0, 'urgent'), (3, 1, 'normal'), (4, 1, 'normal'), (5, 0, 'urgent');
INSERT INTO jobs (id, payload, run_after) VALUES (6, 'later', now() + interval '1 hour');
INSERT INTO jobs (id, payload, state) VALUES (7, 'finished', 'done'), (8, 'parked', 'paused');

-- Lowest priority value first, then run_after, then the key; the rows come back typed as jobs.
SELECT id, state, lease_owner, attempt, fence, priority, payload, lease_until > now() AS leased
  FROM fencelock.claim(NULL::jobs, worker => 'w-1', ttl => '30 s', max_rows => 3);
-- Claimed rows are not claimed again while their lease lives; run_after in the future, 'done'
-- and unknown states are never claimed.
SELECT id, lease_owner, fence FROM fencelock.claim(NULL::jobs, worker => 'w-2', max_rows => 10);
SELECT count(*) AS nothing_left FROM fencelock.claim(NULL::jobs, worker => 'w-3', max_rows => 10);
-- Called in a select list, as a set-returning function.
UPDATE jobs SET run_after = now() - interval '1 s', fence = fence WHERE id = 6;
SELECT (fencelock.claim(NULL::jobs, 'w-3')).id AS claimed_in_select_list;

-- == A lapsed lease is taken over: next attempt, a higher fence ==
-- (Ageing a lease by hand: an UPDATE that leaves the fence as it is passes the trigger.)
UPDATE jobs SET lease_until = now() - interval '1 s', fence = fence WHERE id = 2;
SELECT id, lease_owner, attempt, fence FROM fencelock.claim(NULL::jobs, worker => 'w-4');
-- w-1's heartbeat on the job it lost is refused; w-4's is accepted; false for a job not running.
SELECT fencelock.heartbeat('jobs', 2, 1);
SELECT fencelock.heartbeat('jobs', 2, 2, '1 min') AS w4_heartbeat;
SELECT fencelock.heartbeat('jobs', 7, 0) AS not_running;
SELECT fencelock.heartbeat('jobs', 999, 0) AS no_such_row;

-- == fail: retry after a backoff, the error kept; dead after max_attempts ==
SELECT fencelock.fail('jobs', 5, 1, error => 'timeout', backoff => '1 hour') AS state_after_fail;
SELECT state, lease_owner, lease_until, attempt, run_after > now() + interval '59 min' AS backed_off,
       last_error
  FROM jobs WHERE id = 5;
-- With backoff => '0', the job is ready again at once (without one, the table's backoff policy
-- applies: 311_claim_backoff).
SELECT fencelock.fail('jobs', 3, 1, backoff => '0') AS state_after_fail;
SELECT id, attempt, fence FROM fencelock.claim(NULL::jobs, worker => 'w-5');
-- Attempt 2 fails too; attempt 3 is the last (max_attempts is 3): when it fails, the job is dead.
SELECT fencelock.fail('jobs', 3, 2, 'boom', '0') AS after_second;
SELECT id, attempt, fence FROM fencelock.claim(NULL::jobs, worker => 'w-5');
SELECT fencelock.fail('jobs', 3, 3, 'boom again') AS after_third;
SELECT state, attempt, fence, last_error FROM jobs WHERE id = 3;
-- Dead means dead: going dead raised the fence, so the last worker cannot complete it or revive it.
SELECT fencelock.complete('jobs', 3, 3) AS late_complete;
UPDATE jobs SET state = 'ready', fence = 3 WHERE id = 3;
SELECT state FROM jobs WHERE id = 3;
-- A worker that dies on its last attempt: when its lease lapses the job becomes dead (its fence
-- raised, so the lost worker's late writes are refused) instead of being claimed.
UPDATE jobs SET attempt = 3, lease_until = now() - interval '1 s', fence = fence WHERE id = 4;
SELECT count(*) AS claimed FROM fencelock.claim(NULL::jobs, worker => 'w-7');
SELECT state, attempt, fence, lease_owner FROM jobs WHERE id = 4;
UPDATE jobs SET payload = 'late', fence = 1 WHERE id = 4;
-- Dead rows do not use up max_rows: the claim goes on to the next rows.
INSERT INTO jobs (id, attempt, payload) VALUES (20, 3, 'exhausted'), (21, 0, 'fresh');
SELECT id, state, attempt FROM fencelock.claim(NULL::jobs, worker => 'w-8', max_rows => 1);
SELECT state FROM jobs WHERE id = 20;
-- NULL max_attempts: no limit.
INSERT INTO jobs (id, attempt, max_attempts) VALUES (22, 100, NULL);
SELECT id, attempt, fence FROM fencelock.claim(NULL::jobs, worker => 'w-8');

-- == complete ==
SELECT fencelock.complete('jobs', 22, 0);
SELECT fencelock.complete('jobs', 22, 1) AS completed;
SELECT fencelock.complete('jobs', 22, 1) AS completed_again;  -- a retry after a lost reply
SELECT fencelock.complete('jobs', 999, 1) AS no_such_row;
SELECT state, lease_owner, lease_until FROM jobs WHERE id = 22;
-- An ordinary UPDATE without the fence is refused (FL002); an admin requeue raises the fence.
UPDATE jobs SET state = 'ready' WHERE id = 22;
UPDATE jobs SET state = 'ready', attempt = 0, fence = fence + 1 WHERE id = 22;
SELECT id, attempt, fence FROM fencelock.claim(NULL::jobs, worker => 'w-9');

-- == The id argument takes the key's type: integers for a bigint key, text literals for uuid ==
CREATE TABLE ujobs (id uuid PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                    lease_until timestamptz, attempt smallint NOT NULL DEFAULT 0,
                    fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('ujobs');
INSERT INTO ujobs (id) VALUES ('00000000-0000-0000-0000-000000000001');
SELECT id, attempt, fence FROM fencelock.claim(NULL::ujobs, worker => 'w-1');
SELECT fencelock.complete('ujobs', '00000000-0000-0000-0000-000000000001', 1) AS by_literal;
SELECT fencelock.complete('ujobs', '00000000-0000-0000-0000-000000000001'::uuid, 1) AS by_uuid;
SELECT fencelock.complete('ujobs', 'not-a-uuid', 1);
SELECT fencelock.complete('ujobs', 42, 1);
SELECT fencelock.complete('jobs', 22::smallint, 3) AS smallint_for_bigint;
-- Without run_after and last_error columns, fail refuses a backoff or an error it cannot keep.
SELECT fencelock.fail('ujobs', '00000000-0000-0000-0000-000000000001', 1, backoff => '1 min');
SELECT fencelock.fail('ujobs', '00000000-0000-0000-0000-000000000001', 1, error => 'x');
SELECT fencelock.fail('ujobs', '00000000-0000-0000-0000-000000000001', 1) AS no_max_attempts;

-- == A composite primary key: claim works; the helpers need a single-column key ==
CREATE TABLE cjobs (tenant text, n int, state text NOT NULL DEFAULT 'ready', lease_owner text,
                    lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                    fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (tenant, n));
SELECT fencelock.enable_tasks('cjobs');
INSERT INTO cjobs (tenant, n) VALUES ('b', 1), ('a', 2), ('a', 1);
SELECT tenant, n, fence FROM fencelock.claim(NULL::cjobs, worker => 'w-1', max_rows => 2);
SELECT fencelock.complete('cjobs', 'a', 1);

-- == Dropped columns and odd names: rows come back as the table's type ==
CREATE TABLE "Odd Jobs" ("Id" int PRIMARY KEY, gone int, "State" text NOT NULL DEFAULT 'ready',
                         "Owner" text, "Until" timestamptz, "Try" int NOT NULL DEFAULT 0,
                         "Fence" bigint NOT NULL DEFAULT 0, note text);
ALTER TABLE "Odd Jobs" DROP COLUMN gone;
SELECT fencelock.enable_tasks('"Odd Jobs"', state_col => 'State', lease_owner_col => 'Owner',
                              lease_until_col => 'Until', attempt_col => 'Try',
                              fence_col => 'Fence');
INSERT INTO "Odd Jobs" ("Id", note) VALUES (1, 'one');
SELECT "Id", "State", "Owner", "Until" > now() AS leased, "Try", "Fence", note
  FROM fencelock.claim(NULL::"Odd Jobs", worker => 'w-1');
-- Seven columns: the dropped one is not among them.
SELECT count(*) FROM fencelock.claim(NULL::"Odd Jobs", 'w-1') AS j(a, b, c, d, e, f, g);
SELECT fencelock.complete('"Odd Jobs"', 1, 1) AS completed;
SELECT "Id", "State", "Fence", note FROM "Odd Jobs";

-- == A partitioned task table ==
CREATE TABLE pjobs (id int, state text NOT NULL DEFAULT 'ready', lease_owner text,
                    lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                    fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE pjobs_1 PARTITION OF pjobs FOR VALUES FROM (0) TO (10);
CREATE TABLE pjobs_2 PARTITION OF pjobs FOR VALUES FROM (10) TO (20);
SELECT fencelock.enable_tasks('pjobs');
INSERT INTO pjobs (id) VALUES (15), (5);
SELECT id, fence FROM fencelock.claim(NULL::pjobs, worker => 'w-1', max_rows => 5);
-- The trigger is on every partition: a stale write is refused.
UPDATE pjobs SET state = 'done', fence = 0 WHERE id = 15;
SELECT fencelock.complete('pjobs', 15, 1) AS completed;

-- == The statements follow the table: rebuilt after ALTER TABLE and enable_tasks ==
ALTER TABLE jobs RENAME COLUMN lease_owner TO owner;
\set VERBOSITY default
SELECT count(*) FROM fencelock.claim(NULL::jobs, worker => 'w-1');
\set VERBOSITY terse
SELECT fencelock.enable_tasks('jobs', lease_owner_col => 'owner');
-- The index does not involve lease_owner: it is kept.
SELECT claim_index::text::regclass::oid = :index_before AS index_kept
  FROM fencelock.task_tables WHERE tbl = 'jobs'::regclass;
UPDATE jobs SET state = 'ready', fence = fence + 1 WHERE id = 1;
SELECT id, owner FROM fencelock.claim(NULL::jobs, worker => 'w-renamed');
-- Without the fence trigger, claims would not fence anything: claim refuses.
DROP TRIGGER fencelock_fence ON jobs;
SELECT count(*) FROM fencelock.claim(NULL::jobs, worker => 'w-1');
SELECT fencelock.enable_tasks('jobs', lease_owner_col => 'owner');
SELECT count(*) >= 0 AS claims_again FROM fencelock.claim(NULL::jobs, worker => 'w-1');
-- A trigger that does not fire in normal operation does not count either.
ALTER TABLE jobs ENABLE REPLICA TRIGGER fencelock_fence;
SELECT count(*) FROM fencelock.claim(NULL::jobs, worker => 'w-1');
ALTER TABLE jobs ENABLE TRIGGER fencelock_fence;
-- A dropped claim index is built again by the next enable_tasks.
DROP INDEX jobs_claim_idx;
SELECT fencelock.enable_tasks('jobs', lease_owner_col => 'owner');
SELECT claim_index, claim_index::text::regclass::oid <> :index_before AS rebuilt
  FROM fencelock.task_tables WHERE tbl = 'jobs'::regclass;
-- A new optional column is used once enable_tasks has seen it; the index follows.
ALTER TABLE ujobs ADD COLUMN run_after timestamptz;
SELECT fencelock.enable_tasks('ujobs');
SELECT pg_get_indexdef(claim_index::text::regclass) FROM fencelock.task_tables WHERE tbl = 'ujobs'::regclass;
SELECT count(*) AS old_index_dropped FROM pg_index
 WHERE indrelid = 'ujobs'::regclass AND NOT indisprimary;

-- A dropped table's row is pruned by the next enable_tasks.
DROP TABLE cjobs;
SELECT fencelock.enable_tasks('tasks', attempt_col => 'attempt_id');
SELECT tbl, state_col, lease_owner_col, lease_until_col, attempt_col, fence_col, run_after_col,
       priority_col, max_attempts_col, last_error_col
  FROM fencelock.task_tables ORDER BY tbl::text;

DROP TABLE tasks, jobs, ujobs, "Odd Jobs", pjobs;
