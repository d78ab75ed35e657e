-- Issue 10, finding 7: the state machine of the task helpers.  fail after complete put a finished
-- job back in the queue, and complete succeeded on a ready row.  The allowed transitions now:
--   claim:     ready (due) -> running, running with a lapsed lease -> running (a new fence);
--              either -> dead when the attempts are used up or the row cannot be raised
--   heartbeat: running -> running (a later lease_until)
--   complete:  running -> done
--   fail:      running -> ready, or dead when the attempts are used up
-- Each helper carries exactly the row's fence (FL001 otherwise).  With the right fence but
-- another state nothing changes: heartbeat and complete return false, fail returns NULL; only
-- complete on a row already done returns true again (a retry after a lost reply).
\set VERBOSITY terse
CREATE TABLE sm (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, max_attempts int DEFAULT 2, last_error text);
SELECT fencelock.enable_tasks('sm');
INSERT INTO sm (id) VALUES (1), (2), (3);

-- complete on a ready row (fence 0 is its fence) does not succeed; heartbeat and fail neither.
SELECT fencelock.complete('sm', 1, 0) AS complete_ready;
SELECT fencelock.heartbeat('sm', 1, 0) AS heartbeat_ready;
SELECT fencelock.fail('sm', 1, 0, 'x') AS fail_ready;
SELECT state, attempt, fence, last_error FROM sm WHERE id = 1;

-- running -> done; then fail (same fence) must not put the finished job back.
SELECT id, fence FROM fencelock.claim(NULL::sm, 'w-1', '30 s', 1);
SELECT fencelock.complete('sm', 1, 1) AS completed;
SELECT fencelock.fail('sm', 1, 1, 'late failure') AS fail_after_complete;
SELECT fencelock.heartbeat('sm', 1, 1) AS heartbeat_after_complete;
SELECT fencelock.complete('sm', 1, 1) AS complete_again;
SELECT state, fence, last_error FROM sm WHERE id = 1;
-- A finished job is not claimed again: rows 2 and 3 are, with a short lease.
SELECT id, fence FROM fencelock.claim(NULL::sm, 'w-1', '100 ms', 5);

-- running -> ready (fail); the fail cannot be repeated, nor the job completed under that fence.
SELECT fencelock.fail('sm', 2, 1, 'first') AS failed;
SELECT fencelock.fail('sm', 2, 1, 'again') AS fail_again;
SELECT fencelock.complete('sm', 2, 1) AS complete_after_fail;
SELECT fencelock.heartbeat('sm', 2, 1) AS heartbeat_after_fail;
SELECT state, attempt, fence, last_error FROM sm WHERE id = 2;

-- heartbeat: running only, also after the lease lapsed while nobody claimed the row again.
SELECT pg_sleep(0.15);
SELECT fencelock.heartbeat('sm', 3, 1, '30 s') AS heartbeat_lapsed;

-- Row 2's second attempt fails too: dead (fence raised); nothing moves a dead row.
SELECT id, fence FROM fencelock.claim(NULL::sm, 'w-2', '30 s', 5);
SELECT fencelock.fail('sm', 2, 2, 'second') AS failed_last;
SELECT fencelock.fail('sm', 2, 3) AS fail_dead;
SELECT fencelock.complete('sm', 2, 3) AS complete_dead;
SELECT fencelock.heartbeat('sm', 2, 3) AS heartbeat_dead;
SELECT fencelock.complete('sm', 2, 2);
SELECT state, attempt, fence FROM sm WHERE id = 2;
SELECT count(*) AS claimable FROM fencelock.claim(NULL::sm, 'w-4', '30 s', 5);

-- Rows in a state the helpers do not know are left alone.
UPDATE sm SET state = 'paused', fence = fence WHERE id = 3;
SELECT fencelock.heartbeat('sm', 3, 1) AS heartbeat_paused,
       fencelock.complete('sm', 3, 1) AS complete_paused,
       fencelock.fail('sm', 3, 1) AS fail_paused;
SELECT id, state, fence FROM sm ORDER BY id;
DROP TABLE sm;
