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
-- == acquire(resource, owner, ttl, session => true) without wait (issue 24) ==
-- One function for every form of acquire: wait defaults to '0' (one try), session to false; an
-- explicit NULL for either is still an error (22004), as before.  No
-- overload could add the form: one with a boolean fourth parameter makes
-- acquire(r, o, ttl, '5 seconds') ambiguous, and defaults on the waiting one make
-- acquire(r, o, ttl) ambiguous.  The three overloads it replaces hand it their privileges (those
-- of the one-try form; the update refuses to guess when the three differ).
DO $fl$
DECLARE
    acl pg_catalog.aclitem[];
    a record;
BEGIN
    IF (SELECT pg_catalog.count(DISTINCT COALESCE(p.proacl::pg_catalog.text, ''))
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'fencelock'::pg_catalog.regnamespace
           AND p.proname OPERATOR(pg_catalog.=) 'acquire') OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'the three fencelock.acquire functions have different privileges'
            USING ERRCODE = '55000',
                  HINT = 'Grant or revoke EXECUTE on all three alike, then update: 0.4.0 has one acquire function.';
    END IF;
    SELECT p.proacl INTO acl FROM pg_catalog.pg_proc p
     WHERE p.oid OPERATOR(pg_catalog.=)
           'fencelock.acquire(pg_catalog.text, pg_catalog.text, pg_catalog.interval)'::pg_catalog.regprocedure;
    DROP FUNCTION fencelock.acquire(pg_catalog.text, pg_catalog.text, pg_catalog.interval);
    DROP FUNCTION fencelock.acquire(pg_catalog.text, pg_catalog.text, pg_catalog.interval,
                                    pg_catalog.interval);
    DROP FUNCTION fencelock.acquire(pg_catalog.text, pg_catalog.text, pg_catalog.interval,
                                    pg_catalog.interval, pg_catalog.bool);
    CREATE FUNCTION fencelock.acquire(resource pg_catalog.text, owner pg_catalog.text,
                                      ttl pg_catalog.interval DEFAULT fencelock.default_ttl(),
                                      wait pg_catalog.interval DEFAULT '0',
                                      session pg_catalog.bool DEFAULT false)
    RETURNS pg_catalog.int8
    AS 'MODULE_PATHNAME', 'fencelock_acquire_0_4'
    LANGUAGE C VOLATILE;
    IF acl IS NOT NULL THEN
        REVOKE ALL ON FUNCTION fencelock.acquire(pg_catalog.text, pg_catalog.text,
            pg_catalog.interval, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
        FOR a IN SELECT e.grantee, e.is_grantable FROM pg_catalog.aclexplode(acl) e
                  WHERE e.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE' LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION fencelock.acquire(pg_catalog.text, '
                'pg_catalog.text, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool) TO %s%s',
                CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END IF;
END
$fl$;
