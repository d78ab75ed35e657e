-- acquire_xact (issue 28): the lease for the rest of the transaction.  The grant takes a new fence
-- and is written released, its row locked until the transaction ends; nothing to release.
TRUNCATE fencelock.lease, fencelock.fence_floor;
SET fencelock.history = on;
CREATE TABLE xact_orders (id text PRIMARY KEY, status text, last_fence bigint NOT NULL DEFAULT 0);
CREATE TRIGGER fence BEFORE UPDATE ON xact_orders FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO xact_orders VALUES ('o-1', 'open', 0);

-- The one-step form: one statement, autocommit.
UPDATE xact_orders SET status = 'closed', last_fence = a.f
  FROM (SELECT fencelock.acquire_xact('x:job', 'w-1') AS f) AS a
 WHERE id = 'o-1' AND a.f IS NOT NULL
RETURNING status, last_fence;
SELECT owner, fence, state, granted_how FROM fencelock.leases WHERE resource = 'x:job';
-- the next grant is after a release, with a higher fence
SELECT fencelock.acquire('x:job', 'w-2', '1 hour');
-- while another owner holds a live lease: NULL, nothing written
SELECT fencelock.acquire_xact('x:job', 'w-3') IS NULL AS busy;
SELECT fencelock.acquire_xact('x:job', 'w-2') IS NULL AS busy_also_for_the_holder;
SELECT fencelock.release('x:job', 'w-2');
-- a rollback undoes the grant: the fence is issued again
BEGIN;
SELECT fencelock.acquire_xact('x:job', 'w-4');
ROLLBACK;
SELECT fencelock.acquire_xact('x:job', 'w-5');
-- every call is a new grant, even in one transaction; the earlier fence is then stale
BEGIN;
SELECT fencelock.acquire_xact('x:job', 'w-6') AS first;
SELECT fencelock.acquire_xact('x:job', 'w-6') AS second;
COMMIT;
-- an expired lease is taken over
SELECT fencelock.acquire('x:late', 'w-7', '1 millisecond') IS NOT NULL AS granted;
SELECT pg_sleep(0.01);
SELECT fencelock.acquire_xact('x:late', 'w-8');
SELECT owner, fence, state, granted_how FROM fencelock.leases WHERE resource = 'x:late';
-- the history: each grant ended at once, released
SELECT resource, fence, owner, granted_how, ended_how, ended_at = granted_at AS at_once
  FROM fencelock.history WHERE resource LIKE 'x:%' ORDER BY resource, fence;
-- renew and release find no grant of that owner
SELECT fencelock.acquire_xact('x:r', 'w-9');
SELECT fencelock.renew('x:r', 'w-9') AS renewed, fencelock.release('x:r', 'w-9') AS released;
-- waiting: queued as a waiting acquire is, granted at the holder's expiry (a takeover)
SELECT fencelock.acquire('x:w', 'w-10', '200 milliseconds') IS NOT NULL AS held;
SELECT fencelock.acquire_xact('x:w', 'w-11', wait => '5 seconds');
SELECT fencelock.acquire_xact('x:w', 'w-12', '0');
SELECT owner, fence, state, granted_how FROM fencelock.leases WHERE resource = 'x:w';
-- in REPEATABLE READ a free lease is granted at once, with or without wait; waiting for a busy
-- one is refused (0A000) as acquire's is
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire_xact('x:w', 'w-13', wait => '1 second');
ROLLBACK;
SELECT fencelock.acquire('x:rr', 'w-14', '1 hour') IS NOT NULL AS held;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencelock.acquire_xact('x:rr', 'w-15');
SELECT fencelock.acquire_xact('x:rr', 'w-15', wait => '1 second');
ROLLBACK;
-- bad input, as every acquire
SELECT fencelock.acquire_xact(NULL, 'w');
SELECT fencelock.acquire_xact('x:job', '');
SELECT fencelock.acquire_xact(repeat('r', 1025), 'w');
SELECT fencelock.acquire_xact('x:job', 'w', NULL);
SELECT fencelock.acquire_xact('x:job', 'w', '-1 second');
DROP TABLE xact_orders;
RESET fencelock.history;
