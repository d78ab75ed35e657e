-- fencelock.fence_trigger(): the resource refuses stale, missing and NULL fences.
\set VERBOSITY terse
CREATE TABLE orders (id text PRIMARY KEY, status text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO orders VALUES ('o-1', 'open', NULL), ('o-2', 'open', 5);

-- A row never fenced accepts its first fence.
UPDATE orders SET status = 'seen', last_fence = 3 WHERE id = 'o-1';
-- Equal and newer fences pass; an older one is rejected with FL001.
UPDATE orders SET status = 'same', last_fence = 3 WHERE id = 'o-1';
UPDATE orders SET status = 'newer', last_fence = 4 WHERE id = 'o-1';
\set VERBOSITY default
UPDATE orders SET status = 'stale', last_fence = 2 WHERE id = 'o-1';
-- A NULL fence and an UPDATE that does not assign the column are rejected with FL002.
UPDATE orders SET status = 'null', last_fence = NULL WHERE id = 'o-1';
UPDATE orders SET status = 'unfenced' WHERE id = 'o-1';
\set VERBOSITY terse
-- A multi-row UPDATE is all or nothing: one stale row rejects the statement.
UPDATE orders SET status = 'bulk', last_fence = 4;
SELECT id, status, last_fence FROM orders ORDER BY id;

-- The error carries its SQLSTATE and the table and column in its fields.
DO $$
DECLARE st text; tab text; col text; msg text;
BEGIN
    UPDATE orders SET last_fence = 1 WHERE id = 'o-2';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, tab = TABLE_NAME, col = COLUMN_NAME,
                            msg = MESSAGE_TEXT;
    RAISE NOTICE 'sqlstate %, table %, column %: %', st, tab, col, msg;
END $$;

-- 'strict': only a strictly newer fence may write.
CREATE TABLE jobs (id int PRIMARY KEY, fence integer, note text);
CREATE TRIGGER fence BEFORE UPDATE ON jobs FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'strict');
INSERT INTO jobs VALUES (1, 7, '');
UPDATE jobs SET fence = 7, note = 'equal' WHERE id = 1;
UPDATE jobs SET fence = 8, note = 'newer' WHERE id = 1;
SELECT * FROM jobs;

-- 'allow_unfenced': an UPDATE that leaves the column alone passes; one that sets it is checked.
CREATE TABLE docs (id int PRIMARY KEY, last_fence smallint, body text);
CREATE TRIGGER fence BEFORE UPDATE ON docs FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'allow_unfenced');
INSERT INTO docs VALUES (1, 10, 'v1');
UPDATE docs SET body = 'admin fix' WHERE id = 1;
UPDATE docs SET body = 'stale', last_fence = 9 WHERE id = 1;
SELECT * FROM docs;

-- No argument: the column is last_fence.  Domains over integers are accepted.
CREATE DOMAIN fence_t AS bigint CHECK (VALUE > 0);
CREATE TABLE acct (id int PRIMARY KEY, last_fence fence_t, balance int);
CREATE TRIGGER fence BEFORE UPDATE ON acct FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
INSERT INTO acct VALUES (1, 100, 0);
UPDATE acct SET balance = 1, last_fence = 99 WHERE id = 1;
UPDATE acct SET balance = 2, last_fence = 101 WHERE id = 1;
SELECT * FROM acct;

-- The column is resolved once per trigger and re-resolved after ALTER TABLE.
ALTER TABLE acct RENAME COLUMN last_fence TO fence_renamed;
UPDATE acct SET balance = 3, fence_renamed = 102 WHERE id = 1;
ALTER TABLE acct RENAME COLUMN fence_renamed TO last_fence;
UPDATE acct SET balance = 3, last_fence = 102 WHERE id = 1;

-- Misuse is reported clearly, never as an internal error.
\set VERBOSITY default
CREATE TABLE misuse (id int PRIMARY KEY, last_fence bigint, label text, n numeric);
INSERT INTO misuse VALUES (1, 1, 'a', 1);
CREATE TRIGGER t_after AFTER UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
UPDATE misuse SET last_fence = 2;
DROP TRIGGER t_after ON misuse;
CREATE TRIGGER t_stmt BEFORE UPDATE ON misuse FOR EACH STATEMENT EXECUTE FUNCTION fencelock.fence_trigger();
UPDATE misuse SET last_fence = 2;
DROP TRIGGER t_stmt ON misuse;
CREATE TRIGGER t_ins BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
INSERT INTO misuse VALUES (2, 1, 'b', 1);
DROP TRIGGER t_ins ON misuse;
CREATE TRIGGER t_del BEFORE DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger();
DELETE FROM misuse;
DROP TRIGGER t_del ON misuse;
CREATE TRIGGER t_missing BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('nope');
UPDATE misuse SET label = 'x';
DROP TRIGGER t_missing ON misuse;
CREATE TRIGGER t_text BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('label');
UPDATE misuse SET label = 'x';
DROP TRIGGER t_text ON misuse;
CREATE TRIGGER t_numeric BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('n');
UPDATE misuse SET n = 2;
DROP TRIGGER t_numeric ON misuse;
CREATE TRIGGER t_sys BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('ctid');
UPDATE misuse SET label = 'x';
DROP TRIGGER t_sys ON misuse;
CREATE TRIGGER t_opt BEFORE UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lenient');
UPDATE misuse SET last_fence = 3;
DROP TRIGGER t_opt ON misuse;
SELECT fencelock.fence_trigger();
\set VERBOSITY terse
-- Nothing was changed by any of the rejected statements.
SELECT * FROM misuse;
DROP TABLE orders, jobs, docs, acct, misuse;
DROP DOMAIN fence_t;
