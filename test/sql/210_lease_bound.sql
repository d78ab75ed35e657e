-- Lease-bound writes: fence_trigger('col', 'lease=NAME' | 'lease_column=COL') checks every write
-- against the lease's latest fence, not against the fence stored in the row (issue 11).
DELETE FROM fencelock.fence_floor;	-- fences start at 1, whatever a purge left before
\set VERBOSITY default

-- The lost add of the issue, per-row fencing: A's lease was taken over by B, but A writes first
-- and the row has not seen B's fence yet, so A's stale write is accepted and B overwrites it.
CREATE TABLE s_row (id int PRIMARY KEY, v text[], last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON s_row FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO s_row VALUES (1, '{}', 0);
SELECT fencelock.acquire('set-demo', 'A', '100ms') AS fence_a;
SELECT pg_sleep(0.2);
SELECT fencelock.acquire('set-demo', 'B', '30s') AS fence_b;
UPDATE s_row SET v = v || 'a'::text, last_fence = 1 WHERE id = 1;   -- accepted: the loss
UPDATE s_row SET v = '{b}', last_fence = 2 WHERE id = 1;
SELECT * FROM s_row;

-- The same with the table bound to the lease: A's write is refused, B's accepted.
CREATE TABLE s (id int PRIMARY KEY, v text[], last_fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON s FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
INSERT INTO s VALUES (1, '{}', 2);
UPDATE s SET v = v || 'a'::text, last_fence = 1 WHERE id = 1;
UPDATE s SET v = v || 'b'::text, last_fence = 2 WHERE id = 1;
SELECT * FROM s;

-- INSERT carries the fence in the new row: stale, never issued and NULL fences are refused.
INSERT INTO s VALUES (2, '{}', 1);
INSERT INTO s VALUES (2, '{}', 3);
INSERT INTO s VALUES (2, '{}', NULL);
-- UPDATE must assign the fence column, with the latest fence, on every row.
UPDATE s SET v = '{}' WHERE id = 1;
UPDATE s SET last_fence = NULL WHERE id = 1;
-- A multi-row statement is all or nothing.
INSERT INTO s VALUES (2, '{}', 2), (3, '{}', 1);
SELECT id FROM s ORDER BY id;

-- DELETE has no new row: it passes only once this transaction has shown the lease's latest
-- fence, by a lease-bound write or by assert_fence.
DELETE FROM s WHERE id = 1;
BEGIN;
SELECT fencelock.assert_fence('set-demo', 2);
DELETE FROM s WHERE id = 1;
ROLLBACK;
BEGIN;
UPDATE s SET last_fence = 2 WHERE id = 1;
DELETE FROM s WHERE id = 1;
ROLLBACK;
-- A failed assert_fence shows nothing.
BEGIN;
SELECT fencelock.assert_fence('set-demo', 1);
ROLLBACK;
BEGIN;
DELETE FROM s WHERE id = 1;
ROLLBACK;
-- A subtransaction that rolls back releases its row lock on the lease, and with it the fence it
-- showed: the DELETE after ROLLBACK TO must be refused again.
BEGIN;
SAVEPOINT sp;
UPDATE s SET last_fence = 2 WHERE id = 1;
ROLLBACK TO SAVEPOINT sp;
DELETE FROM s WHERE id = 1;
ROLLBACK;
-- ... while one released by RELEASE SAVEPOINT (committed into its parent) still counts.
BEGIN;
SAVEPOINT sp;
SELECT fencelock.assert_fence('set-demo', 2);
RELEASE SAVEPOINT sp;
SAVEPOINT sp2;
SELECT 1/0;
ROLLBACK TO SAVEPOINT sp2;
DELETE FROM s WHERE id = 1;
COMMIT;
-- The fences shown end with the transaction.
DELETE FROM s;

-- A lease that was never granted.
CREATE TABLE never (id int PRIMARY KEY, last_fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON never FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=no-such-lease');
INSERT INTO never VALUES (1, 1);

-- 'allow_unfenced': an UPDATE that leaves the fence column alone passes once the transaction has
-- shown the lease's fence (like a DELETE); one that assigns it is checked.
CREATE TABLE docs (id int PRIMARY KEY, body text, last_fence int);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON docs FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo', 'allow_unfenced');
INSERT INTO docs VALUES (1, 'v1', 2);
UPDATE docs SET body = 'unshown' WHERE id = 1;
BEGIN;
SELECT fencelock.assert_fence('set-demo', 2);
UPDATE docs SET body = 'admin fix' WHERE id = 1;
COMMIT;
UPDATE docs SET body = 'stale', last_fence = 1 WHERE id = 1;
SELECT * FROM docs;

-- 'lease_column': each row names its lease (one lease per tenant).
SELECT fencelock.acquire('tenant-x', 'wx', '30s') AS fence_x, fencelock.acquire('tenant-y', 'wy', '30s') AS fence_y;
CREATE TABLE accounts (id int PRIMARY KEY, tenant text, balance int, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON accounts FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease_column=tenant');
INSERT INTO accounts VALUES (1, 'tenant-x', 10, 1), (2, 'tenant-y', 20, 1);
INSERT INTO accounts VALUES (3, 'tenant-x', 30, 2);
INSERT INTO accounts VALUES (3, NULL, 30, 1);
-- A new grant of tenant-y leaves tenant-x's writers alone.
SELECT fencelock.release('tenant-y', 'wy'), fencelock.acquire('tenant-y', 'wy2', '30s') AS fence_y;
UPDATE accounts SET balance = 11, fence = 1 WHERE id = 1;
UPDATE accounts SET balance = 21, fence = 1 WHERE id = 2;
UPDATE accounts SET balance = 21, fence = 2 WHERE id = 2;
-- Moving a row to another lease is a write under the new one and a DELETE from the old one.
UPDATE accounts SET tenant = 'tenant-y', fence = 2 WHERE id = 1;
BEGIN;
SELECT fencelock.assert_fence('tenant-x', 1);
UPDATE accounts SET tenant = 'tenant-y', fence = 2 WHERE id = 1;
COMMIT;
SELECT * FROM accounts ORDER BY id;

-- TRUNCATE: with lease=, a BEFORE TRUNCATE statement trigger applies the DELETE rule.
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON s FOR EACH STATEMENT
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
INSERT INTO s VALUES (1, '{}', 2);
TRUNCATE s;
BEGIN;
SELECT fencelock.assert_fence('set-demo', 2);
TRUNCATE s;
COMMIT;
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON accounts FOR EACH STATEMENT
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease_column=tenant');
TRUNCATE accounts;

-- Only a member of the role that took the lease may write under it (it row-locks the lease,
-- as assert_fence does).
CREATE ROLE regress_lb_other;
GRANT ALL ON s TO regress_lb_other;
SET ROLE regress_lb_other;
INSERT INTO s VALUES (5, '{}', 2);
-- A stale fence is refused as stale, whoever writes it.
INSERT INTO s VALUES (5, '{}', 1);
RESET ROLE;
REVOKE ALL ON s FROM regress_lb_other;
DROP ROLE regress_lb_other;

-- MERGE (issue 10, finding 8): PostgreSQL reports to the trigger the union of the columns of all
-- UPDATE actions.  An action that leaves the fence column alone must not pass as fenced.
CREATE TABLE mg (id int PRIMARY KEY, v text, f bigint);
CREATE TRIGGER fence BEFORE UPDATE ON mg FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('f');
INSERT INTO mg VALUES (1, 'start', 5);
MERGE INTO mg USING (VALUES (1)) s(id) ON mg.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'merged';
-- An action that changes the fence in such a MERGE is checked as usual ...
MERGE INTO mg USING (VALUES (1)) s(id) ON mg.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET v = 'x' WHEN MATCHED THEN UPDATE SET v = 'merged', f = 4;
MERGE INTO mg USING (VALUES (1)) s(id) ON mg.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET v = 'x' WHEN MATCHED THEN UPDATE SET v = 'merged', f = 6;
-- ... and a MERGE whose every UPDATE action assigns the fence may keep it.
MERGE INTO mg USING (VALUES (1)) s(id) ON mg.id = s.id
    WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'same', f = 6;
-- The same MERGE run by a function (through SPI) is caught too.
CREATE FUNCTION merge_unfenced() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    MERGE INTO mg USING (VALUES (1)) s(id) ON mg.id = s.id
        WHEN MATCHED AND false THEN UPDATE SET f = 0 WHEN MATCHED THEN UPDATE SET v = 'spi';
END $$;
SELECT merge_unfenced();
SELECT * FROM mg;
-- In lease-bound mode MERGE's INSERT, UPDATE and DELETE actions follow the rules above.
MERGE INTO s USING (VALUES (7, 2), (8, 1)) src(id, fence) ON s.id = src.id
    WHEN NOT MATCHED THEN INSERT VALUES (src.id, '{}', src.fence);
MERGE INTO s USING (VALUES (7, 2)) src(id, fence) ON s.id = src.id
    WHEN NOT MATCHED THEN INSERT VALUES (src.id, '{}', src.fence);
MERGE INTO s USING (VALUES (7)) src(id) ON s.id = src.id
    WHEN MATCHED AND false THEN UPDATE SET last_fence = 2 WHEN MATCHED THEN UPDATE SET v = '{m}';
MERGE INTO s USING (VALUES (7)) src(id) ON s.id = src.id WHEN MATCHED THEN DELETE;
BEGIN;
MERGE INTO s USING (VALUES (7)) src(id) ON s.id = src.id
    WHEN MATCHED AND s.v = '{}' THEN UPDATE SET v = '{m}', last_fence = 2
    WHEN MATCHED THEN DELETE;
MERGE INTO s USING (VALUES (7)) src(id) ON s.id = src.id WHEN MATCHED THEN DELETE;
COMMIT;
SELECT * FROM s ORDER BY id;

-- Partitions get the parent's row trigger as a clone: writes through the parent and straight to
-- a partition are checked alike.
CREATE TABLE parts (id int, last_fence bigint) PARTITION BY RANGE (id);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (100);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON parts FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
CREATE TABLE parts_2 PARTITION OF parts FOR VALUES FROM (100) TO (200);
INSERT INTO parts VALUES (1, 2), (101, 2);
INSERT INTO parts_2 VALUES (102, 1);
UPDATE parts SET last_fence = 1 WHERE id = 101;
UPDATE parts_1 SET last_fence = 1;
DELETE FROM parts_2;
-- Per-row mode likewise.
CREATE TABLE rparts (id int, last_fence bigint) PARTITION BY LIST (id);
CREATE TRIGGER fence BEFORE UPDATE ON rparts FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
CREATE TABLE rparts_1 PARTITION OF rparts FOR VALUES IN (1);
INSERT INTO rparts VALUES (1, 5);
UPDATE rparts SET last_fence = 4;
UPDATE rparts_1 SET last_fence = 4;

-- Inheritance children do not fire their parent's row triggers: a child without the parent's
-- fence trigger is refused (fencelock_inheritance_guard), however it would come about.
CREATE TABLE ip (id int, last_fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON ip FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
CREATE TABLE ic () INHERITS (ip);
CREATE TABLE ic (id int, last_fence bigint);
ALTER TABLE ic INHERIT ip;
-- With the same trigger first, the child may join; its trigger may not be dropped then.
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON ic FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
ALTER TABLE ic INHERIT ip;
DROP TRIGGER fence ON ic;
INSERT INTO ic VALUES (1, 2);
UPDATE ip SET last_fence = 1;
-- A trigger added to a parent whose children lack it is refused too (issue 20); with
-- check_function_bodies off, as in a restore (which may add the parent's trigger first), it warns.
CREATE TABLE jp (id int, last_fence bigint);
CREATE TABLE jc () INHERITS (jp);
CREATE TRIGGER fence BEFORE UPDATE ON jp FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
SET check_function_bodies = off;
CREATE TRIGGER fence BEFORE UPDATE ON jp FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
RESET check_function_bodies;
CREATE TRIGGER fence BEFORE UPDATE ON jc FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();

-- Bad arguments are refused at first use, with SQLSTATE 22023 for contradictions.
\set VERBOSITY default
CREATE TABLE misuse (id int PRIMARY KEY, last_fence bigint, tenant text, n int);
INSERT INTO misuse VALUES (1, 2, 'set-demo', 0);
CREATE FUNCTION try_trigger(args text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text;
BEGIN
    EXECUTE 'CREATE TRIGGER t BEFORE INSERT OR UPDATE ON misuse FOR EACH ROW '
            'EXECUTE FUNCTION fencelock.fence_trigger(' || args || ')';
    BEGIN
        UPDATE misuse SET last_fence = 2;
        st := 'ok';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
        st := st || ': ' || msg || coalesce(' / ' || nullif(det, ''), '');
    END;
    EXECUTE 'DROP TRIGGER t ON misuse';
    RETURN st;
END $$;
SELECT left(args, 60) AS args, try_trigger(args) FROM (VALUES
    ($$'last_fence', 'lease=set-demo'$$),
    ($$'last_fence', 'lease_column=tenant'$$),
    ($$'last_fence', 'lease=set-demo', 'strict'$$),
    ($$'last_fence', 'lease_column=tenant', 'strict'$$),
    ($$'last_fence', 'lease=set-demo', 'lease=other'$$),
    ($$'last_fence', 'lease=set-demo', 'lease_column=tenant'$$),
    ($$'last_fence', 'lease='$$),
    ($$'last_fence', 'lease_column='$$),
    ($$'last_fence', 'lease=$$ || repeat('x', 1025) || $$'$$),
    ($$'last_fence', 'lease_column=nope'$$),
    ($$'last_fence', 'lease_column=n'$$),
    ($$'lease=set-demo'$$),
    ($$'last_fence', 'Lease=set-demo'$$)
) AS t(args);
-- Lease-bound mode fires BEFORE ... FOR EACH ROW (or BEFORE TRUNCATE FOR EACH STATEMENT).
CREATE TRIGGER t_after AFTER UPDATE ON misuse FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
UPDATE misuse SET last_fence = 2;
DROP TRIGGER t_after ON misuse;
CREATE TRIGGER t_stmt BEFORE UPDATE ON misuse FOR EACH STATEMENT
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo');
UPDATE misuse SET last_fence = 2;
DROP TRIGGER t_stmt ON misuse;
-- Per-row mode still fires BEFORE UPDATE only.
CREATE TRIGGER t_ins BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
INSERT INTO misuse VALUES (2, 1, 'b', 1);
DROP TRIGGER t_ins ON misuse;

DROP TABLE s_row, s, never, docs, accounts, mg, parts, rparts, ip, ic, jp, jc, misuse;
DROP FUNCTION merge_unfenced(), try_trigger(text);
SELECT fencelock.release('set-demo', 'B'), fencelock.release('tenant-x', 'wx'), fencelock.release('tenant-y', 'wy2');
