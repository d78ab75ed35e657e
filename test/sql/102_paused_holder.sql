-- The problem fencelock solves, end to end: holder A pauses past its lease, B takes over and
-- closes order o-42, and A's late write is refused by the table itself.
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor;
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, closed_by text,
                     last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO orders VALUES ('o-42', 'expired', NULL, NULL);

-- A acquires (fence f) with a short lease ...
SELECT fencelock.acquire('order-scan', 'worker-a', '100 milliseconds') AS fence_a \gset
-- ... and pauses (GC, VM freeze) past it.
SELECT pg_sleep(0.2);
SELECT state FROM fencelock.leases WHERE resource = 'order-scan';

-- B acquires: a higher fence, and closes the order carrying it.
SELECT fencelock.acquire('order-scan', 'worker-b', '30 seconds') AS fence_b \gset
SELECT :fence_b > :fence_a AS b_fence_is_higher;
UPDATE orders SET status = 'closed', closed_by = 'worker-b', last_fence = :fence_b
 WHERE id = 'o-42';

-- A wakes up and writes with its old fence: rejected with FL001, in the same transaction as
-- the business write.
\set VERBOSITY default
UPDATE orders SET status = 'closed', closed_by = 'worker-a', last_fence = :fence_a
 WHERE id = 'o-42';
-- The same protection for a table without a fence column: assert_fence.
BEGIN;
SELECT fencelock.assert_fence('order-scan', :fence_a);
ROLLBACK;
\set VERBOSITY terse
BEGIN;
SELECT fencelock.assert_fence('order-scan', :fence_b) AS b_is_current;
COMMIT;

-- A's release returns false and B's lease is untouched.
SELECT fencelock.release('order-scan', 'worker-a') AS a_release;
SELECT owner, state, fence = :fence_b AS b_fence FROM fencelock.leases WHERE resource = 'order-scan';
SELECT id, status, closed_by, last_fence = :fence_b AS b_fence FROM orders;

-- B releases; the fence survives release and purge.
SELECT fencelock.release('order-scan', 'worker-b') AS b_release;
SELECT fencelock.purge('0') >= 1 AS purged;
SELECT fencelock.current_fence('order-scan') IS NULL AS row_gone;
SELECT fencelock.acquire('order-scan', 'worker-c') > :fence_b AS next_fence_is_higher;
DROP TABLE orders;
