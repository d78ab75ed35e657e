-- PostgreSQL 18 lets RETURNING name old and new: a writer can see in one statement the fence it
-- replaced, and a refused write still returns nothing.  (Left out on older majors.)
\set VERBOSITY terse
CREATE TABLE ret_old_new (id int PRIMARY KEY, status text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON ret_old_new FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO ret_old_new VALUES (1, 'open', 10);
UPDATE ret_old_new SET status = 'paid', last_fence = 11 WHERE id = 1
RETURNING old.last_fence AS fence_before, new.last_fence AS fence_after, new.status;
UPDATE ret_old_new SET status = 'stale', last_fence = 10 WHERE id = 1
RETURNING old.last_fence AS fence_before, new.last_fence AS fence_after;
MERGE INTO ret_old_new o USING (VALUES (1, 12)) AS i(id, fence) ON o.id = i.id
 WHEN MATCHED THEN UPDATE SET status = 'shipped', last_fence = i.fence
 RETURNING merge_action() AS action, old.last_fence AS fence_before, new.last_fence AS fence_after;
SELECT * FROM ret_old_new;
DROP TABLE ret_old_new;
