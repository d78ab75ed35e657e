-- MERGE (PostgreSQL 15+) updates rows through the same BEFORE UPDATE row trigger as UPDATE:
-- the fence trigger refuses a stale fence (FL001) and an action that does not assign the fence
-- column (FL002), and the MERGE's INSERT path is not fenced (the trigger is BEFORE UPDATE).
\set VERBOSITY terse
CREATE TABLE merge_orders (id int PRIMARY KEY, status text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON merge_orders FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
INSERT INTO merge_orders VALUES (1, 'open', 10), (2, 'open', 10);
CREATE TABLE merge_in (id int, status text, fence bigint);
INSERT INTO merge_in VALUES (1, 'paid', 11), (3, 'new', 11);

-- A newer fence updates the matched row; the unmatched row is inserted.
MERGE INTO merge_orders o USING merge_in i ON o.id = i.id
 WHEN MATCHED THEN UPDATE SET status = i.status, last_fence = i.fence
 WHEN NOT MATCHED THEN INSERT VALUES (i.id, i.status, i.fence);
SELECT * FROM merge_orders ORDER BY id;

-- A stale fence is refused and the whole MERGE rolls back (nothing inserted either).
UPDATE merge_in SET fence = 9, id = CASE id WHEN 3 THEN 4 ELSE id END;
MERGE INTO merge_orders o USING merge_in i ON o.id = i.id
 WHEN MATCHED THEN UPDATE SET status = 'stale', last_fence = i.fence
 WHEN NOT MATCHED THEN INSERT VALUES (i.id, i.status, i.fence);
-- An action that does not assign the fence column is refused.
MERGE INTO merge_orders o USING merge_in i ON o.id = i.id
 WHEN MATCHED THEN UPDATE SET status = 'unfenced';
SELECT * FROM merge_orders ORDER BY id;

-- DELETE and DO NOTHING actions are not fenced.
MERGE INTO merge_orders o USING (VALUES (2)) AS d(id) ON o.id = d.id
 WHEN MATCHED THEN DELETE;
MERGE INTO merge_orders o USING (VALUES (1)) AS d(id) ON o.id = d.id
 WHEN MATCHED THEN DO NOTHING;
SELECT * FROM merge_orders ORDER BY id;
DROP TABLE merge_orders, merge_in;
