-- Issue 10, finding 5: inheritance children of a task table were claimed through the parent but
-- not fenced (a BEFORE UPDATE trigger is not inherited by INHERITS children), so a stale UPDATE
-- through the parent moved a child row's fence back.  enable_tasks and claim (and the helpers)
-- now refuse a table with inheritance children, also one added after enable_tasks.  Partitions
-- do get the trigger: a partitioned task table keeps working, and claim refuses it when one of
-- its partitions has lost the trigger.
\set VERBOSITY terse
CREATE TABLE parent (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                     lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                     fence bigint NOT NULL DEFAULT 0);
CREATE TABLE child () INHERITS (parent);
\set VERBOSITY default
SELECT fencelock.enable_tasks('parent');
\set VERBOSITY terse
SELECT count(*) AS enabled FROM fencelock.task_tables WHERE tbl = 'parent'::regclass;
-- The child itself (no children of its own) may be a task table.
ALTER TABLE child ADD PRIMARY KEY (id);
SELECT fencelock.enable_tasks('child');
DROP TABLE child;

-- A child added after enable_tasks.  One without the fence trigger is refused outright by
-- fencelock's inheritance guard (an event trigger); one that has the trigger is still a child,
-- and claim and the helpers refuse the parent from then on.
SELECT fencelock.enable_tasks('parent');
INSERT INTO parent (id) VALUES (1);
SELECT id, fence FROM fencelock.claim(NULL::parent, 'w-1');
CREATE TABLE late_child () INHERITS (parent);
CREATE TABLE late_child (LIKE parent INCLUDING DEFAULTS);
CREATE TRIGGER fencelock_fence BEFORE UPDATE ON late_child FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence');
ALTER TABLE late_child INHERIT parent;
INSERT INTO late_child (id) VALUES (2);
SELECT id, fence FROM fencelock.claim(NULL::parent, 'w-1', max_rows => 5);
SELECT fencelock.complete('parent', 2, 1);
-- The child's row was not claimed.
SELECT id, state, fence FROM late_child;
-- Gone again: the parent is claimable again.
DROP TABLE late_child;
SELECT fencelock.complete('parent', 1, 1) AS completed;
-- A child attached with ALTER TABLE ... INHERIT but without the trigger: refused by the guard.
CREATE TABLE attached (LIKE parent);
ALTER TABLE attached INHERIT parent;
SELECT id FROM fencelock.claim(NULL::parent, 'w-1');
DROP TABLE attached;

-- == A partitioned task table: claims are fenced on the partitions ==
CREATE TABLE part (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                   lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                   fence bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE part_1 PARTITION OF part FOR VALUES FROM (0) TO (10);
CREATE TABLE part_2 PARTITION OF part FOR VALUES FROM (10) TO (20) PARTITION BY RANGE (id);
CREATE TABLE part_2a PARTITION OF part_2 FOR VALUES FROM (10) TO (20);
SELECT fencelock.enable_tasks('part');
INSERT INTO part (id) VALUES (1), (11);
SELECT id, lease_owner, fence FROM fencelock.claim(NULL::part, 'w-1', '100 ms', 5);
SELECT pg_sleep(0.15);
SELECT id, lease_owner, fence FROM fencelock.claim(NULL::part, 'w-2', '30 s', 5);
-- w-1's stale writes through the parent are refused on both partitions; w-2's are accepted.
UPDATE part SET state = 'done', fence = 1 WHERE id = 1;
UPDATE part SET state = 'done', fence = 1 WHERE id = 11;
SELECT fencelock.complete('part', 11, 1);
SELECT fencelock.complete('part', 11, 2) AS w2_complete;
-- A partition attached later gets the trigger too.
CREATE TABLE part_3 (LIKE part);
ALTER TABLE part ATTACH PARTITION part_3 FOR VALUES FROM (20) TO (30);
INSERT INTO part (id) VALUES (21);
SELECT id, fence FROM fencelock.claim(NULL::part, 'w-3', '30 s', 5);
UPDATE part SET state = 'done', fence = 0 WHERE id = 21;
-- A partition whose trigger is disabled would not fence its rows: claim refuses the table.
ALTER TABLE part_2a DISABLE TRIGGER fencelock_fence;
SELECT id FROM fencelock.claim(NULL::part, 'w-4');
SELECT fencelock.complete('part', 1, 2);
-- enable_tasks again repairs it.
SELECT fencelock.enable_tasks('part');
SELECT tgenabled FROM pg_trigger WHERE tgrelid = 'part_2a'::regclass;
SELECT fencelock.complete('part', 1, 2) AS completed;
DROP TABLE parent, part;
