-- Issue 13: fail without an explicit backoff applies the table's backoff policy, set by
-- enable_tasks (backoff_base, backoff_max, backoff_jitter; defaults 10 seconds, 1 hour, equal):
-- run_after = now + a delay within [cap * (1 - share), cap], cap = min(max, base * 2^(attempt - 1)),
-- share 1 (full), 0.5 (equal) or 0 (none).  A worker never computes it.
\set VERBOSITY terse
CREATE TABLE bo (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, run_after timestamptz, last_error text);
SELECT fencelock.enable_tasks('bo');
SELECT backoff_base, backoff_max, backoff_jitter FROM fencelock.task_tables WHERE tbl = 'bo'::regclass;
INSERT INTO bo (id) SELECT g FROM generate_series(1, 40) AS g;

-- The delay of every row failed on its claimed attempt, in seconds from the fail.
CREATE FUNCTION bo_delays(att int) RETURNS TABLE (lo float8, hi float8) LANGUAGE plpgsql AS $$
DECLARE
    r record;
    d float8[] := '{}';
BEGIN
    UPDATE bo SET state = 'ready', run_after = NULL, fence = fence;
    FOR r IN SELECT id, fence FROM fencelock.claim(NULL::bo, 'w', '1 minute', 40) LOOP
        UPDATE bo SET attempt = att, fence = r.fence WHERE id = r.id;
        PERFORM fencelock.fail('bo', r.id, r.fence, 'x');
        d := d || (SELECT extract(epoch FROM b.run_after - clock_timestamp())::float8 FROM bo AS b WHERE b.id = r.id);
    END LOOP;
    RETURN QUERY SELECT min(x), max(x) FROM unnest(d) AS x;
END $$;

-- Equal jitter, attempt 1: the cap is the base (10 s), the delay between 5 and 10 s.
SELECT lo >= 4.8 AND hi <= 10.1 AS within_equal_attempt_1, hi - lo > 1 AS spread FROM bo_delays(1);
-- Attempt 4: 10 s * 2^3 = 80 s, the delay between 40 and 80 s.
SELECT lo >= 39.8 AND hi <= 80.1 AS within_equal_attempt_4 FROM bo_delays(4);
-- Attempt 30: capped at backoff_max (1 hour), the delay between 30 and 60 min.
SELECT lo >= 1799.8 AND hi <= 3600.1 AS capped FROM bo_delays(30);

-- Full jitter: anywhere from 0 to the cap; none: exactly the cap.
SELECT fencelock.enable_tasks('bo', run_after_col => 'run_after', backoff_base => '1 minute',
                              backoff_max => '2 minutes', backoff_jitter => 'full');
SELECT lo >= -0.1 AND hi <= 60.1 AND lo < 30 AS within_full_attempt_1 FROM bo_delays(1);
SELECT fencelock.enable_tasks('bo', backoff_base => '1 minute', backoff_max => '2 minutes',
                              backoff_jitter => 'none');
SELECT lo >= 119.8 AND hi <= 120.1 AS exactly_the_cap FROM bo_delays(3);

-- An explicit backoff wins over the policy; backoff_base '0' makes a failed row ready at once.
UPDATE bo SET state = 'ready', run_after = NULL, fence = fence;
SELECT id, fence FROM fencelock.claim(NULL::bo, 'w', '1 minute') \gset
SELECT fencelock.fail('bo', :id, :fence, backoff => '5 minutes') AS explicit;
SELECT run_after BETWEEN now() + interval '299 s' AND clock_timestamp() + interval '300 s' AS five_minutes
  FROM bo WHERE id = :id;
SELECT fencelock.enable_tasks('bo', backoff_base => '0');
SELECT id, fence FROM fencelock.claim(NULL::bo, 'w', '1 minute') \gset
SELECT fencelock.fail('bo', :id, :fence) AS at_once;
SELECT run_after <= clock_timestamp() AS ready_now FROM bo WHERE id = :id;

-- Without a run_after column, fail without a backoff leaves the row ready at once, as before.
CREATE TABLE bo2 (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                  lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                  fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('bo2');
INSERT INTO bo2 (id) VALUES (1);
SELECT id, fence FROM fencelock.claim(NULL::bo2, 'w', '1 minute') \gset
SELECT fencelock.fail('bo2', :id, :fence) AS no_run_after;
SELECT count(*) AS claimable_again FROM fencelock.claim(NULL::bo2, 'w', '1 minute');

-- Bad policies: each refused (22023, 22004), nothing changed.
SELECT fencelock.enable_tasks('bo', backoff_base => '-1 s');
SELECT fencelock.enable_tasks('bo', backoff_base => '1 minute', backoff_max => '30 s');
SELECT fencelock.enable_tasks('bo', backoff_max => '1000 years');
SELECT fencelock.enable_tasks('bo', backoff_jitter => 'half');
SELECT fencelock.enable_tasks('bo', backoff_jitter => NULL);
SELECT fencelock.enable_tasks('bo', backoff_base => NULL);
SELECT backoff_base, backoff_max, backoff_jitter FROM fencelock.task_tables WHERE tbl = 'bo'::regclass;

DROP TABLE bo, bo2;
DROP FUNCTION bo_delays(int);
