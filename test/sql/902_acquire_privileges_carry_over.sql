-- The update to 0.4.0 replaces acquire twice (issue 24: one function for every form; issue 27:
-- with value): the privileges granted on 0.3.0's acquire functions carry over to the final one,
-- and the lease data with its values' table is there afterwards.
\set VERBOSITY terse
DROP EXTENSION fencelock CASCADE;
CREATE EXTENSION fencelock VERSION '0.3.0';
CREATE ROLE fl_carry_app;
REVOKE EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
    fencelock.acquire(text, text, interval, interval),
    fencelock.acquire(text, text, interval, interval, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencelock.acquire(text, text, interval),
    fencelock.acquire(text, text, interval, interval),
    fencelock.acquire(text, text, interval, interval, boolean) TO fl_carry_app;
ALTER EXTENSION fencelock UPDATE;
SELECT p.oid::regprocedure AS acquire,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_executes,
       has_function_privilege('fl_carry_app', p.oid, 'EXECUTE') AS app_executes
  FROM pg_proc p WHERE p.pronamespace = 'fencelock'::regnamespace AND p.proname = 'acquire';
SET ROLE fl_carry_app;
SELECT fencelock.acquire('carry:r', 'o', '30 seconds', value => '"app"') IS NOT NULL AS app_acquires;
SELECT value FROM fencelock.leases WHERE resource = 'carry:r';
RESET ROLE;
SELECT fencelock.release('carry:r', 'o') AS released;
-- Back to a fresh install for what follows.
DROP EXTENSION fencelock CASCADE;
CREATE EXTENSION fencelock;
DROP ROLE fl_carry_app;
