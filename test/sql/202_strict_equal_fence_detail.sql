-- Issue 16: with 'strict', a write that carries the row's own fence is refused (FL001) with a
-- detail that says so.  It used to say "a newer lease holder has written this row", which is
-- false for an equal fence: this same fence wrote it, and its holder may still hold the lease.
-- An older fence keeps that detail, which is true there.
\set VERBOSITY default
CREATE TABLE strict_rows (id int PRIMARY KEY, v text, last_fence bigint);
CREATE TRIGGER fence BEFORE UPDATE ON strict_rows FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'strict');
INSERT INTO strict_rows VALUES (1, 'a', 5);
-- The same fence again.
UPDATE strict_rows SET v = 'b', last_fence = 5 WHERE id = 1;
-- An older fence.
UPDATE strict_rows SET v = 'c', last_fence = 4 WHERE id = 1;
-- A newer one is accepted.
UPDATE strict_rows SET v = 'd', last_fence = 6 WHERE id = 1;
SELECT * FROM strict_rows;
DROP TABLE strict_rows;
