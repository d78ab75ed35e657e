-- The lease rule is written twice in src/store/rule.c: as the SQL of the statements and in C for
-- the direct path (src/store/row.c changes a row without a statement).  This replays one script of
-- grants, renewals, releases, expiries, lock delays, session ends, revokes and the row locks of
-- assert_fence (those of a lease-bound write) through both, step by step (fencelock.direct_path on, then off, on resources of their own),
-- and compares every answer and every lease and history row after it: in READ COMMITTED and
-- REPEATABLE READ, on the lease table as installed, on one a superuser changed (a column added,
-- one dropped), and in databases at 0.1.0 and 0.2.0, whose statements and rules differ.
-- A step where the paths disagree shows both answers and both rows.
\set VERBOSITY terse
SELECT current_database() AS regress_db \gset
-- Fences from 1, whatever the tests before left.
TRUNCATE fencelock.lease, fencelock.fence_floor, fencelock.history;

-- The replay (diff_step), in a file of its own: the same in every database below.  (Found
-- through pg_regress's input directory: a build out of the tree runs psql elsewhere.)
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/lease_rule_diff_step.sql

-- == As installed, READ COMMITTED ==
SET fencelock.history = on;
-- A first grant inserts the row (always a statement); the rest change it.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '400ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '400ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'bob', '400ms')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'a', 'bob', '400ms')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'a', 'alice', '400ms')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'a', 'bob')$$);
SELECT * FROM diff_step($$fencelock.current_fence(%1$L || 'a')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'carol', '400ms')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'b', 'carol')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'b', 'carol')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'b', 'carol', '400ms')$$);
-- After a release: granted again, 'r'.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'dave', '400ms')$$);
-- A lease with a lock delay: it outlives its deadline for other owners, not for its own.
SET fencelock.lock_delay = '1200ms';
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'c', 'erin', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'd', 'fred', '300ms')$$);
RESET fencelock.lock_delay;
SELECT pg_sleep(0.7);
-- a, b and c, d have expired; c, d are inside their lock delay.
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'a', 'alice', '400ms')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'b', 'dave')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '400ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'alice', '400ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'c', 'gina', '400ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'd', 'fred', '400ms')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'c', 'erin', '400ms')$$);
SELECT pg_sleep(0.9);
-- c's delay is over: another owner takes it over.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'c', 'gina', '10s')$$);
-- Sessions: a lease bound to this session, then (as if the session had ended) to a session that
-- is gone: free for anyone.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'e', 'hal', '10s', wait => '0', session => true)$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'e', 'ivy', '10s')$$);
UPDATE fencelock.lease SET session_id = 9223372036854775807 WHERE resource LIKE '_:e';
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'e', 'hal', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'e', 'ivy', '10s')$$);
-- The same owner without session => true unbinds its live lease.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'f', 'jo', '10s', wait => '0', session => true)$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'f', 'jo', '10s')$$);
-- A revoke: nobody holds the lease; the holder's calls are refused; the next grant is above it.
SELECT * FROM diff_step($$fencelock.revoke(%1$L || 'c')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'c', 'gina', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'c', 'gina')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'c', 'gina', '10s')$$);
-- assert_fence locks the row (directly, or FOR SHARE): the current fence passes, others fail.
SELECT * FROM diff_step($$fencelock.assert_fence(%1$L || 'c', fencelock.current_fence(%1$L || 'c'))$$);
SELECT * FROM diff_step($$fencelock.assert_fence(%1$L || 'c', 1)$$);
-- The lock also reads when the latest grant was made: how late the refused fence came after it
-- (resource_stats.max_stale_ms, issue 26), known either way.
SELECT * FROM diff_step($$(SELECT max_stale_ms > 0 AND max_stale_ms < 60000 FROM fencelock.resource_stats WHERE resource = %1$L || 'c')$$);
SELECT * FROM diff_step($$fencelock.assert_fence(%1$L || 'zz', 1)$$);
-- In a read-only transaction the row cannot be locked, either way.
BEGIN READ ONLY;
SELECT * FROM diff_step($$fencelock.assert_fence(%1$L || 'c', fencelock.current_fence(%1$L || 'c'))$$);
COMMIT;
-- A grant and a release in one statement: the second sees the first (the command counter).
SELECT * FROM diff_step($$(SELECT fencelock.acquire(%1$L || 'g', 'kim', '10s') + fencelock.acquire(%1$L || 'g', 'kim', '10s') FROM (VALUES (1)) AS v)$$);
SELECT * FROM diff_step($$(fencelock.release(%1$L || 'g', 'kim') AND NOT fencelock.release(%1$L || 'g', 'kim'))$$);
-- Bad input is refused the same way.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'h', '', '10s')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'h', 'x', '-1s')$$);
-- A release and a renew that name their grant (issue 22, etcd's reproducer): the retry of a
-- release whose first try committed names the old fence and is refused; the newer lease stays.
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'sr', 'W', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'sr', 'W', 1)$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'sr', 'W', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'sr', 'W', 1)$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'sr', 'W', '10s', 1)$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'sr', 'W', '10s', 2)$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'sr', 'V', 2)$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'sr', 'W', NULL)$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'sr', 'W', 2)$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'sr', 'W', '10s', 2)$$);
-- The transaction's own grant (acquire_xact, issue 28): the rule with nobody as the owner and the
-- grant's moment as its deadline: a new fence, written released.  A first row, the row it freed,
-- another owner's live lease (also the caller's own: busy), an expired one (taken over), a
-- released one, and two in one statement (the second sees the first's row free).
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'x', 'kim')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'x', 'kim')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'x', 'lou', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'x', 'kim')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'x', 'lou')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'x', 'lou')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'x', 'lou')$$);
SELECT fencelock.acquire('d:y', 'max', '1ms') + fencelock.acquire('s:y', 'max', '1ms') AS both_granted;
SELECT pg_sleep(0.01);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'y', 'ned')$$);
SELECT * FROM diff_step($$(SELECT fencelock.acquire_xact(%1$L || 'z', 'kim') + fencelock.acquire_xact(%1$L || 'z', 'kim') FROM (VALUES (1)) AS v)$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'x', '')$$);
-- A group's row (shares and permits, issue 27: owner '', the latest holder's deadline) under the
-- exclusive rule: busy while the group lives, free once its last holder released, taken over
-- once it expired; the writers' lock of the row (assert_fence) tells a group's holder's fence.
SELECT * FROM diff_step($$fencelock.acquire_shared(%1$L || 'gq', 'r1', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire_shared(%1$L || 'gq', 'r2', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'gq', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'gq', 'w')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'gq', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gq', 'w')$$);
SELECT * FROM diff_step($$(SELECT 'asserted' FROM (SELECT fencelock.assert_fence(%1$L || 'gq', 1)) AS a)$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gq', 'r1')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'gq', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gq', 'r2')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'gq', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire_permit(%1$L || 'gq', 'p', '10s', 2)$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gq', 'w')$$);
SELECT fencelock.acquire_permit('d:gp', 'p1', '1ms', 2) + fencelock.acquire_permit('s:gp', 'p1', '1ms', 2) AS both_granted;
SELECT pg_sleep(0.01);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'gp', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gp', 'p1')$$);
-- A group whose holders' sessions have ended (issue 35, defect 3): busy while the session-bound
-- holder's session lives; once it has ended (as if the exit sweep had skipped the row) and no
-- holder occupies a share any more, an exclusive grant ends the group and takes the lease; with
-- another holder still live, it stays busy.
SELECT * FROM diff_step($$fencelock.acquire_shared(%1$L || 'gs', 'r1', '10s', wait => '0', session => true)$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'gs', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire_permit(%1$L || 'gt', 'p1', '10s', 2, wait => '0', session => true)$$);
SELECT * FROM diff_step($$fencelock.acquire_permit(%1$L || 'gt', 'p2', '10s', 2)$$);
UPDATE fencelock.lease_holder SET session_id = 9223372036854775807
 WHERE resource LIKE '_:g_' AND session_id IS NOT NULL;
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'gs', 'w', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'gt', 'w')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gt', 'p2')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'gt', 'w')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'gs', 'w')$$);

-- == REPEATABLE READ: both paths are the statements'; the answers stay the same ==
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'g', 'kim', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'g', 'kim', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'g', 'lee', '10s')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'g', 'kim', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'g', 'kim')$$);
SELECT * FROM diff_step($$fencelock.acquire_xact(%1$L || 'g', 'kim')$$);
COMMIT;

-- == A lease table a superuser changed: a column added, one dropped (attribute numbers move) ==
ALTER TABLE fencelock.lease ADD COLUMN gone pg_catalog.int4;
ALTER TABLE fencelock.lease ADD COLUMN note pg_catalog.text DEFAULT 'kept';
ALTER TABLE fencelock.lease DROP COLUMN gone;
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '10s')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'bob', '10s')$$);
SELECT * FROM diff_step($$fencelock.assert_fence(%1$L || 'a', 1)$$);
SELECT * FROM diff_step($$(SELECT max_stale_ms > 0 AND max_stale_ms < 60000 FROM fencelock.resource_stats WHERE resource = %1$L || 'a')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'i', 'bob', '300ms')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'i', 'bob', '300ms')$$);
SELECT pg_sleep(0.5);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'i', 'alice', '10s')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'a', 'alice')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'carol', '10s')$$);
SELECT count(*) FILTER (WHERE note = 'kept') AS kept, count(*) AS rows
  FROM fencelock.lease WHERE resource LIKE '_:_';
ALTER TABLE fencelock.lease DROP COLUMN note;
RESET fencelock.history;
DELETE FROM fencelock.lease WHERE resource LIKE '_:_';
DELETE FROM fencelock.history WHERE resource LIKE '_:_';

-- == Databases at 0.1.0 and 0.2.0: their own statements and rules ==
\c postgres
CREATE DATABASE fencelock_rule_010;
CREATE DATABASE fencelock_rule_020;
\c fencelock_rule_010
CREATE EXTENSION fencelock VERSION '0.1.0';
\i :abs_srcdir/sql/include/lease_rule_diff_step.sql
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'bob', '300ms')$$);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'a', 'alice', '300ms')$$);
SELECT pg_sleep(0.5);
SELECT * FROM diff_step($$fencelock.renew(%1$L || 'a', 'alice', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '300ms')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'a', 'alice')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'bob', '300ms')$$);
\c fencelock_rule_020
CREATE EXTENSION fencelock VERSION '0.1.0';
ALTER EXTENSION fencelock UPDATE TO '0.2.0';
\i :abs_srcdir/sql/include/lease_rule_diff_step.sql
SET fencelock.history = on;
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'alice', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'bob', '300ms')$$);
SET fencelock.lock_delay = '800ms';
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'carol', '300ms')$$);
RESET fencelock.lock_delay;
SELECT pg_sleep(0.5);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'a', 'bob', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'dave', '300ms')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'carol', '300ms')$$);
SELECT * FROM diff_step($$fencelock.release(%1$L || 'b', 'carol')$$);
SELECT * FROM diff_step($$fencelock.acquire(%1$L || 'b', 'dave', '300ms')$$);
\c :regress_db
DROP DATABASE fencelock_rule_010;
DROP DATABASE fencelock_rule_020;
DROP FUNCTION diff_step(text);
DROP FUNCTION diff_rows(text);
