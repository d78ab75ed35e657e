-- Issue 13: claim(..., wait => interval).  NULL (the default) and '0' do not wait; a positive
-- wait returns as soon as a row is claimable, or with no rows at its deadline; fencelock.
-- claim_recheck bounds each sleep.  Refused: a negative or infinite wait, a transaction snapshot
-- (REPEATABLE READ), a table without the wake trigger.
\set VERBOSITY terse
CREATE TABLE wq (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('wq');
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'wq'::regclass ORDER BY 1;

-- No wait: returns at once, with or without rows.
SELECT count(*) AS claimed, clock_timestamp() - statement_timestamp() < interval '1 s' AS at_once
  FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => NULL);
SELECT count(*) AS claimed, clock_timestamp() - statement_timestamp() < interval '1 s' AS at_once
  FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '0');
-- A wait on an empty table: no rows at the deadline, after waiting for it.
SET fencelock.claim_recheck = '50ms';
SELECT count(*) AS claimed,
       clock_timestamp() - statement_timestamp() BETWEEN interval '290 ms' AND interval '5 s' AS waited
  FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '300 ms');
-- A claimable row: returned at once, whatever the wait.
INSERT INTO wq (id) VALUES (1);
SELECT id, attempt, fence, clock_timestamp() - statement_timestamp() < interval '1 s' AS at_once
  FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '1 minute');
-- A running row whose lease lapses during the wait is found by the re-check (no commit announces it).
UPDATE wq SET lease_until = clock_timestamp() + interval '200 ms', fence = 1 WHERE id = 1;
SELECT id, attempt, fence FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '10 s');
RESET fencelock.claim_recheck;

-- Refused.
SELECT * FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '-1 s');
SELECT * FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '1000000 years');
SET fencelock.claim_recheck = '5ms';   -- below its minimum of 10 ms
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '1 s');
ROLLBACK;
-- Without the wake trigger (dropped, or a table enabled before 0.3.0): the hint says what to run.
DROP TRIGGER fencelock_wake ON wq;
SELECT * FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '1 s');
SELECT count(*) AS claimed_without_waiting FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1);
SELECT fencelock.enable_tasks('wq');
SELECT count(*) AS claimed FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '10 ms');
-- A disabled wake trigger does not count either.
ALTER TABLE wq DISABLE TRIGGER fencelock_wake;
SELECT * FROM fencelock.claim(NULL::wq, 'w', '1 minute', 1, wait => '1 s');
ALTER TABLE wq ENABLE TRIGGER fencelock_wake;

-- The trigger function is only a statement trigger.
CREATE TABLE wq_other (id int);
CREATE TRIGGER bad AFTER INSERT ON wq_other FOR EACH ROW EXECUTE FUNCTION fencelock.task_wake();
INSERT INTO wq_other VALUES (1);
SELECT fencelock.task_wake();
SELECT waiting FROM fencelock.task_waiters('wq');
SELECT * FROM fencelock.task_waiters(NULL);
RESET fencelock.claim_recheck;
DROP TABLE wq, wq_other;
