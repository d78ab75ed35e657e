-- Issue 10, finding 2: a poisoned fence blocked the queue.  heartbeat, complete and fail accepted
-- any fence >= the row's and stored it: fail(..., 9223372036854775807, ...) made every later claim
-- fail with 22003, and a stale worker could take a job from its holder with a larger number.
-- Now the helpers carry exactly the row's fence (FL001 otherwise, the row unchanged) and claim is
-- overflow-safe: a row it cannot raise becomes dead with a warning naming it (22003), and the
-- other rows stay claimable.
\set VERBOSITY terse
CREATE TABLE pjobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                    lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                    fence bigint DEFAULT 0, max_attempts int DEFAULT 3,
                    last_error text, run_after timestamptz);
SELECT fencelock.enable_tasks('pjobs');
INSERT INTO pjobs (id) VALUES (1), (2), (3), (4), (5);
SELECT id, fence FROM fencelock.claim(NULL::pjobs, 'w-1', '30 s', 2);

-- == The helpers carry exactly the row's fence ==
-- A fence never issued (larger), from the issue's reproducer: refused, nothing stored.
\set VERBOSITY default
SELECT fencelock.fail('pjobs', 1, 9223372036854775807, 'err', '1 s');
\set VERBOSITY terse
SELECT fencelock.heartbeat('pjobs', 1, 2, '30 s');
SELECT fencelock.complete('pjobs', 1, 2);
-- A stale (smaller) fence: refused as well.
SELECT fencelock.complete('pjobs', 1, 0);
SELECT id, state, lease_owner, fence FROM pjobs WHERE id = 1;
-- A stale worker cannot take the job from its holder with a larger number: w-1 still holds it.
SELECT fencelock.heartbeat('pjobs', 1, 1, '30 s') AS holder_heartbeat;
SELECT fencelock.complete('pjobs', 1, 1) AS holder_complete;
-- A row never claimed has no fence to carry: every fence is refused.
INSERT INTO pjobs (id, state, fence) VALUES (9, 'running', NULL);
SELECT fencelock.complete('pjobs', 9, 0);
SELECT fencelock.heartbeat('pjobs', 9, 1);
DELETE FROM pjobs WHERE id = 9;
-- The refusals were counted with the trigger's.
SELECT stale_rejected >= 5 AS counted FROM fencelock.table_stats WHERE "table" = 'pjobs'::regclass;

-- == claim is overflow-safe ==
-- Rows poisoned by hand (a role with UPDATE may write any larger fence): at the maximum fence,
-- one below it (claim issues fences up to that), and an attempt at int's maximum.
UPDATE pjobs SET fence = 9223372036854775807 WHERE id = 3;
UPDATE pjobs SET fence = 9223372036854775806 WHERE id = 4;
INSERT INTO pjobs (id, attempt, max_attempts) VALUES (6, 2147483647, NULL);
INSERT INTO pjobs (id) VALUES (7);
-- The claim takes the good rows; each poisoned row becomes dead, with a warning naming it.
SELECT id, fence FROM fencelock.claim(NULL::pjobs, 'w-2', '30 s', 5);
SELECT id, state, attempt, fence, last_error FROM pjobs WHERE id IN (3, 4, 6) ORDER BY id;
-- The queue is not blocked: new rows are claimed.
INSERT INTO pjobs (id) VALUES (8);
SELECT id, fence FROM fencelock.claim(NULL::pjobs, 'w-3', '30 s', 5);
-- A smallint attempt column at its maximum: the same.
CREATE TABLE sjobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                    lease_until timestamptz, attempt smallint NOT NULL DEFAULT 0,
                    fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('sjobs');
INSERT INTO sjobs (id, attempt) VALUES (1, 32767), (2, 32766);
SELECT id, attempt, fence FROM fencelock.claim(NULL::sjobs, 'w-1', '30 s', 5);
SELECT id, state, attempt, fence FROM sjobs ORDER BY id;
-- fail at the largest fence claim issues makes the row dead at the type's maximum, no overflow.
UPDATE pjobs SET state = 'ready', attempt = 2, fence = 9223372036854775805 WHERE id = 7;
SELECT id, attempt, fence FROM fencelock.claim(NULL::pjobs, 'w-4', '30 s', 1);
SELECT fencelock.fail('pjobs', 7, 9223372036854775806, 'last try') AS fail_at_max;
SELECT state, fence FROM pjobs WHERE id = 7;

-- == An administrator repairs a poisoned row ==
-- The fence trigger guards UPDATE only: delete the row and insert it again, in one statement,
-- with a fence above every fence a worker may still hold and a fresh attempt.
WITH old AS (DELETE FROM pjobs WHERE id = 3 RETURNING id)
INSERT INTO pjobs (id, fence) SELECT id, 1000 FROM old;
SELECT id, attempt, fence FROM fencelock.claim(NULL::pjobs, 'w-5', '30 s', 1);
-- A requeue by UPDATE raises the fence, so a row at the maximum cannot be requeued that way.
UPDATE pjobs SET state = 'ready', attempt = 0, fence = fence + 1 WHERE id = 4;
DROP TABLE pjobs, sjobs;
