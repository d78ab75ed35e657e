-- Issue 16: every SQL function checks its arguments with the same code (src/base/args.c), so one
-- fault gets one SQLSTATE and one wording whichever function and argument it is: text that is
-- null, empty or too long (also as an element of an array), durations that are negative or out
-- of range, counts that are not positive.  A duration is judged as a whole ('1 day -1 hour' is
-- 23 hours), not field by field.  Nothing here is written.
\set VERBOSITY default
CREATE TABLE args_jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                        lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                        fence bigint NOT NULL DEFAULT 0, run_after timestamptz,
                        finished_at timestamptz);
SELECT fencelock.enable_tasks('args_jobs');

-- Text: null, empty, longer than the limit; an argument, then an element of an array.
SELECT fencelock.acquire(NULL, 'o', '1 minute');
SELECT fencelock.acquire('', 'o', '1 minute');
SELECT fencelock.acquire(repeat('r', 1025), 'o', '1 minute');
SELECT fencelock.acquire('r', repeat('o', 257), '1 minute');
SELECT * FROM fencelock.claim(NULL::args_jobs, repeat('w', 257), '1 minute');
SELECT fencelock.acquire_all(ARRAY['a', NULL], 'o');
SELECT fencelock.acquire_all(ARRAY['a', ''], 'o');
SELECT fencelock.acquire_all(ARRAY['a', repeat('r', 1025)], 'o');

-- Durations: negative, then out of range.
SELECT fencelock.acquire('r', 'o', '1 minute', '-1 s');
SELECT * FROM fencelock.claim(NULL::args_jobs, 'w', '1 minute', 1, wait => '-1 s');
SELECT fencelock.purge('-1 s');
SELECT fencelock.purge_tasks('args_jobs', '-1 s');
SELECT fencelock.fail('args_jobs', 1, 1, NULL, '-1 s');
SELECT fencelock.enable_tasks('args_jobs', backoff_base => '-1 s');
SELECT fencelock.acquire('r', 'o', '1 minute', '300000 years');
SELECT * FROM fencelock.claim(NULL::args_jobs, 'w', '1 minute', 1, wait => '300000 years');
SELECT fencelock.purge('300000 years');
SELECT fencelock.fail('args_jobs', 1, 1, NULL, '300000 years');
-- Judged as a whole: '1 day -1 hour' is 23 hours, a valid idle time and backoff (there is no
-- row 1: fail returns NULL); '1 day -25 hours' is an hour less than nothing.
SELECT fencelock.purge('1 day -1 hour') AS purged;
SELECT fencelock.fail('args_jobs', 1, 1, NULL, '1 day -1 hour') IS NULL AS no_such_row;
SELECT fencelock.purge('1 day -25 hours');

-- Counts.
SELECT * FROM fencelock.claim(NULL::args_jobs, 'w', '1 minute', 0);
SELECT fencelock.purge_tasks('args_jobs', '1 day', batch_size => 0);

-- Arrays of more than one dimension: 22023 whichever function (complete_all's was 2202E).
\set VERBOSITY sqlstate
SELECT fencelock.key(VARIADIC '{{a,b},{c,d}}'::text[]);
SELECT fencelock.acquire_all('{{a,b},{c,d}}'::text[], 'o');
SELECT fencelock.complete_all('args_jobs', ARRAY[[1]], ARRAY[[1]]);
SELECT fencelock.complete_all('args_jobs', ARRAY[1], ARRAY[[1]]);
\set VERBOSITY default

SELECT count(*) AS leases FROM fencelock.lease WHERE resource IN ('r', 'a');
DROP TABLE args_jobs;
