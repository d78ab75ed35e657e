-- PostgreSQL 17 added RETURNING (with merge_action()) and WITH to MERGE, and the action
-- WHEN NOT MATCHED BY SOURCE: each is a new way to update a fenced row, and each goes through the
-- fence trigger.  (Left out on 15: see fl_on_major in the Makefile.)
\set VERBOSITY terse
CREATE TABLE merge_ret (id int PRIMARY KEY, status text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON merge_ret FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO merge_ret VALUES (1, 'open', 10), (2, 'open', 10);

-- RETURNING lists what the fence let through, and which action did it.
MERGE INTO merge_ret o USING (VALUES (1, 11), (3, 11)) AS i(id, fence) ON o.id = i.id
 WHEN MATCHED THEN UPDATE SET status = 'paid', last_fence = i.fence
 WHEN NOT MATCHED THEN INSERT VALUES (i.id, 'new', i.fence)
 RETURNING merge_action() AS action, o.*;
-- A stale fence: the MERGE fails and returns no row.
MERGE INTO merge_ret o USING (VALUES (1, 9)) AS i(id, fence) ON o.id = i.id
 WHEN MATCHED THEN UPDATE SET status = 'stale', last_fence = i.fence
 RETURNING merge_action() AS action, o.*;
-- Inside WITH the rejection aborts the whole statement too.
WITH m AS (
    MERGE INTO merge_ret o USING (VALUES (1, 9)) AS i(id, fence) ON o.id = i.id
     WHEN MATCHED THEN UPDATE SET status = 'stale', last_fence = i.fence
     RETURNING o.id)
SELECT count(*) FROM m;

-- WHEN NOT MATCHED BY SOURCE updates the rows the source does not name: without the fence
-- column it is refused, with a newer fence it passes.
MERGE INTO merge_ret o USING (VALUES (1)) AS i(id) ON o.id = i.id
 WHEN NOT MATCHED BY SOURCE THEN UPDATE SET status = 'orphan';
MERGE INTO merge_ret o USING (VALUES (1)) AS i(id) ON o.id = i.id
 WHEN NOT MATCHED BY SOURCE THEN UPDATE SET status = 'orphan', last_fence = 12
 RETURNING merge_action() AS action, o.*;
SELECT * FROM merge_ret ORDER BY id;
DROP TABLE merge_ret;
