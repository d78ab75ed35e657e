-- Shared leases (issue 27): acquire_shared grants any number of holders at once, each with a
-- fence of its own (every grant of a resource, shared or exclusive, takes its next fence). The
-- exclusive acquire is busy while a shared holder is live, acquire_shared while an exclusive
-- holder is; renew, release and set_value act per holder; the last release frees the resource;
-- a group whose deadline passed is taken over with a higher fence. Then the scenarios of
-- Redisson's RedissonReadWriteLockTest and Curator's TestInterProcessReadWriteLock that apply
-- to leases, each named in a comment. Waiting, writer preference and ended sessions need a
-- second session: the lease_shared_* isolation specs.
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.lease_holder, fencelock.fence_floor, fencelock.lease_value;

-- Readers together: two owners hold at once, each with the next fence.
SELECT fencelock.acquire_shared('sh:doc', 'reader-1', '1 hour') AS r1_fence;
SELECT fencelock.acquire_shared('sh:doc', 'reader-2', '1 hour') AS r2_fence;
-- The writer is excluded while a reader is live.
SELECT fencelock.acquire('sh:doc', 'writer', '1 hour') AS writer_busy;
-- The resource's row is the group's: no owner, mode shared, the latest fence, the latest
-- deadline of its holders.
SELECT resource, owner, mode, fence, state,
       expires_at = (SELECT max(expires_at) FROM fencelock.lease_holders
                      WHERE resource = 'sh:doc') AS group_deadline_is_latest
  FROM fencelock.leases WHERE resource = 'sh:doc';
SELECT resource, owner, mode, slot, permits, fence, state, holder = current_user AS holder_is_me,
       session_bound, value, remaining > interval '59 minutes' AS remaining_ok,
       acquired_at <= expires_at AS times_ordered
  FROM fencelock.lease_holders WHERE resource = 'sh:doc' ORDER BY fence;

-- A retry by the same owner while it holds: the same fence, its deadline moved, no fence issued.
SELECT expires_at AS r1_deadline FROM fencelock.lease_holders
 WHERE resource = 'sh:doc' AND owner = 'reader-1' \gset
SELECT fencelock.acquire_shared('sh:doc', 'reader-1', '2 hours') AS r1_retry;
SELECT expires_at > :'r1_deadline' AS r1_deadline_moved FROM fencelock.lease_holders
 WHERE resource = 'sh:doc' AND owner = 'reader-1';
SELECT fencelock.current_fence('sh:doc') AS no_fence_issued;
SELECT (SELECT expires_at FROM fencelock.leases WHERE resource = 'sh:doc')
     = (SELECT expires_at FROM fencelock.lease_holders
         WHERE resource = 'sh:doc' AND owner = 'reader-1') AS group_follows_retry;

-- renew, per holder: the holder, also by its fence; not another owner, not another fence.
SELECT fencelock.renew('sh:doc', 'reader-2', '3 hours') AS r2_renews;
SELECT fencelock.renew('sh:doc', 'reader-3', '1 hour') AS stranger_renews;
SELECT fencelock.renew('sh:doc', 'reader-2', '3 hours', 1) AS r2_renews_fence_1;
SELECT fencelock.renew('sh:doc', 'reader-2', '3 hours', 2) AS r2_renews_fence_2;
SELECT owner, remaining > interval '2 hours 59 minutes' AS three_hours,
       remaining < interval '2 hours 1 minute' AS two_hours
  FROM fencelock.lease_holders WHERE resource = 'sh:doc' ORDER BY fence;
SELECT remaining > interval '2 hours 59 minutes' AS group_deadline_follows_renew
  FROM fencelock.leases WHERE resource = 'sh:doc';

-- Fencing: each live holder's fence passes assert_fence while it is in the group.
BEGIN;
SELECT fencelock.assert_fence('sh:doc', 1) AS r1_asserts, fencelock.assert_fence('sh:doc', 2) AS r2_asserts;
ROLLBACK;

-- release, per holder: the other reader still holds and the writer is still excluded.
SELECT fencelock.release('sh:doc', 'reader-1') AS r1_releases;
SELECT fencelock.release('sh:doc', 'reader-1') AS r1_releases_again;
SELECT fencelock.acquire('sh:doc', 'writer', '1 hour') AS writer_still_busy;
SELECT owner, fence, state FROM fencelock.lease_holders WHERE resource = 'sh:doc' ORDER BY fence;
-- The released holder's fence is refused (FL001), the other's still passes.
BEGIN;
SELECT fencelock.assert_fence('sh:doc', 1);
ROLLBACK;
\set VERBOSITY sqlstate
BEGIN;
SELECT fencelock.assert_fence('sh:doc', 1);
ROLLBACK;
\set VERBOSITY terse
BEGIN;
SELECT fencelock.assert_fence('sh:doc', 2) AS r2_still_asserts;
ROLLBACK;
-- The group's deadline falls back to the holder that is left (reader-2's three hours).
SELECT (SELECT expires_at FROM fencelock.leases WHERE resource = 'sh:doc')
     = (SELECT expires_at FROM fencelock.lease_holders
         WHERE resource = 'sh:doc' AND owner = 'reader-2') AS group_deadline_of_r2;
-- The last release, by fence (the wrong fence first): the resource is free.
SELECT fencelock.release('sh:doc', 'reader-2', 1) AS r2_releases_fence_1;
SELECT fencelock.release('sh:doc', 'reader-2', 2) AS r2_releases_fence_2;
SELECT owner, mode, state, fence FROM fencelock.leases WHERE resource = 'sh:doc';
SELECT count(*) AS holders_left FROM fencelock.lease_holders WHERE resource = 'sh:doc';

-- The writer now: a fence above every shared fence. Readers are excluded while it holds, the
-- writer itself too (a shared grant is not a downgrade of its own lease).
SELECT fencelock.acquire('sh:doc', 'writer', '1 hour') AS writer_fence;
SELECT owner, mode, state FROM fencelock.leases WHERE resource = 'sh:doc';
SELECT fencelock.acquire_shared('sh:doc', 'reader-1', '1 hour') AS reader_busy;
SELECT fencelock.acquire_shared('sh:doc', 'writer', '1 hour') AS writer_as_reader_busy;
SELECT count(*) AS no_holders FROM fencelock.lease_holders WHERE resource = 'sh:doc';
SELECT fencelock.release('sh:doc', 'writer') AS writer_releases;
-- Readers again after the writer: the next fences.
SELECT fencelock.acquire_shared('sh:doc', 'reader-1', '1 hour') AS r1_again;
SELECT owner, fence FROM fencelock.lease_holders WHERE resource = 'sh:doc';
-- The writer's fence is refused from the readers' grant on.
BEGIN;
SELECT fencelock.assert_fence('sh:doc', 3);
ROLLBACK;
SELECT fencelock.release('sh:doc', 'reader-1') AS r1_releases;

-- One holder expires, the other holds: the group holds, the writer is excluded; the expired
-- holder's renew and release answer false, and its acquire_shared is a new grant, not a retry.
SELECT fencelock.acquire_shared('sh:one', 'short', '100 milliseconds') AS short_fence;
SELECT fencelock.acquire_shared('sh:one', 'long', '1 hour') AS long_fence;
SELECT pg_sleep(0.2);
SELECT owner, fence, state FROM fencelock.lease_holders WHERE resource = 'sh:one' ORDER BY fence;
SELECT state, mode FROM fencelock.leases WHERE resource = 'sh:one';
SELECT fencelock.acquire('sh:one', 'writer', '1 hour') AS writer_busy;
SELECT fencelock.renew('sh:one', 'short', '1 hour') AS expired_renews,
       fencelock.release('sh:one', 'short') AS expired_releases;
SELECT fencelock.acquire_shared('sh:one', 'short', '1 hour') AS short_new_fence;
SELECT owner, fence, state FROM fencelock.lease_holders WHERE resource = 'sh:one' ORDER BY fence;
SELECT fencelock.release('sh:one', 'short') AND fencelock.release('sh:one', 'long') AS both_released;

-- Every holder expires: the group's deadline passed, the writer takes over with a higher fence;
-- the readers' renew and release answer false and their fences are refused.
SELECT fencelock.acquire_shared('sh:exp', 'r1', '500 milliseconds') AS r1_fence;
SELECT fencelock.acquire_shared('sh:exp', 'r2', '500 milliseconds') AS r2_fence;
SELECT fencelock.acquire('sh:exp', 'writer', '1 hour') AS writer_busy;
SELECT pg_sleep(0.6);
SELECT owner, state FROM fencelock.lease_holders WHERE resource = 'sh:exp' ORDER BY fence;
SELECT state, mode FROM fencelock.leases WHERE resource = 'sh:exp';
SELECT fencelock.acquire('sh:exp', 'writer', '1 hour') AS takeover_fence;
SELECT owner, mode, state, granted_how FROM fencelock.leases WHERE resource = 'sh:exp';
SELECT fencelock.renew('sh:exp', 'r1', '1 hour') AS r1_renews,
       fencelock.release('sh:exp', 'r2') AS r2_releases,
       fencelock.release('sh:exp', 'r2', 2) AS r2_releases_by_fence;
SELECT count(*) AS stale_holders_shown FROM fencelock.lease_holders WHERE resource = 'sh:exp';
BEGIN;
SELECT fencelock.assert_fence('sh:exp', 2);
ROLLBACK;
-- A lease-bound table refuses the stale reader's write, accepts the writer's.
CREATE TABLE sh_doc (id int PRIMARY KEY, body text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON sh_doc FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=sh:exp');
INSERT INTO sh_doc VALUES (1, 'stale reader', 2);
INSERT INTO sh_doc VALUES (1, 'writer', 3);
SELECT * FROM sh_doc;
SELECT fencelock.release('sh:exp', 'writer') AS writer_releases;
-- A reader's lease-bound write passes while it holds; once it released, its fence is refused
-- while the group goes on (r2 holds). After the group's last release nothing newer was issued:
-- r2's fence is the resource's latest and passes, as an exclusive lease's does after release.
SELECT fencelock.acquire_shared('sh:exp', 'r1', '1 hour') AS r1_fence;
SELECT fencelock.acquire_shared('sh:exp', 'r2', '1 hour') AS r2_fence;
UPDATE sh_doc SET body = 'r1', fence = 4 WHERE id = 1;
SELECT fencelock.release('sh:exp', 'r1') AS r1_releases;
UPDATE sh_doc SET body = 'r1 after its release', fence = 4 WHERE id = 1;
\set VERBOSITY sqlstate
UPDATE sh_doc SET body = 'r1 after its release', fence = 4 WHERE id = 1;
\set VERBOSITY terse
UPDATE sh_doc SET body = 'r2', fence = 5 WHERE id = 1;
SELECT fencelock.release('sh:exp', 'r2') AS r2_releases;
UPDATE sh_doc SET body = 'r2 after the last release', fence = 5 WHERE id = 1;
SELECT * FROM sh_doc;
DROP TABLE sh_doc;

-- lock_delay, per holder: a reader expired without a release keeps the resource from the writer
-- for its lock_delay (taken at its grant).
SET fencelock.lock_delay = '1h';
SELECT fencelock.acquire_shared('sh:delay', 'r1', '100 milliseconds') AS r1_fence;
RESET fencelock.lock_delay;
SELECT fencelock.acquire_shared('sh:delay', 'r2', '100 milliseconds') AS r2_fence;
SELECT pg_sleep(0.2);
SELECT owner, state FROM fencelock.lease_holders WHERE resource = 'sh:delay' ORDER BY fence;
SELECT fencelock.acquire('sh:delay', 'writer', '1 hour') AS writer_busy_in_delay;
SELECT fencelock.revoke('sh:delay') AS revoked;

-- Shared and permit holders do not mix on one resource (55006), in either order; nor does a
-- shared grant on an exclusive lease error: it is busy.
\set VERBOSITY default
SELECT fencelock.acquire_shared('sh:mix', 'reader', '1 hour') AS reader_fence;
SELECT fencelock.acquire_permit('sh:mix', 'permit', '1 hour', 3);
SELECT fencelock.acquire_permit('sh:mix2', 'permit', '1 hour', 3) IS NOT NULL AS permit_granted;
SELECT fencelock.acquire_shared('sh:mix2', 'reader', '1 hour');
-- The same owner in the other mode is refused too.
SELECT fencelock.acquire_permit('sh:mix', 'reader', '1 hour', 3);
\set VERBOSITY sqlstate
SELECT fencelock.acquire_permit('sh:mix', 'permit', '1 hour', 3);
SELECT fencelock.acquire_shared('sh:mix2', 'reader', '1 hour');
\set VERBOSITY terse
-- Nothing was written by the refused calls.
SELECT resource, owner, mode FROM fencelock.lease_holders
 WHERE resource IN ('sh:mix', 'sh:mix2') ORDER BY resource;
-- Once the group ended, the other mode is granted.
SELECT fencelock.release('sh:mix', 'reader') AS reader_releases;
SELECT fencelock.acquire_permit('sh:mix', 'permit', '1 hour', 3) IS NOT NULL AS permit_after_readers;
SELECT resource, owner, mode FROM fencelock.lease_holders
 WHERE resource IN ('sh:mix', 'sh:mix2') ORDER BY resource;
SELECT fencelock.revoke('sh:mix') IS NOT NULL AND fencelock.revoke('sh:mix2') IS NOT NULL AS revoked;

-- Arguments are checked like acquire's; nothing is written.
SELECT fencelock.acquire_shared(NULL, 'o', '1 hour');
SELECT fencelock.acquire_shared('sh:arg', NULL, '1 hour');
SELECT fencelock.acquire_shared('sh:arg', '', '1 hour');
SELECT fencelock.acquire_shared('', 'o', '1 hour');
SELECT fencelock.acquire_shared('sh:arg', 'o', '0');
SELECT fencelock.acquire_shared('sh:arg', 'o', '-1 second');
SELECT fencelock.acquire_shared('sh:arg', 'o', NULL);
SELECT fencelock.acquire_shared('sh:arg', 'o', '1 hour', NULL);
SELECT fencelock.acquire_shared('sh:arg', 'o', '1 hour', session => NULL);
SELECT fencelock.acquire_shared('sh:arg', 'o', '1 hour', '-1 second');
SELECT fencelock.acquire_shared(repeat('r', 1025), 'o', '1 hour');
SELECT fencelock.acquire_shared('sh:arg', repeat('o', 257), '1 hour');
SELECT count(*) AS nothing_written FROM fencelock.lease WHERE resource = 'sh:arg';

-- The defaults: ttl fencelock.default_ttl(), try once.
SET fencelock.default_ttl = '5min';
SELECT fencelock.acquire_shared('sh:default', 'o') AS default_fence;
SELECT remaining > interval '4 minutes' AND remaining <= interval '5 minutes' AS default_ttl
  FROM fencelock.lease_holders WHERE resource = 'sh:default';
RESET fencelock.default_ttl;
-- A waiting call is granted at once when nothing is in its way.
SELECT fencelock.acquire_shared('sh:default', 'waiter', '1 minute', '1 second') AS waited_fence;
SELECT fencelock.release('sh:default', 'o') AND fencelock.release('sh:default', 'waiter') AS released;

-- A value per holder, set at the grant or by set_value (only by a live holder, NULL clears);
-- it is shown in lease_holders, not in the group's row of leases.
SELECT fencelock.acquire_shared('sh:val', 'r1', '1 hour', value => '{"node": "a"}') AS r1_fence;
SELECT fencelock.acquire_shared('sh:val', 'r2', '1 hour') AS r2_fence;
SELECT fencelock.set_value('sh:val', 'r2', '{"node": "b"}') AS r2_sets;
SELECT fencelock.set_value('sh:val', 'r3', '{"node": "c"}') AS stranger_sets;
SELECT owner, value FROM fencelock.lease_holders WHERE resource = 'sh:val' ORDER BY fence;
SELECT value FROM fencelock.leases WHERE resource = 'sh:val';
SELECT fencelock.set_value('sh:val', 'r1', NULL) AS r1_clears;
SELECT fencelock.release('sh:val', 'r2') AS r2_releases;
SELECT fencelock.set_value('sh:val', 'r2', '"late"') AS released_sets;
SELECT owner, value FROM fencelock.lease_holders WHERE resource = 'sh:val' ORDER BY fence;
SELECT fencelock.release('sh:val', 'r1') AS r1_releases;

-- A session-bound reader shows as such (its session's end is in lease_shared_exclusion).
SELECT fencelock.acquire_shared('sh:sess', 'r1', '1 hour', session => true) AS bound_fence;
SELECT fencelock.acquire_shared('sh:sess', 'r2', '1 hour') AS unbound_fence;
SELECT owner, session_bound FROM fencelock.lease_holders WHERE resource = 'sh:sess' ORDER BY fence;
SELECT session_bound FROM fencelock.leases WHERE resource = 'sh:sess';

-- revoke ends the group: every holder gone, a new fence nobody holds; the readers' renew and
-- release answer false, their fences are refused; the next grant's fence is higher.
SELECT fencelock.revoke('sh:sess') AS revoke_fence;
SELECT owner, mode, state, granted_how FROM fencelock.leases WHERE resource = 'sh:sess';
SELECT count(*) AS holders_after_revoke FROM fencelock.lease_holders WHERE resource = 'sh:sess';
SELECT fencelock.renew('sh:sess', 'r1', '1 hour') AS r1_renews,
       fencelock.release('sh:sess', 'r2') AS r2_releases;
BEGIN;
SELECT fencelock.assert_fence('sh:sess', 2);
ROLLBACK;
SELECT fencelock.acquire_shared('sh:sess', 'r2', '1 hour') AS next_fence;
SELECT fencelock.release('sh:sess', 'r2') AS r2_releases;

-- history records the mode of each grant.
SET fencelock.history = on;
SELECT fencelock.acquire_shared('sh:hist', 'r1', '1 hour') AS r1_fence;
SELECT fencelock.acquire_shared('sh:hist', 'r2', '1 hour') AS r2_fence;
SELECT fencelock.release('sh:hist', 'r1') AND fencelock.release('sh:hist', 'r2') AS released;
SELECT fencelock.acquire('sh:hist', 'w', '1 hour') AS w_fence;
SELECT fencelock.release('sh:hist', 'w') AS released;
RESET fencelock.history;
SELECT fence, mode, slot FROM fencelock.history WHERE resource = 'sh:hist' ORDER BY fence;

----------------------------------------------------------------------------------------------
-- Redisson's RedissonReadWriteLockTest, translated: a read lock is acquire_shared, a write
-- lock acquire; Redisson's lock() waits, tryLock() is a try-once call (wait '0').

-- Redisson testMultiRead: a second reader joins the first; the writer waits for both to go.
SELECT fencelock.acquire_shared('rw:multi', 'r1', '1 hour') IS NOT NULL AS r1_locked;
SELECT fencelock.acquire('rw:multi', 'w', '1 hour') IS NULL AS write_trylock_fails;
SELECT fencelock.acquire_shared('rw:multi', 'r2', '1 hour') IS NOT NULL AS r2_locked;
SELECT fencelock.release('rw:multi', 'r1') AS r1_unlocks;
SELECT fencelock.acquire('rw:multi', 'w', '1 hour') IS NULL AS write_trylock_still_fails;
SELECT fencelock.release('rw:multi', 'r2') AS r2_unlocks;
SELECT fencelock.acquire('rw:multi', 'w', '1 hour') IS NOT NULL AS write_trylock_succeeds;
SELECT mode, state FROM fencelock.leases WHERE resource = 'rw:multi';
SELECT fencelock.release('rw:multi', 'w') AS w_unlocks;

-- Redisson testWriteLock: while the writer holds, another's read tryLock fails; after its
-- unlock the read succeeds.
SELECT fencelock.acquire('rw:write', 'w', '1 hour') IS NOT NULL AS w_locked;
SELECT fencelock.acquire_shared('rw:write', 'other', '1 hour') IS NULL AS read_trylock_fails;
SELECT fencelock.release('rw:write', 'w') AS w_unlocks;
SELECT fencelock.acquire_shared('rw:write', 'other', '1 hour') IS NOT NULL AS read_trylock_succeeds;
SELECT fencelock.release('rw:write', 'other') AS other_unlocks;

-- Redisson testReadLockExpiration: reader 1 holds long, reader 2 briefly; the writer gets the
-- lock only after reader 1 is gone, not when reader 2's shorter lease ends.
SELECT fencelock.acquire_shared('rw:exp', 'r1', '1 hour') IS NOT NULL AS r1_locked;
SELECT fencelock.acquire_shared('rw:exp', 'r2', '100 milliseconds') IS NOT NULL AS r2_locked;
SELECT pg_sleep(0.2);
SELECT fencelock.acquire('rw:exp', 'w', '1 hour') IS NULL AS writer_waits_for_r1;
SELECT fencelock.release('rw:exp', 'r1') AS r1_unlocks;
SELECT fencelock.acquire('rw:exp', 'w', '1 hour') IS NOT NULL AS writer_locks;
SELECT fencelock.release('rw:exp', 'w') AS w_unlocks;

-- Redisson testReadLockLeaseTimeout and testReadLockLeaseTimeoutDiffThreadsRRW: reader 2
-- locks later and unlocks; reader 1's lease runs out unreleased; the writer then locks (reader
-- 2's later grant does not prolong the group once released).
SELECT fencelock.acquire_shared('rw:lt', 'r1', '500 milliseconds') IS NOT NULL AS r1_locked;
SELECT fencelock.acquire_shared('rw:lt', 'r2', '1 hour') IS NOT NULL AS r2_locked;
SELECT fencelock.release('rw:lt', 'r2') AS r2_unlocks;
SELECT fencelock.acquire('rw:lt', 'w', '1 hour') IS NULL AS writer_busy_while_r1_live;
SELECT pg_sleep(0.6);
SELECT fencelock.acquire('rw:lt', 'w', '1 hour') IS NOT NULL AS writer_locks;
SELECT fencelock.release('rw:lt', 'w') AS w_unlocks;

-- Redisson testReadLockLeaseTimeoutDiffThreadsWRR: the writer's lease runs out unreleased; two
-- waiting readers both get the lock (the waiting call returns at the writer's deadline).
SELECT fencelock.acquire('rw:wrr', 'w', '200 milliseconds') AS w_fence;
SELECT fencelock.acquire_shared('rw:wrr', 'r1', '1 hour', '5 seconds') AS r1_fence_after_w;
SELECT fencelock.acquire_shared('rw:wrr', 'r2', '1 hour', '5 seconds') AS r2_fence;
SELECT owner, state FROM fencelock.lease_holders WHERE resource = 'rw:wrr' ORDER BY fence;
SELECT fencelock.release('rw:wrr', 'r1') AND fencelock.release('rw:wrr', 'r2') AS unlocked;

-- Redisson testExpireRead: a second reader locks at once while the first holds (no waiting).
SELECT fencelock.acquire_shared('rw:er', 'r1', '2 seconds') IS NOT NULL AS r1_locked;
SELECT fencelock.acquire_shared('rw:er', 'r2', '1 hour', '10 seconds') IS NOT NULL AS r2_locked,
       clock_timestamp() - statement_timestamp() < interval '1 second' AS at_once;
SELECT fencelock.release('rw:er', 'r2') AND fencelock.release('rw:er', 'r1') AS unlocked;

-- Redisson testWriteRead: readers locking while the writer holds fail; once it unlocks, twenty
-- readers all hold at once.
SELECT fencelock.acquire('rw:wr', 'w', '1 hour') IS NOT NULL AS w_locked;
SELECT count(fencelock.acquire_shared('rw:wr', 'r' || i, '1 hour')) AS readers_during_write
  FROM generate_series(1, 20) AS i;
SELECT fencelock.release('rw:wr', 'w') AS w_unlocks;
SELECT count(fencelock.acquire_shared('rw:wr', 'r' || i, '1 hour')) AS readers_after_write
  FROM generate_series(1, 20) AS i;
SELECT count(*) AS holders, count(DISTINCT fence) AS fences
  FROM fencelock.lease_holders WHERE resource = 'rw:wr' AND state = 'held';
SELECT count(*) FILTER (WHERE fencelock.release('rw:wr', 'r' || i)) AS unlocked
  FROM generate_series(1, 20) AS i;

-- Redisson testReadLockExpirationRenewal: fifty readers hold past their first lease by
-- renewing it (the watchdog's job in Redisson), with no error, then unlock.
SELECT count(fencelock.acquire_shared('rw:renew', 'r' || i, '1 second')) AS readers
  FROM generate_series(1, 50) AS i;
SELECT count(*) FILTER (WHERE fencelock.renew('rw:renew', 'r' || i, '1 hour')) AS renewed
  FROM generate_series(1, 50) AS i;
SELECT pg_sleep(1.1);
SELECT count(*) FILTER (WHERE state = 'held') AS still_held
  FROM fencelock.lease_holders WHERE resource = 'rw:renew';
SELECT count(*) FILTER (WHERE fencelock.release('rw:renew', 'r' || i)) AS unlocked
  FROM generate_series(1, 50) AS i;
SELECT state FROM fencelock.leases WHERE resource = 'rw:renew';

-- Redisson testName and testLockUnlock: lock and unlock a read lock again and again; each grant
-- a new fence, every unlock true.
DO $$
DECLARE f bigint; last bigint := 0;
BEGIN
  FOR i IN 1 .. 100 LOOP
    f := fencelock.acquire_shared('rw:loop', 'r' || (i % 10), '1 hour');
    IF f IS NULL OR f <= last THEN RAISE EXCEPTION 'lock % got fence % after %', i, f, last; END IF;
    IF NOT fencelock.release('rw:loop', 'r' || (i % 10)) THEN RAISE EXCEPTION 'unlock % failed', i; END IF;
    last := f;
  END LOOP;
END $$;
SELECT fencelock.current_fence('rw:loop') AS fences_issued;

-- Redisson testHoldCount and testReentrancy: no hold count. A second lock by the same owner is
-- a retry (the same fence), and one unlock ends the hold.
SELECT fencelock.acquire_shared('rw:hold', 'r1', '1 hour') AS first_lock,
       fencelock.acquire_shared('rw:hold', 'r1', '1 hour') AS second_lock;
SELECT fencelock.release('rw:hold', 'r1') AS first_unlock,
       fencelock.release('rw:hold', 'r1') AS second_unlock;
SELECT state FROM fencelock.leases WHERE resource = 'rw:hold';

-- Redisson testIsLocked, testIsLockedOtherThread, testIsHeldByCurrentThread and
-- testIsHeldByCurrentThreadOtherThread: leases shows the resource held in shared mode while a
-- reader holds and free after; lease_holders names who holds it.
SELECT state, mode FROM fencelock.leases WHERE resource = 'rw:is';
SELECT fencelock.acquire_shared('rw:is', 'me', '1 hour') IS NOT NULL AS locked;
SELECT state, mode FROM fencelock.leases WHERE resource = 'rw:is';
SELECT EXISTS (SELECT FROM fencelock.lease_holders
                WHERE resource = 'rw:is' AND owner = 'me') AS held_by_me,
       EXISTS (SELECT FROM fencelock.lease_holders
                WHERE resource = 'rw:is' AND owner = 'other') AS held_by_other;
SELECT fencelock.release('rw:is', 'me') AS unlocked;
SELECT state, mode FROM fencelock.leases WHERE resource = 'rw:is';
SELECT EXISTS (SELECT FROM fencelock.lease_holders WHERE resource = 'rw:is') AS held_by_anyone;

-- Redisson testUnlockFail: another owner's unlock of a read lock fails (false, nothing freed).
SELECT fencelock.acquire_shared('rw:uf', 'thread-1', '1 hour') IS NOT NULL AS locked;
SELECT fencelock.release('rw:uf', 'thread-2') AS other_unlocks;
SELECT state FROM fencelock.leases WHERE resource = 'rw:uf';
-- Redisson testForceUnlock: revoke frees the read lock whoever holds it (Redisson's
-- writeLock().forceUnlock() leaving a read lock has no counterpart: revoke ends any mode);
-- on a resource never locked there is nothing to force.
SELECT fencelock.revoke('rw:uf') IS NOT NULL AS force_unlocked;
SELECT state FROM fencelock.leases WHERE resource = 'rw:uf';
SELECT fencelock.revoke('rw:never') IS NULL AS nothing_to_force;

-- Redisson testReadWriteTTL: the remaining time of a reader's lease, and of the group.
SELECT fencelock.acquire_shared('rw:ttl', 'r1', '20 seconds') IS NOT NULL AS locked;
SELECT remaining > interval '19 seconds' AS reader_ttl FROM fencelock.lease_holders
 WHERE resource = 'rw:ttl';
SELECT remaining > interval '19 seconds' AS group_ttl FROM fencelock.leases
 WHERE resource = 'rw:ttl';
SELECT fencelock.release('rw:ttl', 'r1') AS unlocked;

-- Redisson testMultiInstanceReadLockZombieCleanup: instance A's reader never unlocks; B's
-- reader unlocks after A's lease ran out; the writer then locks at once.
SELECT fencelock.acquire_shared('rw:zombie', 'instance-a', '200 milliseconds') IS NOT NULL AS a_locked;
SELECT fencelock.acquire_shared('rw:zombie', 'instance-b', '1 hour') IS NOT NULL AS b_locked;
SELECT pg_sleep(0.3);
SELECT fencelock.release('rw:zombie', 'instance-b') AS b_unlocks;
SELECT fencelock.acquire('rw:zombie', 'writer', '1 hour', '5 seconds') IS NOT NULL AS write_locks,
       clock_timestamp() - statement_timestamp() < interval '1 second' AS at_once;
SELECT fencelock.release('rw:zombie', 'writer') AS unlocked;

-- Redisson testConcurrency_SingleInstance (one session: no concurrency, the mix of modes): 15
-- locks, each a write or a read lock, every one granted and unlocked.
CREATE TEMP TABLE rw_mix (i int, writer bool, fence bigint, unlocked bool);
DO $$
DECLARE f bigint;
BEGIN
  FOR i IN 1 .. 15 LOOP
    IF i % 3 = 0 THEN
      f := fencelock.acquire('rw:mix', 'c' || i, '1 hour');
    ELSE
      f := fencelock.acquire_shared('rw:mix', 'c' || i, '1 hour');
    END IF;
    INSERT INTO rw_mix VALUES (i, i % 3 = 0, f, fencelock.release('rw:mix', 'c' || i));
  END LOOP;
END $$;
SELECT count(*) FILTER (WHERE fence IS NOT NULL AND unlocked) AS locked_and_unlocked,
       count(*) FILTER (WHERE writer) AS writes,
       bool_and(fence > coalesce(prev, 0)) AS fences_grow
  FROM (SELECT *, lag(fence) OVER (ORDER BY i) AS prev FROM rw_mix) AS m;
DROP TABLE rw_mix;

----------------------------------------------------------------------------------------------
-- Curator's TestInterProcessReadWriteLock, translated.

-- Curator testThatUpgradingIsDisallowed: a reader cannot take the write lock while it reads.
SELECT fencelock.acquire_shared('cu:up', 'client', '1 hour') IS NOT NULL AS read_acquired;
SELECT fencelock.acquire('cu:up', 'client', '1 hour', '200 milliseconds') IS NULL AS write_refused;
SELECT fencelock.release('cu:up', 'client') AS read_released;

-- Curator testThatDowngradingRespectsThreads: while one client writes, another's read acquire
-- (with a timeout) fails.
SELECT fencelock.acquire('cu:down', 'client-1', '1 hour') IS NOT NULL AS write_acquired;
SELECT fencelock.acquire_shared('cu:down', 'client-2', '1 hour', '200 milliseconds') IS NULL AS read_refused;
SELECT fencelock.release('cu:down', 'client-1') AS write_released;

-- Curator testGetParticipantNodes (the readers' half; queued writers are in
-- lease_shared_writer_preference): twenty readers are the participants.
SELECT count(fencelock.acquire_shared('cu:part', 'reader-' || i, '1 hour')) AS readers
  FROM generate_series(1, 20) AS i;
SELECT count(*) AS participants, count(*) FILTER (WHERE mode = 'shared') AS shared
  FROM fencelock.lease_holders WHERE resource = 'cu:part';
SELECT fencelock.revoke('cu:part') IS NOT NULL AS revoked;

-- Curator testSetNodeData: the data given with the lock is stored with the holder, a copy.
SELECT fencelock.acquire_shared('cu:data', 'client', '1 hour', value => '[1, 2, 3, 4]') IS NOT NULL AS acquired;
SELECT value FROM fencelock.lease_holders WHERE resource = 'cu:data';
SELECT fencelock.release('cu:data', 'client') AS released;

-- Curator testBasic (one session: the invariants, not the concurrency): writes alone, reads
-- together. Over a run of mixed locks readers overlap, a writer is refused while any reader
-- holds and granted once they are gone, and every grant has a fence of its own.
CREATE TEMP TABLE cu_basic (i int, writer bool, refused_beside_readers bool, fence bigint,
                            readers int);
DO $$
DECLARE f bigint; beside bigint;
BEGIN
  FOR i IN 1 .. 40 LOOP
    IF i % 10 = 0 THEN
      beside := fencelock.acquire('cu:basic', 'writer-' || i, '1 hour');
      PERFORM fencelock.release('cu:basic', 'reader-' || j) FROM generate_series(i - 9, i - 1) AS j;
      f := fencelock.acquire('cu:basic', 'writer-' || i, '1 hour');
      INSERT INTO cu_basic VALUES (i, true, beside IS NULL, f, NULL);
      PERFORM fencelock.release('cu:basic', 'writer-' || i);
    ELSE
      f := fencelock.acquire_shared('cu:basic', 'reader-' || i, '1 hour');
      INSERT INTO cu_basic SELECT i, false, NULL, f,
             (SELECT count(*) FROM fencelock.lease_holders WHERE resource = 'cu:basic');
    END IF;
  END LOOP;
END $$;
SELECT count(*) FILTER (WHERE writer) AS writes, count(*) FILTER (WHERE NOT writer) AS reads,
       max(readers) AS max_readers_at_once,
       count(*) FILTER (WHERE refused_beside_readers) AS writers_refused_beside_readers,
       count(*) FILTER (WHERE fence IS NULL) AS not_granted,
       count(DISTINCT fence) = count(*) AS fences_distinct
  FROM cu_basic;
DROP TABLE cu_basic;

-- The writer preference, the reader waiting for a writer's release, and Curator testLockPath
-- (a writer's session ends, a reader acquires) need two sessions: lease_shared_exclusion and
-- lease_shared_writer_preference.

-- Privileges as for acquire: lease_holders shows a holder's token only to members of the role
-- that took it (and of pg_read_all_stats); assert_fence with its fence only for them (42501); a
-- prefix reserved with grant_resources refuses acquire_shared and acquire_permit to others.
CREATE ROLE regress_sh_app;
CREATE ROLE regress_sh_other;
SET ROLE regress_sh_app;
SELECT fencelock.acquire_shared('sh:priv', 'app-token', '1 hour') AS app_fence;
SELECT owner, holder FROM fencelock.lease_holders WHERE resource = 'sh:priv';
RESET ROLE;
SET ROLE regress_sh_other;
SELECT owner, holder FROM fencelock.lease_holders WHERE resource = 'sh:priv';
BEGIN;
SELECT fencelock.assert_fence('sh:priv', 1);
ROLLBACK;
RESET ROLE;
SELECT fencelock.grant_resources('sh-reserved:', 'regress_sh_app') AS reserved;
SET ROLE regress_sh_other;
\set VERBOSITY sqlstate
SELECT fencelock.acquire_shared('sh-reserved:doc', 'o', '1 hour');
SELECT fencelock.acquire_permit('sh-reserved:pool', 'o', '1 hour', 2);
\set VERBOSITY terse
RESET ROLE;
SET ROLE regress_sh_app;
SELECT fencelock.acquire_shared('sh-reserved:doc', 'o', '1 hour') IS NOT NULL AS grantee_shares,
       fencelock.acquire_permit('sh-reserved:pool', 'o', '1 hour', 2) IS NOT NULL AS grantee_permits;
SELECT fencelock.release('sh-reserved:doc', 'o') AND fencelock.release('sh-reserved:pool', 'o')
       AND fencelock.release('sh:priv', 'app-token') AS released;
RESET ROLE;
SELECT fencelock.revoke_resources('sh-reserved:', 'regress_sh_app') AS unreserved;
DROP ROLE regress_sh_app;
DROP ROLE regress_sh_other;

-- purge removes the holders of ended groups, never a live holder.
SELECT fencelock.acquire_shared('sh:purge-live', 'r1', '1 hour') AS live_fence;
SELECT fencelock.acquire_shared('sh:purge-old', 'r1', '1 millisecond') AS old_fence;
SELECT pg_sleep(0.01);
SELECT fencelock.purge('0') > 0 AS purged;
SELECT resource, owner FROM fencelock.lease_holder
 WHERE resource LIKE 'sh:purge%' ORDER BY resource;
SELECT fencelock.release('sh:purge-live', 'r1') AS released;

-- raise_fences (after restoring an older dump) ends a group below its bound like revoke: no
-- holder left, their renew false, their fences refused; the next grant is above the bound.
SELECT fencelock.acquire_shared('sh:raise', 'r1', '1 hour') AS r1_fence;
SELECT fencelock.acquire_shared('sh:raise', 'r2', '1 hour') AS raise_r2 \gset
SELECT :raise_r2 < 1000 AS r2_below_bound;
SELECT fencelock.raise_fences(1000) > 0 AS raised;
SELECT owner, mode, state, fence FROM fencelock.leases WHERE resource = 'sh:raise';
SELECT count(*) AS holders FROM fencelock.lease_holders WHERE resource = 'sh:raise';
SELECT fencelock.renew('sh:raise', 'r1', '1 hour') AS r1_renews,
       fencelock.release('sh:raise', 'r2') AS r2_releases;
BEGIN;
SELECT fencelock.assert_fence('sh:raise', :raise_r2);
ROLLBACK;
SELECT fencelock.acquire_shared('sh:raise', 'r1', '1 hour') AS next_fence;
SELECT fencelock.release('sh:raise', 'r1') AS released;
SELECT fencelock.purge('0') >= 0 AS purged;
