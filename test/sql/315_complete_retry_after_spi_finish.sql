-- Issue 20, defect 2: complete() read the row's state after SPI_finish had freed the memory it
-- was in.  A retried complete of a row already done under the same fence (a retry after a lost
-- reply) must answer true again, as documented; on a server that overwrites freed memory
-- (--enable-cassert, or Valgrind) it answered false.  The state is now copied out of SPI's
-- memory (SPI_palloc) before SPI_finish.
\set VERBOSITY terse
CREATE DOMAIN rt_state AS text;
CREATE TABLE rt (id int PRIMARY KEY, state rt_state NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, max_attempts int DEFAULT 3);
SELECT fencelock.enable_tasks('rt');
INSERT INTO rt (id) SELECT g FROM generate_series(1, 3) AS g;
SELECT id, fence FROM fencelock.claim(NULL::rt, 'w-1', '1 min', 3) ORDER BY id;
SELECT fencelock.complete('rt', 1, 1) AS completed;

-- Retries: at once, in a transaction of their own, and many in one statement.
SELECT fencelock.complete('rt', 1, 1) AS retried;
BEGIN;
SELECT fencelock.complete('rt', 1, 1) AS retried_in_transaction;
COMMIT;
SELECT count(*) FILTER (WHERE fencelock.complete('rt', 1, 1)) AS retries_true
FROM generate_series(1, 50);

-- A state other than done still answers false: a row that failed (ready again), a dead row.
SELECT fencelock.fail('rt', 2, 1) AS failed;
SELECT fencelock.complete('rt', 2, 1) AS complete_after_fail;
UPDATE rt SET state = 'dead', lease_until = NULL, fence = 1 WHERE id = 3;
SELECT fencelock.complete('rt', 3, 1) AS complete_dead;
-- No such row: false.
SELECT fencelock.complete('rt', 99, 1) AS complete_missing;
SELECT id, state, fence FROM rt ORDER BY id;
DROP TABLE rt;
DROP DOMAIN rt_state;
