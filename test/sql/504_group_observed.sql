-- Shares and permits (issue 27) in what fencelock shows: stats counts them as grants and on
-- their own, history records each grant with its mode and slot (a slot taken over from an
-- expired holder ends its grant 'taken over'), resource_stats counts them per resource, and
-- revoke, raise_fences and purge end a group's holders.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor, fencelock.lease_holder, fencelock.history;
SELECT fencelock.stats_reset();
SELECT fencelock.resource_stats_reset();
SET fencelock.history = on;

-- stats: shares and permits are grants; a retry is a reacquire; renewals and releases count.
SELECT fencelock.acquire_shared('obs:sh', 'r1', '1 minute') AS r1,
       fencelock.acquire_shared('obs:sh', 'r2', '1 minute') AS r2,
       fencelock.acquire_shared('obs:sh', 'r1', '1 minute') AS r1_again;
SELECT fencelock.acquire_permit('obs:pm', 'p1', '1 minute', 2) AS p1;
SELECT fencelock.acquire('obs:sh', 'w', '1 minute') AS busy;
SELECT fencelock.renew('obs:sh', 'r2', '2 minutes') AS renewed,
       fencelock.release('obs:sh', 'r1') AS released;
SELECT grants, reacquires, busy, renewals, releases, shared_grants, permit_grants
  FROM fencelock.stats;
SELECT resource, grants, busy, holds FROM fencelock.resource_stats
 WHERE resource LIKE 'obs:%' ORDER BY resource;

-- history: one row per grant, with its mode and slot; joining a live group is 'joined'.
SELECT resource, fence, owner, granted_how, ended_how, mode, slot
  FROM fencelock.history ORDER BY resource, fence;

-- A permit whose holder expired (lock_delay 0) gives its slot to the next one: the expired
-- holder's grant ends 'taken over', its row leaves the group, its fence is refused.
SET fencelock.lock_delay = 0;
SELECT fencelock.acquire_permit('obs:pm', 'p2', '1 millisecond', 2) AS p2;
SELECT pg_sleep(0.01);
SELECT fencelock.acquire_permit('obs:pm', 'p3', '1 minute', 2) AS p3_takes_slot_2;
SELECT owner, slot, fence, state FROM fencelock.lease_holders WHERE resource = 'obs:pm' ORDER BY slot;
SELECT fence, owner, ended_how, slot FROM fencelock.history WHERE resource = 'obs:pm' ORDER BY fence;
SELECT fencelock.assert_fence('obs:pm', 2);
RESET fencelock.lock_delay;

-- revoke ends the group: its holders go, a new fence nobody holds; renew and release are false.
SELECT fencelock.revoke('obs:pm') AS revoked;
SELECT count(*) AS holders FROM fencelock.lease_holders WHERE resource = 'obs:pm';
SELECT fencelock.renew('obs:pm', 'p1', '1 minute') AS renewed, fencelock.release('obs:pm', 'p3') AS released;
SELECT mode, state FROM fencelock.leases WHERE resource = 'obs:pm';

-- raise_fences ends every group below the bound; purge deletes the holders of rows it deleted.
SELECT fencelock.raise_fences(100) AS raised;
SELECT count(*) AS holders_left FROM fencelock.lease_holder;
SELECT fencelock.acquire_shared('obs:sh', 'r9', '1 minute') AS above_the_bound;
SELECT fencelock.release('obs:sh', 'r9') AS released;
SELECT fencelock.acquire_shared('obs:gone', 'r1', '1 millisecond') AS short_share;
SELECT pg_sleep(0.01);
SELECT count(*) AS holders_before FROM fencelock.lease_holder;
SELECT fencelock.purge('0') AS purged;
SELECT count(*) AS holders_left FROM fencelock.lease_holder;
RESET fencelock.history;
