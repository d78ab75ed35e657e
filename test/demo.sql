-- fencelock demo (scripts/demo.sh): a holder pauses past its lease and its late write is refused.
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencelock;
DROP TABLE IF EXISTS orders;
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, closed_by text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO orders VALUES ('o-42', 'expired', NULL, NULL);

\echo
\echo '1. worker-a takes the order-scan lease for 1 second and gets a fence:'
SELECT fencelock.acquire('order-scan', 'worker-a', '1 second') AS fence_a \gset
\echo '   fence_a =' :fence_a
\echo '2. worker-a pauses (GC, VM freeze) for 1.5 seconds; its lease expires:'
SELECT pg_sleep(1.5) \g /dev/null
SELECT resource, owner, fence, state FROM fencelock.leases WHERE resource = 'order-scan';
\echo '3. worker-b acquires the lease, gets a higher fence, and closes o-42 with it:'
SELECT fencelock.acquire('order-scan', 'worker-b', '30 seconds') AS fence_b \gset
\echo '   fence_b =' :fence_b
UPDATE orders SET status = 'closed', closed_by = 'worker-b', last_fence = :fence_b WHERE id = 'o-42';
\echo '4. worker-a wakes up and writes with its old fence; the table refuses (SQLSTATE FL001):'
\set ON_ERROR_STOP 0
\set VERBOSITY verbose
UPDATE orders SET status = 'closed', closed_by = 'worker-a', last_fence = :fence_a WHERE id = 'o-42';
\set VERBOSITY default
\set ON_ERROR_STOP 1
\echo '5. worker-a cannot release worker-b''s lease; worker-b releases it:'
SELECT fencelock.release('order-scan', 'worker-a') AS a_release,
       fencelock.release('order-scan', 'worker-b') AS b_release;
\echo '6. the order was closed once, by worker-b:'
SELECT * FROM orders;
SELECT resource, fence, state, granted_how FROM fencelock.leases;
