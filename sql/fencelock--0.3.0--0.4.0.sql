-- fencelock 0.3.0 -> 0.4.0: the second hardening round (issue 20).
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.4.0'" to load this file. \quit

-- == the inheritance guard checks the command's own tables (issue 20, defect 4) ==
-- First in this script: 0.3.0's guard checks every inheritance child of the database after each
-- CREATE TABLE or ALTER TABLE, so one child without its parent's fence trigger anywhere would make
-- the DDL below fail (and this update with it).
--
-- The guard (src/inhguard.c) now looks only at the tables a command created, attached, or gave
-- or took a trigger, refuses a fence trigger on a parent whose inheritance children lack it, and
-- only warns when check_function_bodies is off (as in a restore).  It sees CREATE FOREIGN TABLE,
-- CREATE SCHEMA's tables and triggers dropped by any command too: the event trigger is made anew
-- for its new tags (WHEN cannot be altered), under the same name, beside one on sql_drop.
CREATE OR REPLACE FUNCTION fencelock.inheritance_guard() RETURNS pg_catalog.event_trigger
AS 'MODULE_PATHNAME', 'fencelock_inheritance_guard'
LANGUAGE C SET search_path = pg_catalog, pg_temp;

DROP EVENT TRIGGER fencelock_inheritance_guard;
CREATE EVENT TRIGGER fencelock_inheritance_guard ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'CREATE SCHEMA', 'ALTER TABLE',
                 'ALTER FOREIGN TABLE', 'CREATE TRIGGER')
    EXECUTE FUNCTION fencelock.inheritance_guard();
CREATE EVENT TRIGGER fencelock_inheritance_guard_drop ON sql_drop
    EXECUTE FUNCTION fencelock.inheritance_guard();
-- == after restoring an older pg_dump: every fence from now on above a bound (issue 20) ==
CREATE FUNCTION fencelock.raise_fences(above pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_raise_fences'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.raise_fences(pg_catalog.int8) FROM PUBLIC;
-- == contention per resource (issue 26) ==
-- One row per resource of this database (src/resstats.c; with shared_preload_libraries, bounded
-- by fencelock.max_resources).  Readable by everyone, as stats is; owner tokens are never kept.
CREATE FUNCTION fencelock.read_resource_stats(OUT resource pg_catalog.text,
                                              OUT grants pg_catalog.int8,
                                              OUT takeovers pg_catalog.int8,
                                              OUT busy pg_catalog.int8,
                                              OUT waits pg_catalog.int8,
                                              OUT wait_time_ms pg_catalog.float8,
                                              OUT max_wait_ms pg_catalog.float8,
                                              OUT wait_timeouts pg_catalog.int8,
                                              OUT waiters_refused pg_catalog.int8,
                                              OUT max_waiters pg_catalog.int4,
                                              OUT holds pg_catalog.int8,
                                              OUT hold_time_ms pg_catalog.float8,
                                              OUT max_hold_ms pg_catalog.float8,
                                              OUT releases_refused pg_catalog.int8,
                                              OUT stale_rejected pg_catalog.int8,
                                              OUT max_stale_ms pg_catalog.float8,
                                              OUT last_grant pg_catalog.timestamptz,
                                              OUT held pg_catalog.bool)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fencelock_resource_stats'
LANGUAGE C VOLATILE;

CREATE VIEW fencelock.resource_stats AS SELECT * FROM fencelock.read_resource_stats();

CREATE FUNCTION fencelock.read_resource_stats_info(OUT resources pg_catalog.int8,
                                                   OUT max_resources pg_catalog.int4,
                                                   OUT evicted pg_catalog.int8,
                                                   OUT stats_reset pg_catalog.timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'fencelock_resource_stats_info'
LANGUAGE C VOLATILE;

CREATE VIEW fencelock.resource_stats_info AS SELECT * FROM fencelock.read_resource_stats_info();

GRANT SELECT ON fencelock.resource_stats, fencelock.resource_stats_info TO PUBLIC;

CREATE FUNCTION fencelock.resource_stats_reset()
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'fencelock_resource_stats_reset'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.resource_stats_reset() FROM PUBLIC;
