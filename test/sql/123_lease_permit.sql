-- Permits (issue 27): acquire_permit(resource, owner, ttl, permits) grants one of `permits`
-- slots, the lowest free one, each grant with the resource's next fence; NULL when all are taken
-- or an exclusive holder is live. The group's first grant fixes the count (another count while a
-- holder is live: 22023); permits and shared holders do not mix (55006). renew, release and
-- set_value act per holder; an expired holder's slot is free again (after its lock_delay). Then
-- the scenarios of Redisson's RedissonPermitExpirableSemaphoreTest and Curator's
-- TestInterProcessSemaphore that apply, each named in a comment. Waiting acquirers woken by a
-- release, concurrency and ended sessions are in the lease_permit_count isolation spec.
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.lease_holder, fencelock.fence_floor, fencelock.lease_value;
-- The permits of a resource's group that no live holder takes (Redisson's availablePermits);
-- NULL when no group holds the resource (every permit is free, the next grant sets the count).
CREATE FUNCTION pg_temp.available(r text) RETURNS bigint LANGUAGE sql AS $$
  SELECT max(permits) - count(*) FILTER (WHERE state = 'held')
    FROM fencelock.lease_holders WHERE resource = r $$;

-- Three permits: three owners get slots 1, 2, 3 with fences 1, 2, 3; the fourth gets NULL.
SELECT fencelock.acquire_permit('pm:pool', 'a', '1 hour', 3) AS a_grant;
SELECT fencelock.acquire_permit('pm:pool', 'b', '1 hour', 3) AS b_grant;
SELECT fencelock.acquire_permit('pm:pool', 'c', '1 hour', 3) AS c_grant;
SELECT fencelock.acquire_permit('pm:pool', 'd', '1 hour', 3) AS d_full;
SELECT resource, owner, mode, slot, permits, fence, state, holder = current_user AS holder_is_me,
       session_bound, value, remaining > interval '59 minutes' AS remaining_ok
  FROM fencelock.lease_holders WHERE resource = 'pm:pool' ORDER BY slot;
SELECT owner, mode, state, fence,
       expires_at = (SELECT max(expires_at) FROM fencelock.lease_holders
                      WHERE resource = 'pm:pool') AS group_deadline_is_latest
  FROM fencelock.leases WHERE resource = 'pm:pool';
-- The exclusive acquire is busy while a permit is held.
SELECT fencelock.acquire('pm:pool', 'w', '1 hour') AS exclusive_busy;

-- A retry by a holder: its slot and fence, its deadline moved, no fence issued.
SELECT fencelock.acquire_permit('pm:pool', 'b', '2 hours', 3) AS b_retry;
SELECT owner, slot, fence, remaining > interval '1 hour 59 minutes' AS moved
  FROM fencelock.lease_holders WHERE resource = 'pm:pool' AND owner = 'b';
SELECT fencelock.current_fence('pm:pool') AS no_fence_issued;

-- Releasing slot 2 frees it: the next grant takes the lowest free slot, 2, with a new fence.
SELECT fencelock.release('pm:pool', 'b') AS b_releases;
SELECT fencelock.release('pm:pool', 'b') AS b_releases_again;
SELECT fencelock.acquire_permit('pm:pool', 'd', '1 hour', 3) AS d_grant;
SELECT owner, slot, fence FROM fencelock.lease_holders WHERE resource = 'pm:pool' ORDER BY slot;
-- b's fence is refused (b released it; its slot is d's now), d's and a's pass.
BEGIN;
SELECT fencelock.assert_fence('pm:pool', 2);
ROLLBACK;
BEGIN;
SELECT fencelock.assert_fence('pm:pool', 4) AS d_asserts, fencelock.assert_fence('pm:pool', 1) AS a_asserts;
ROLLBACK;

-- renew per holder, also by fence; not another owner, not another fence.
SELECT fencelock.renew('pm:pool', 'c', '3 hours') AS c_renews,
       fencelock.renew('pm:pool', 'c', '3 hours', 1) AS c_renews_fence_1,
       fencelock.renew('pm:pool', 'c', '3 hours', 3) AS c_renews_fence_3,
       fencelock.renew('pm:pool', 'x', '3 hours') AS stranger_renews;
SELECT remaining > interval '2 hours 59 minutes' AS group_deadline_follows
  FROM fencelock.leases WHERE resource = 'pm:pool';

-- Another count while a holder is live is refused, with the count in use; nothing changes.
\set VERBOSITY default
SELECT fencelock.acquire_permit('pm:pool', 'e', '1 hour', 5);
SELECT fencelock.acquire_permit('pm:pool', 'e', '1 hour', 0);
SELECT fencelock.acquire_permit('pm:pool', 'e', '1 hour', -1);
\set VERBOSITY sqlstate
SELECT fencelock.acquire_permit('pm:pool', 'e', '1 hour', 5);
SELECT fencelock.acquire_permit('pm:pool', 'e', '1 hour', 0);
SELECT fencelock.acquire_permit('pm:fresh', 'e', '1 hour', 0);
\set VERBOSITY terse
SELECT count(*) AS holders, max(permits) AS permits
  FROM fencelock.lease_holders WHERE resource = 'pm:pool';
SELECT count(*) AS nothing_written FROM fencelock.lease WHERE resource = 'pm:fresh';

-- Releasing every permit ends the group: the resource is free and the exclusive acquire gets a
-- fence above every permit's; while it holds, permits are busy.
SELECT count(*) FILTER (WHERE fencelock.release('pm:pool', o)) AS released
  FROM unnest(ARRAY['a', 'c', 'd']) AS o;
SELECT owner, mode, state FROM fencelock.leases WHERE resource = 'pm:pool';
SELECT fencelock.acquire('pm:pool', 'w', '1 hour') AS exclusive_fence;
SELECT fencelock.acquire_permit('pm:pool', 'a', '1 hour', 3) AS permit_busy;
SELECT fencelock.acquire_permit('pm:pool', 'w', '1 hour', 3) AS holder_as_permit_busy;
SELECT fencelock.release('pm:pool', 'w') AS w_releases;
-- With no live holder the next group may set another count.
SELECT fencelock.acquire_permit('pm:pool', 'a', '1 hour', 1) AS one_permit_grant;
SELECT fencelock.acquire_permit('pm:pool', 'b', '1 hour', 1) AS one_permit_full;
SELECT owner, slot, permits FROM fencelock.lease_holders WHERE resource = 'pm:pool';
SELECT fencelock.release('pm:pool', 'a') AS a_releases;

-- An expired holder's slot is free for the next grant, which gets a new fence; the expired
-- holder's renew and release answer false, its fence is refused once its slot is taken.
SELECT fencelock.acquire_permit('pm:exp', 'a', '500 milliseconds', 2) AS a_grant;
SELECT fencelock.acquire_permit('pm:exp', 'b', '1 hour', 2) AS b_grant;
SELECT fencelock.acquire_permit('pm:exp', 'c', '1 hour', 2) AS c_full;
SELECT pg_sleep(0.6);
SELECT owner, slot, state FROM fencelock.lease_holders WHERE resource = 'pm:exp' ORDER BY slot;
SELECT fencelock.acquire_permit('pm:exp', 'c', '1 hour', 2) AS c_takes_slot_1;
SELECT owner, slot, fence, state FROM fencelock.lease_holders WHERE resource = 'pm:exp' ORDER BY slot;
SELECT fencelock.renew('pm:exp', 'a', '1 hour') AS a_renews, fencelock.release('pm:exp', 'a') AS a_releases;
BEGIN;
SELECT fencelock.assert_fence('pm:exp', 1);
ROLLBACK;
-- Every holder expired: the exclusive acquire takes over with a higher fence.
SELECT fencelock.renew('pm:exp', 'b', '100 milliseconds') AND fencelock.renew('pm:exp', 'c', '100 milliseconds') AS shortened;
SELECT pg_sleep(0.2);
SELECT fencelock.acquire('pm:exp', 'w', '1 hour') AS takeover_fence;
SELECT owner, mode, granted_how FROM fencelock.leases WHERE resource = 'pm:exp';
SELECT count(*) AS holders_shown FROM fencelock.lease_holders WHERE resource = 'pm:exp';
SELECT fencelock.release('pm:exp', 'b') AS b_releases, fencelock.release('pm:exp', 'w') AS w_releases;

-- lock_delay, per holder: an expired holder's slot stays taken for its lock_delay.
SET fencelock.lock_delay = '1h';
SELECT fencelock.acquire_permit('pm:delay', 'a', '100 milliseconds', 1) AS a_grant;
RESET fencelock.lock_delay;
SELECT pg_sleep(0.2);
SELECT fencelock.acquire_permit('pm:delay', 'b', '1 hour', 1) AS slot_still_taken;
SELECT fencelock.acquire('pm:delay', 'w', '1 hour') AS exclusive_still_busy;
SELECT fencelock.revoke('pm:delay') IS NOT NULL AS revoked;
SELECT fencelock.acquire_permit('pm:delay', 'b', '1 hour', 1) IS NOT NULL AS granted_after_revoke;
SELECT fencelock.release('pm:delay', 'b') AS b_releases;

-- A lease-bound table accepts each live permit holder's fence and refuses a released one's.
CREATE TABLE pm_rows (id int PRIMARY KEY, who text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON pm_rows FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=pm:bound');
SELECT fencelock.acquire_permit('pm:bound', 'a', '1 hour', 2) AS a_fence;
SELECT fencelock.acquire_permit('pm:bound', 'b', '1 hour', 2) AS b_fence;
INSERT INTO pm_rows VALUES (1, 'a', 1);
INSERT INTO pm_rows VALUES (2, 'b', 2);
SELECT fencelock.release('pm:bound', 'a') AS a_releases;
INSERT INTO pm_rows VALUES (3, 'a after release', 1);
SELECT * FROM pm_rows ORDER BY id;
SELECT fencelock.release('pm:bound', 'b') AS b_releases;
DROP TABLE pm_rows;

-- Arguments are checked like acquire's; nothing is written.
SELECT fencelock.acquire_permit(NULL, 'o', '1 hour', 1);
SELECT fencelock.acquire_permit('pm:arg', NULL, '1 hour', 1);
SELECT fencelock.acquire_permit('pm:arg', '', '1 hour', 1);
SELECT fencelock.acquire_permit('pm:arg', 'o', NULL, 1);
SELECT fencelock.acquire_permit('pm:arg', 'o', '0', 1);
SELECT fencelock.acquire_permit('pm:arg', 'o', '1 hour', NULL);
SELECT fencelock.acquire_permit('pm:arg', 'o', '1 hour', 1, NULL);
SELECT fencelock.acquire_permit('pm:arg', 'o', '1 hour', 1, '-1 second');
SELECT fencelock.acquire_permit('pm:arg', 'o', '1 hour', 1, session => NULL);
SELECT count(*) AS nothing_written FROM fencelock.lease WHERE resource = 'pm:arg';

-- A value per holder; session-bound holders shown as such; history records mode and slot.
SET fencelock.history = on;
SELECT fencelock.acquire_permit('pm:misc', 'a', '1 hour', 2, value => '{"worker": 1}') IS NOT NULL AS a_granted;
SELECT fencelock.acquire_permit('pm:misc', 'b', '1 hour', 2, session => true) IS NOT NULL AS b_granted;
SELECT fencelock.set_value('pm:misc', 'b', '{"worker": 2}') AS b_sets;
SELECT owner, slot, session_bound, value FROM fencelock.lease_holders
 WHERE resource = 'pm:misc' ORDER BY slot;
-- revoke ends the group: no holder left, their renew and release answer false.
SELECT fencelock.revoke('pm:misc') IS NOT NULL AS revoked;
SELECT count(*) AS holders_after_revoke FROM fencelock.lease_holders WHERE resource = 'pm:misc';
SELECT fencelock.renew('pm:misc', 'a', '1 hour') AS a_renews, fencelock.release('pm:misc', 'b') AS b_releases;
RESET fencelock.history;
SELECT fence, mode, slot FROM fencelock.history WHERE resource = 'pm:misc' ORDER BY fence;

----------------------------------------------------------------------------------------------
-- Redisson's RedissonPermitExpirableSemaphoreTest, translated: a permit id is the owner token
-- (and the fence); trySetPermits is the count of the group's first grant; availablePermits is
-- the count less the live holders.

-- Redisson testNotExistent: a semaphore nobody used has no group, no count, no row.
SELECT pg_temp.available('rs:none') AS available,
       (SELECT count(*) FROM fencelock.leases WHERE resource = 'rs:none') AS rows;

-- Redisson testAvailablePermits, testAcquiredPermits and testGetPermits: two permits of a
-- second each; the third tryAcquire fails; after expiry a fourth succeeds; after its expiry
-- both are available again; the count stays 2 throughout.
SELECT fencelock.acquire_permit('rs:avail', 'p1', '500 milliseconds', 2) IS NOT NULL AS acquire1,
       fencelock.acquire_permit('rs:avail', 'p2', '500 milliseconds', 2) IS NOT NULL AS acquire2,
       fencelock.acquire_permit('rs:avail', 'p3', '500 milliseconds', 2) IS NULL AS acquire3_fails;
SELECT pg_temp.available('rs:avail') AS available, count(*) AS acquired, max(permits) AS permits
  FROM fencelock.lease_holders WHERE resource = 'rs:avail' AND state = 'held';
SELECT pg_sleep(0.6);
SELECT fencelock.acquire_permit('rs:avail', 'p4', '500 milliseconds', 2) IS NOT NULL AS acquire4;
SELECT pg_temp.available('rs:avail') AS available;
SELECT pg_sleep(0.6);
SELECT pg_temp.available('rs:avail') AS available,
       (SELECT max(permits) FROM fencelock.lease_holders WHERE resource = 'rs:avail') AS permits;

-- Redisson testUpdateLeaseTime: updateLeaseTime is renew; false for an unknown permit and
-- after expiry; a renewed permit is held past its first deadline and free after the new one.
SELECT fencelock.renew('rs:ult', '1234', '1 second') AS unknown_updates;
SELECT fencelock.acquire_permit('rs:ult', 'id1', '1 hour', 1) IS NOT NULL AS acquired;
SELECT fencelock.renew('rs:ult', 'id1', '200 milliseconds') AS id1_updates;
SELECT pg_sleep(0.3);
SELECT fencelock.renew('rs:ult', 'id1', '200 milliseconds') AS id1_updates_after_expiry;
SELECT fencelock.acquire_permit('rs:ult', 'id2', '500 milliseconds', 1) IS NOT NULL AS id2_acquired;
SELECT fencelock.renew('rs:ult', 'id2', '1 second') AS id2_updates;
SELECT pg_sleep(0.6);
SELECT pg_temp.available('rs:ult') AS available_while_renewed;
SELECT pg_sleep(0.5);
SELECT pg_temp.available('rs:ult') AS available_after;
SELECT fencelock.renew('rs:ult', 'id2', '1 second') AS id2_updates_after_expiry;

-- Redisson testTrySetPermits (and testSetPermits, where Redisson may change the count of a
-- semaphore in use: here only once no holder is live): the first grant sets 10 permits (9 left
-- beside it); 15 is refused while it holds, accepted after its release.
SELECT fencelock.acquire_permit('rs:set', 'p1', '1 hour', 10) IS NOT NULL AS set_10;
SELECT pg_temp.available('rs:set') AS available;
\set VERBOSITY sqlstate
SELECT fencelock.acquire_permit('rs:set', 'p2', '1 hour', 15);
\set VERBOSITY terse
SELECT pg_temp.available('rs:set') AS available;
SELECT fencelock.release('rs:set', 'p1') AS released;
SELECT fencelock.acquire_permit('rs:set', 'p2', '1 hour', 15) IS NOT NULL AS set_15_once_free;
SELECT pg_temp.available('rs:set') AS available;
SELECT fencelock.release('rs:set', 'p2') AS released;

-- Redisson testExpire and testExpireTryAcquire: one permit of 300 ms; a waiting acquire gets it
-- when it expires, not before; the first holder's tryRelease then fails.
SELECT fencelock.acquire_permit('rs:expire', 'first', '300 milliseconds', 1) IS NOT NULL AS first_acquired;
SELECT fencelock.acquire_permit('rs:expire', 'second', '1 hour', 1, '5 seconds') IS NOT NULL AS second_acquired,
       clock_timestamp() - statement_timestamp() > interval '100 milliseconds' AS waited,
       clock_timestamp() - statement_timestamp() < interval '3 seconds' AS not_to_deadline;
SELECT fencelock.release('rs:expire', 'first') AS first_releases;
SELECT fencelock.release('rs:expire', 'second') AS second_releases;

-- Redisson testTryAcquire (the try-once half; the waiting half is in lease_permit_count): one
-- permit; the second tryAcquire fails at once.
SELECT fencelock.acquire_permit('rs:try', 'p1', '1 hour', 1) IS NOT NULL AS acquired;
SELECT fencelock.acquire_permit('rs:try', 'p2', '1 hour', 1) IS NULL AS try_fails,
       clock_timestamp() - statement_timestamp() < interval '1 second' AS at_once;
SELECT fencelock.release('rs:try', 'p1') AS released;

-- Redisson testReleaseWithoutPermits and testReleaseExpired: releasing an unknown permit, or one
-- whose lease ran out, fails (false, where Redisson throws or answers false).
SELECT fencelock.release('rs:rel', '1234') AS unknown_releases;
SELECT fencelock.acquire_permit('rs:rel', 'p1', '100 milliseconds', 1) IS NOT NULL AS acquired;
SELECT pg_sleep(0.2);
SELECT fencelock.release('rs:rel', 'p1') AS expired_releases;

-- Redisson testRelease, testBlockingAcquireMany, testTryAcquireMany (one permit per call here):
-- ten permits, six holders leave four; releasing four, then two, gives all ten back; releasing
-- them again fails.
SELECT count(fencelock.acquire_permit('rs:many', 'id' || i, '1 hour', 10)) AS acquired
  FROM generate_series(1, 6) AS i;
SELECT pg_temp.available('rs:many') AS available;
SELECT count(*) FILTER (WHERE fencelock.release('rs:many', 'id' || i)) AS released
  FROM generate_series(1, 4) AS i;
SELECT pg_temp.available('rs:many') AS available;
SELECT count(*) FILTER (WHERE fencelock.release('rs:many', 'id' || i)) AS released
  FROM generate_series(5, 6) AS i;
SELECT count(*) FILTER (WHERE fencelock.release('rs:many', 'id' || i)) AS released_again
  FROM generate_series(1, 6) AS i;
SELECT state FROM fencelock.leases WHERE resource = 'rs:many';

-- Redisson testReleaseManyExpiredDoesNotThrow and testTryReleaseManyExpired: three permits of
-- 100 ms and three of an hour out of ten; after the short ones expired, releasing the long ones
-- frees them, releasing the expired ones frees nothing and raises nothing; the group is over.
SELECT count(fencelock.acquire_permit('rs:exp', 'timed' || i, '100 milliseconds', 10)) AS timed,
       count(fencelock.acquire_permit('rs:exp', 'long' || i, '1 hour', 10)) AS long
  FROM generate_series(1, 3) AS i;
SELECT pg_temp.available('rs:exp') AS available;
SELECT pg_sleep(0.2);
SELECT pg_temp.available('rs:exp') AS available_after_expiry;
SELECT count(*) FILTER (WHERE fencelock.release('rs:exp', 'long' || i)) AS long_released,
       count(*) FILTER (WHERE fencelock.release('rs:exp', 'timed' || i)) AS timed_released
  FROM generate_series(1, 3) AS i;
SELECT pg_temp.available('rs:exp') AS available;

-- Redisson testGetLeaseTime: the remaining time of a permit, below its ttl.
SELECT fencelock.acquire_permit('rs:lt', 'p1', '1100 milliseconds', 1) IS NOT NULL AS acquired;
SELECT pg_sleep(0.1);
SELECT remaining <= interval '1 second' AND remaining > interval '0' AS remaining_ok
  FROM fencelock.lease_holders WHERE resource = 'rs:lt';
SELECT fencelock.release('rs:lt', 'p1') AS released;

-- Redisson testConcurrency_SingleInstance and testConcurrencyLoop_MultiInstance (one session:
-- the counting, not the concurrency): one permit, a hundred acquire/release, each granted.
DO $$
DECLARE f bigint; last bigint := 0; n int := 0;
BEGIN
  FOR i IN 1 .. 100 LOOP
    f := fencelock.acquire_permit('rs:loop', 'id' || i, '1 hour', 1);
    IF f IS NULL OR fencelock.current_fence('rs:loop') <= last THEN
      RAISE EXCEPTION 'acquire % got %', i, f;
    END IF;
    last := fencelock.current_fence('rs:loop');
    n := n + 1;
    IF NOT fencelock.release('rs:loop', 'id' || i) THEN RAISE EXCEPTION 'release % failed', i; END IF;
  END LOOP;
  RAISE NOTICE 'counter %', n;
END $$;

----------------------------------------------------------------------------------------------
-- Curator's TestInterProcessSemaphore, translated: a lease is a permit; a client's acquire
-- with a timeout is acquire_permit with wait.

-- Curator testSimple: one permit; a second acquire (another client) times out with NULL. The
-- same client's second acquire is a retry here, not a second lease.
SELECT fencelock.acquire_permit('cs:simple', 'client-1', '1 hour', 1) IS NOT NULL AS first;
SELECT fencelock.acquire_permit('cs:simple', 'client-2', '1 hour', 1, '200 milliseconds') IS NULL AS second_times_out;
SELECT fencelock.acquire_permit('cs:simple', 'client-1', '1 hour', 1) =
       (SELECT fence FROM fencelock.lease_holders WHERE resource = 'cs:simple') AS same_client_retries;
SELECT fencelock.release('cs:simple', 'client-1') AS released;

-- Curator testSimple2 and testGetParticipantNodes: three leases; a fourth is NULL; closing one
-- lets the next in; three participants.
SELECT count(fencelock.acquire_permit('cs:simple2', 'lease-' || i, '1 hour', 3)) AS leases
  FROM generate_series(1, 3) AS i;
SELECT count(*) AS participants FROM fencelock.lease_holders WHERE resource = 'cs:simple2';
SELECT fencelock.acquire_permit('cs:simple2', 'lease-4', '1 hour', 3, '200 milliseconds') IS NULL AS fourth_null;
SELECT fencelock.release('cs:simple2', 'lease-1') AS closed_one;
SELECT fencelock.acquire_permit('cs:simple2', 'lease-4', '1 hour', 3, '200 milliseconds') IS NOT NULL AS fourth_in;
SELECT owner, slot FROM fencelock.lease_holders WHERE resource = 'cs:simple2' ORDER BY slot;
SELECT fencelock.revoke('cs:simple2') IS NOT NULL AS revoked;

-- Curator testRelease1AtATime (one session: the clients in turn): ten clients, five permits;
-- the first five get one, the others none until one is released, one at a time; never more than
-- five live holders, and every client gets a permit in the end.
CREATE TEMP TABLE cs_uses (client int, granted bool, live int);
DO $$
DECLARE f bigint;
BEGIN
  FOR c IN 1 .. 10 LOOP
    f := fencelock.acquire_permit('cs:one', 'client-' || c, '1 hour', 5);
    INSERT INTO cs_uses SELECT c, f IS NOT NULL,
           (SELECT count(*) FROM fencelock.lease_holders WHERE resource = 'cs:one');
  END LOOP;
  FOR c IN 6 .. 10 LOOP
    PERFORM fencelock.release('cs:one', 'client-' || (c - 5));
    f := fencelock.acquire_permit('cs:one', 'client-' || c, '1 hour', 5);
    INSERT INTO cs_uses SELECT c, f IS NOT NULL,
           (SELECT count(*) FROM fencelock.lease_holders WHERE resource = 'cs:one');
  END LOOP;
END $$;
SELECT count(DISTINCT client) FILTER (WHERE granted) AS uses,
       count(*) FILTER (WHERE NOT granted) AS refused, max(live) AS max_leases
  FROM cs_uses;
DROP TABLE cs_uses;
SELECT fencelock.revoke('cs:one') IS NOT NULL AS revoked;

-- Curator testThreads: one permit, ten acquire/release in turn, all granted.
SELECT count(*) FILTER (WHERE CASE WHEN fencelock.acquire_permit('cs:threads', 't' || i, '1 hour', 1) IS NOT NULL
                                   THEN fencelock.release('cs:threads', 't' || i) END) AS all_granted
  FROM generate_series(1, 10) AS i;

-- Curator testInterruptAcquire: a waiting acquire that is cancelled leaves nothing behind; once
-- the lease is returned a third client gets it.
SELECT fencelock.acquire_permit('cs:int', 's1', '1 hour', 1) IS NOT NULL AS s1_acquired;
SET statement_timeout = '300ms';
SELECT fencelock.acquire_permit('cs:int', 's2', '1 hour', 1, '30 seconds');
RESET statement_timeout;
SELECT owner FROM fencelock.lease_holders WHERE resource = 'cs:int';
SELECT waiters FROM fencelock.leases WHERE resource = 'cs:int';
SELECT fencelock.release('cs:int', 's1') AS s1_returned;
SELECT fencelock.acquire_permit('cs:int', 's3', '1 hour', 1, '1 second') IS NOT NULL AS s3_acquired;
SELECT fencelock.release('cs:int', 's3') AS s3_returned;

-- Curator testNoOrphanedNodes (its end): once every lease is returned no holder is left and a
-- new acquire is granted.
SELECT count(*) AS holders_left FROM fencelock.lease_holders WHERE resource LIKE 'cs:%';
SELECT fencelock.acquire_permit('cs:int', 'again', '1 hour', 1) IS NOT NULL AS new_acquire;
SELECT fencelock.release('cs:int', 'again') AS released;

-- purge removes the holders of ended groups, never a live holder.
SELECT fencelock.acquire_permit('pm:purge-live', 'a', '1 hour', 2) IS NOT NULL AS live;
SELECT fencelock.acquire_permit('pm:purge-old', 'a', '1 millisecond', 2) IS NOT NULL AS old;
SELECT pg_sleep(0.01);
SELECT fencelock.purge('0') > 0 AS purged;
SELECT resource, owner FROM fencelock.lease_holder WHERE resource LIKE 'pm:purge%';
SELECT fencelock.release('pm:purge-live', 'a') AS released;
SELECT fencelock.purge('0') >= 0 AS purged;
