-- The update to 0.4.0 replaces acquire twice (issue 24: one function for every form; issue 27:
-- with value): the privileges granted on 0.3.0's acquire functions carry over to the final one,
-- and the lease data with its values' table is there afterwards.  It replaces the stats view and
-- its function too (issue 27: two columns before stats_reset): their privileges carry over, and
-- a view of the user's own on stats makes the update refuse (2BP01, naming it), changing nothing.
-- The inheritance guard's event trigger is made anew: a disabled guard stays disabled.
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
REVOKE SELECT ON fencelock.stats FROM PUBLIC;
GRANT SELECT ON fencelock.stats TO fl_carry_app;
REVOKE EXECUTE ON FUNCTION fencelock.read_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencelock.read_stats() TO fl_carry_app;
ALTER EVENT TRIGGER fencelock_inheritance_guard DISABLE;
CREATE VIEW public.my_grants AS SELECT grants FROM fencelock.stats;
\set VERBOSITY default
\set SHOW_CONTEXT never
ALTER EXTENSION fencelock UPDATE;
\set VERBOSITY terse
\set SHOW_CONTEXT errors
SELECT extversion FROM pg_extension WHERE extname = 'fencelock';
DROP VIEW public.my_grants;
ALTER EXTENSION fencelock UPDATE;
SELECT has_table_privilege('public', 'fencelock.stats', 'SELECT') AS public_reads_stats,
       has_table_privilege('fl_carry_app', 'fencelock.stats', 'SELECT') AS app_reads_stats,
       has_function_privilege('public', 'fencelock.read_stats()', 'EXECUTE') AS public_reads_counts,
       has_function_privilege('fl_carry_app', 'fencelock.read_stats()', 'EXECUTE') AS app_reads_counts;
SELECT evtname, evtenabled FROM pg_event_trigger WHERE evtname LIKE 'fencelock%' ORDER BY 1;
SET ROLE fl_carry_app;
SELECT shared_grants >= 0 AS app_sees_new_columns FROM fencelock.stats;
RESET ROLE;
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
