-- Issue 13: complete_all(tbl, ids, fences) completes several claimed rows in one statement, each
-- under exactly its own fence, for a worker that claimed max_rows => 10.  Returns how many rows
-- are done under their fence (a retry after a lost reply counts them again); a row with another
-- fence raises FL001 and nothing is completed; rows missing or not running are not counted.
\set VERBOSITY terse
CREATE TABLE ca (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, finished_at timestamptz);
SELECT fencelock.enable_tasks('ca');
INSERT INTO ca (id) SELECT g FROM generate_series(1, 12) AS g;
SELECT array_agg(id ORDER BY id) AS ids, array_agg(fence ORDER BY id) AS fences
  FROM fencelock.claim(NULL::ca, 'w', '1 minute', 10) \gset
SELECT :'ids' AS ids, :'fences' AS fences;
-- All ten, in one statement (int[] ids convert to the bigint key).
SELECT fencelock.complete_all('ca', :'ids'::int[], :'fences'::bigint[]) AS completed;
SELECT state, count(*), count(finished_at) AS finished FROM ca GROUP BY state ORDER BY state;
-- A retry after a lost reply: the same answer, nothing changes.
SELECT fencelock.complete_all('ca', :'ids'::bigint[], :'fences'::bigint[]) AS retried;
-- A wrong fence among right ones: FL001, and the right ones are not completed either.
SELECT id, fence FROM fencelock.claim(NULL::ca, 'w', '1 minute', 2) ORDER BY id;
SELECT fencelock.complete_all('ca', ARRAY[11, 12], ARRAY[1, 0]);
SELECT id, state FROM ca WHERE id > 10 ORDER BY id;
-- Unknown ids and rows not running are not counted.
SELECT fencelock.complete_all('ca', ARRAY[11, 99], ARRAY[1, 1]) AS one_of_two;
SELECT fencelock.complete_all('ca', '{}'::bigint[], '{}'::bigint[]) AS none;
-- Bad arguments.
SELECT fencelock.complete_all('ca', ARRAY[12], ARRAY[1, 2]);
SELECT fencelock.complete_all('ca', ARRAY[12, NULL], ARRAY[1, 2]);
SELECT fencelock.complete_all('ca', ARRAY[12], NULL::bigint[]);
SELECT fencelock.complete_all('ca', ARRAY[[12]], ARRAY[[1]]);
SELECT fencelock.complete_all('ca', ARRAY['x'], ARRAY[1]);
SELECT fencelock.complete_all('ca', ARRAY[true], ARRAY[1]);
SELECT fencelock.complete_all('pg_class', ARRAY[1], ARRAY[1]);
SELECT fencelock.complete('ca', 12, 1) AS single_complete_still_works;
DROP TABLE ca;
