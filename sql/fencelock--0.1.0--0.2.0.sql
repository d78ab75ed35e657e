-- fencelock 0.1.0 -> 0.2.0: task-table claiming; waiting, several resources, statistics, history.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.2.0'" to load this file. \quit

-- == privileges of the objects this update creates (issue 35) ==
-- Each function, table and view this script creates ends with privileges as restrictive as those
-- of the object it extends of the version it updates, or, for the administrators' functions and
-- for what extends nothing, as a fresh install's: the rules are at the end of this script, applied
-- by update_carry_privileges below; both helpers are dropped there (the same two in every update
-- script since 0.1.0 -> 0.2.0).  The objects before the update, their privileges and owners:
CREATE TABLE fencelock.update_old_objects AS
SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass AS catalog, p.oid AS obj,
       pg_catalog.format('%s(%s)', p.proname, pg_catalog.oidvectortypes(p.proargtypes)) AS name,
       p.proacl AS acl, p.proowner AS owner
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'fencelock'::pg_catalog.regnamespace
UNION ALL
SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid, c.relname::pg_catalog.text, c.relacl,
       c.relowner
  FROM pg_catalog.pg_class c
 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'fencelock'::pg_catalog.regnamespace
   AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'p']::pg_catalog."char"[]);

-- Gives target (a function, or a table or view: catalog says which) the privileges of acl (an old
-- object's, of owner): revoked from PUBLIC unless acl grants them, granted to every role acl names
-- (but owner, whose place the target's own owner takes), WITH GRANT OPTION where acl has it.  The
-- grantor is the target's owner, whoever granted the original.  A function's NULL acl (the
-- default: PUBLIC executes) leaves the target as this script made it.
-- PostgreSQL records every grant an extension script makes as the object's initial privileges,
-- which pg_dump leaves out: the target keeps the initial privileges it had before (a fresh
-- install's), so a dump holds the carried ones as the database's own; from 17 on, the roles'
-- shared dependencies on the initial privileges ('i') are put back with them.
CREATE FUNCTION fencelock.update_carry_privileges(catalog pg_catalog.regclass,
                                                  target pg_catalog.oid,
                                                  acl pg_catalog.aclitem[], owner pg_catalog.oid)
RETURNS pg_catalog.void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    is_function CONSTANT pg_catalog.bool :=
        catalog OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
    what pg_catalog.text;
    init pg_catalog.aclitem[];
    init_deps pg_catalog.pg_shdepend[];
    this_db pg_catalog.oid;
    a record;
BEGIN
    IF is_function THEN
        IF acl IS NULL THEN
            RETURN;
        END IF;
        what := 'FUNCTION ' OPERATOR(pg_catalog.||) target::pg_catalog.regprocedure::pg_catalog.text;
    ELSE
        acl := COALESCE(acl, pg_catalog.acldefault('r', owner));
        what := 'TABLE ' OPERATOR(pg_catalog.||) target::pg_catalog.regclass::pg_catalog.text;
    END IF;
    SELECT d.oid INTO this_db FROM pg_catalog.pg_database d
     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
    SELECT i.initprivs INTO init FROM pg_catalog.pg_init_privs i
     WHERE i.classoid OPERATOR(pg_catalog.=) catalog
       AND i.objoid OPERATOR(pg_catalog.=) target AND i.objsubid OPERATOR(pg_catalog.=) 0;
    SELECT pg_catalog.array_agg(s) INTO init_deps FROM pg_catalog.pg_shdepend s
     WHERE s.dbid OPERATOR(pg_catalog.=) this_db
       AND s.classid OPERATOR(pg_catalog.=) catalog
       AND s.objid OPERATOR(pg_catalog.=) target AND s.objsubid OPERATOR(pg_catalog.=) 0
       AND s.deptype OPERATOR(pg_catalog.=) 'i';

    EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', what);
    FOR a IN SELECT e.grantee, e.privilege_type, pg_catalog.bool_or(e.is_grantable) AS is_grantable
               FROM pg_catalog.aclexplode(acl) e
              WHERE e.grantee OPERATOR(pg_catalog.<>) owner
              GROUP BY e.grantee, e.privilege_type LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s%s', a.privilege_type, what,
            CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
            CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;

    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.classoid OPERATOR(pg_catalog.=) catalog
       AND i.objoid OPERATOR(pg_catalog.=) target AND i.objsubid OPERATOR(pg_catalog.=) 0;
    IF init IS NOT NULL THEN
        INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
        VALUES (target, catalog, 0, 'e', init);
    END IF;
    DELETE FROM pg_catalog.pg_shdepend s
     WHERE s.dbid OPERATOR(pg_catalog.=) this_db
       AND s.classid OPERATOR(pg_catalog.=) catalog
       AND s.objid OPERATOR(pg_catalog.=) target AND s.objsubid OPERATOR(pg_catalog.=) 0
       AND s.deptype OPERATOR(pg_catalog.=) 'i';
    INSERT INTO pg_catalog.pg_shdepend SELECT * FROM pg_catalog.unnest(init_deps);
END
$fn$;

-- The ttl a call gets when it names none: fencelock.default_ttl, or 30 seconds where the
-- setting is not defined (the library not loaded yet in this session).
CREATE FUNCTION fencelock.default_ttl()
RETURNS pg_catalog.interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$SELECT COALESCE(
        pg_catalog.current_setting('fencelock.default_ttl', true)::pg_catalog.interval,
        '30 seconds')$$;

-- == task-table claiming ==

-- One row per table enabled with enable_tasks: the column that plays each part of the task-table
-- convention (NULL: an optional part the table does not have) and the index claim scans (by name:
-- pg_dump restores this table's rows before it builds indexes).  Written only by enable_tasks, read
-- by claim and the helpers; no privileges for anyone else.
CREATE TABLE fencelock.task_tables (
    tbl              pg_catalog.regclass PRIMARY KEY,
    state_col        pg_catalog.name NOT NULL,
    lease_owner_col  pg_catalog.name NOT NULL,
    lease_until_col  pg_catalog.name NOT NULL,
    attempt_col      pg_catalog.name NOT NULL,
    fence_col        pg_catalog.name NOT NULL,
    run_after_col    pg_catalog.name,
    priority_col     pg_catalog.name,
    max_attempts_col pg_catalog.name,
    last_error_col   pg_catalog.name,
    claim_index      pg_catalog.name             -- in the table's schema
);
SELECT pg_catalog.pg_extension_config_dump('fencelock.task_tables', '');
REVOKE ALL ON TABLE fencelock.task_tables FROM PUBLIC;

CREATE FUNCTION fencelock.enable_tasks(tbl pg_catalog.regclass,
                                       state_col pg_catalog.name DEFAULT 'state',
                                       lease_owner_col pg_catalog.name DEFAULT 'lease_owner',
                                       lease_until_col pg_catalog.name DEFAULT 'lease_until',
                                       attempt_col pg_catalog.name DEFAULT 'attempt',
                                       fence_col pg_catalog.name DEFAULT 'fence',
                                       run_after_col pg_catalog.name DEFAULT NULL,
                                       priority_col pg_catalog.name DEFAULT NULL,
                                       max_attempts_col pg_catalog.name DEFAULT NULL,
                                       last_error_col pg_catalog.name DEFAULT NULL)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'fencelock_enable_tasks'
LANGUAGE C VOLATILE;

-- Not STRICT: the first argument is NULL::table, only its type matters.
CREATE FUNCTION fencelock.claim(tasks anyelement, worker pg_catalog.text,
                                ttl pg_catalog.interval DEFAULT fencelock.default_ttl(),
                                max_rows pg_catalog.int4 DEFAULT 1)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'fencelock_claim'
LANGUAGE C VOLATILE ROWS 10;

-- The helpers are ordinary UPDATEs of the caller, checked by the fence trigger; id is the row's
-- primary key, in any type that converts to the key column's type.
CREATE FUNCTION fencelock.heartbeat(tbl pg_catalog.regclass, id anycompatible,
                                    fence pg_catalog.int8,
                                    ttl pg_catalog.interval DEFAULT fencelock.default_ttl())
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_heartbeat'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.complete(tbl pg_catalog.regclass, id anycompatible,
                                   fence pg_catalog.int8)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_complete'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.fail(tbl pg_catalog.regclass, id anycompatible, fence pg_catalog.int8,
                               error pg_catalog.text DEFAULT NULL,
                               backoff pg_catalog.interval DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'fencelock_fail'
LANGUAGE C VOLATILE;

-- == waiting, acquire_all, statistics and history ==

-- How each grant came about: n new resource, r after a release, e after the same owner's lease
-- expired, t taken over after another owner's lease expired.  NULL for grants made by 0.1.0.
ALTER TABLE fencelock.lease ADD COLUMN granted_how pg_catalog."char";
-- The holder's fencelock.lock_delay when the lease was granted: after the deadline, the lease
-- stays ungrantable to other owners for this long unless it was released.
ALTER TABLE fencelock.lease ADD COLUMN lock_delay pg_catalog.interval;

-- The 0.2.0 entry points count, wake waiters, honour lock_delay and write history.
CREATE OR REPLACE FUNCTION fencelock.acquire(resource pg_catalog.text, owner pg_catalog.text,
                                             ttl pg_catalog.interval DEFAULT fencelock.default_ttl())
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_0_2'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION fencelock.renew(resource pg_catalog.text, owner pg_catalog.text,
                                           ttl pg_catalog.interval DEFAULT fencelock.default_ttl())
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_renew_0_2'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION fencelock.release(resource pg_catalog.text, owner pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_release_0_2'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION fencelock.purge(idle pg_catalog.interval)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_purge_0_2'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.acquire(resource pg_catalog.text, owner pg_catalog.text,
                                  ttl pg_catalog.interval, wait pg_catalog.interval)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_wait'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.acquire_all(resources pg_catalog.text[], owner pg_catalog.text,
                                      ttl pg_catalog.interval DEFAULT fencelock.default_ttl(),
                                      wait pg_catalog.interval DEFAULT '0')
RETURNS pg_catalog.int8[]
AS 'MODULE_PATHNAME', 'fencelock_acquire_all'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.release_all(resources pg_catalog.text[], owner pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'fencelock_release_all'
LANGUAGE C VOLATILE;

-- Statistics (shared memory: needs shared_preload_libraries = 'fencelock').
CREATE FUNCTION fencelock.read_stats(
    OUT grants pg_catalog.int8, OUT takeovers pg_catalog.int8, OUT reacquires pg_catalog.int8,
    OUT busy pg_catalog.int8, OUT renewals pg_catalog.int8, OUT renewals_refused pg_catalog.int8,
    OUT releases pg_catalog.int8, OUT releases_refused pg_catalog.int8,
    OUT stale_rejected pg_catalog.int8, OUT unfenced_rejected pg_catalog.int8,
    OUT waits pg_catalog.int8, OUT wait_time_ms pg_catalog.float8, OUT wait_timeouts pg_catalog.int8,
    OUT stats_reset pg_catalog.timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'fencelock_stats'
LANGUAGE C VOLATILE;

CREATE VIEW fencelock.stats AS SELECT * FROM fencelock.read_stats();

CREATE FUNCTION fencelock.read_table_stats(OUT relid pg_catalog.oid,
                                           OUT stale_rejected pg_catalog.int8,
                                           OUT unfenced_rejected pg_catalog.int8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fencelock_table_stats'
LANGUAGE C VOLATILE;

CREATE VIEW fencelock.table_stats AS
SELECT s.relid::pg_catalog.regclass AS "table", s.stale_rejected, s.unfenced_rejected
  FROM fencelock.read_table_stats() AS s;

CREATE FUNCTION fencelock.stats_reset()
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'fencelock_stats_reset'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.stats_reset() FROM PUBLIC;

CREATE FUNCTION fencelock.waiters(resource pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'fencelock_waiters'
LANGUAGE C VOLATILE;

GRANT SELECT ON fencelock.stats, fencelock.table_stats TO PUBLIC;

-- History of grants (fencelock.history = on).  Owner tokens are in it: readable only by
-- pg_read_all_stats (and superusers).
CREATE TABLE fencelock.history (
    resource    pg_catalog.text COLLATE "C" NOT NULL,
    fence       pg_catalog.int8 NOT NULL,
    owner       pg_catalog.text NOT NULL,
    granted_how pg_catalog.text NOT NULL,        -- new, after release, after own expiry, taken over
    granted_at  pg_catalog.timestamptz NOT NULL,
    expires_at  pg_catalog.timestamptz NOT NULL, -- the last deadline (renewals move it)
    ended_at    pg_catalog.timestamptz,
    ended_how   pg_catalog.text,                 -- released, taken over, expired
    PRIMARY KEY (resource, fence)
);
CREATE INDEX history_granted_at ON fencelock.history (granted_at);
SELECT pg_catalog.pg_extension_config_dump('fencelock.history', '');
REVOKE ALL ON TABLE fencelock.history FROM PUBLIC;
GRANT SELECT ON TABLE fencelock.history TO pg_read_all_stats;

-- leases gains how the lease was granted and, when preloaded, the number of waiters.
CREATE OR REPLACE VIEW fencelock.leases AS
SELECT l.resource,
       CASE WHEN pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
              OR EXISTS (SELECT FROM pg_catalog.pg_roles AS r
                          WHERE r.rolname OPERATOR(pg_catalog.=) l.holder
                            AND pg_catalog.pg_has_role(r.oid, 'MEMBER'))
            THEN l.owner END AS owner,
       l.fence,
       l.acquired_at,
       l.expires_at,
       CASE WHEN l.owner IS NOT NULL AND l.expires_at OPERATOR(pg_catalog.>) c.now
            THEN l.expires_at OPERATOR(pg_catalog.-) c.now END AS remaining,
       CASE WHEN l.owner IS NULL THEN 'free'
            WHEN l.expires_at OPERATOR(pg_catalog.>) c.now THEN 'held'
            ELSE 'expired' END AS state,
       l.holder,
       CASE l.granted_how WHEN 'n' THEN 'new' WHEN 'r' THEN 'after release'
            WHEN 'e' THEN 'after own expiry' WHEN 't' THEN 'taken over' END AS granted_how,
       fencelock.waiters(l.resource) AS waiters
  FROM fencelock.lease AS l,
       LATERAL (SELECT pg_catalog.clock_timestamp() AS now) AS c;

-- == privileges of the objects this update created (issue 35) ==
-- Every function, table and view of the extension that 0.1.0 did not have gets a rule: what extends
-- an object of 0.1.0 takes its privileges (a database that revoked acquire from PUBLIC does the
-- same for the waiting acquire and acquire_all), the rest keeps a fresh install's.  An object
-- without a rule ends the update: whoever adds one to this script gives it a rule.
DO $fl$
DECLARE
    -- target, and the 0.1.0 object it extends or NULL; a function by its signature
    rules CONSTANT pg_catalog.text[] := ARRAY[
        -- extending 0.1.0's acquire and release
        ['acquire(text, text, interval, interval)', 'acquire(text, text, interval)'],
        ['acquire_all(text[], text, interval, interval)', 'acquire(text, text, interval)'],
        ['release_all(text[], text)', 'release(text, text)'],
        -- extending nothing of 0.1.0's: as a fresh install
        ['default_ttl()', NULL],
        ['enable_tasks(regclass, name, name, name, name, name, name, name, name, name)', NULL],
        ['claim(anyelement, text, interval, integer)', NULL],
        ['heartbeat(regclass, anycompatible, bigint, interval)', NULL],
        ['complete(regclass, anycompatible, bigint)', NULL],
        ['fail(regclass, anycompatible, bigint, text, interval)', NULL],
        ['read_stats()', NULL],
        ['read_table_stats()', NULL],
        ['waiters(text)', NULL],
        ['stats', NULL],
        ['table_stats', NULL],
        ['task_tables', NULL],
        ['history', NULL],
        -- the administrators': as a fresh install
        ['stats_reset()', NULL],
        ['update_old_objects', NULL],
        ['update_carry_privileges(regclass, oid, aclitem[], oid)', NULL]];
    r record;
    missing pg_catalog.text;
BEGIN
    CREATE TEMPORARY VIEW fencelock_objects AS
    SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass AS catalog, p.oid AS obj,
           pg_catalog.format('%s(%s)', p.proname, pg_catalog.oidvectortypes(p.proargtypes)) AS name
      FROM pg_catalog.pg_proc p
     WHERE p.pronamespace OPERATOR(pg_catalog.=) 'fencelock'::pg_catalog.regnamespace
    UNION ALL
    SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid, c.relname::pg_catalog.text
      FROM pg_catalog.pg_class c
     WHERE c.relnamespace OPERATOR(pg_catalog.=) 'fencelock'::pg_catalog.regnamespace
       AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'p']::pg_catalog."char"[]);

    SELECT pg_catalog.string_agg(n.name, ', ' ORDER BY n.name) INTO missing
      FROM pg_temp.fencelock_objects n
     WHERE NOT EXISTS (SELECT FROM fencelock.update_old_objects o
                        WHERE o.catalog OPERATOR(pg_catalog.=) n.catalog
                          AND o.obj OPERATOR(pg_catalog.=) n.obj)
       AND NOT EXISTS (SELECT FROM pg_catalog.generate_subscripts(rules, 1) i
                        WHERE rules[i][1] OPERATOR(pg_catalog.=) n.name);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'no rule for the privileges of new objects %', missing
            USING ERRCODE = 'XX000',
                  HINT = 'Give each object this script creates a rule (fencelock--0.1.0--0.2.0.sql).';
    END IF;

    FOR r IN SELECT n.catalog, n.obj, o.acl, o.owner
               FROM pg_catalog.generate_subscripts(rules, 1) i
               JOIN fencelock.update_old_objects o ON o.name OPERATOR(pg_catalog.=) rules[i][2]
               JOIN pg_temp.fencelock_objects n ON n.name OPERATOR(pg_catalog.=) rules[i][1]
                                               AND n.catalog OPERATOR(pg_catalog.=) o.catalog LOOP
        PERFORM fencelock.update_carry_privileges(r.catalog, r.obj, r.acl, r.owner);
    END LOOP;
    DROP VIEW pg_temp.fencelock_objects;
END
$fl$;
DROP FUNCTION fencelock.update_carry_privileges(pg_catalog.regclass, pg_catalog.oid,
                                                pg_catalog.aclitem[], pg_catalog.oid);
DROP TABLE fencelock.update_old_objects;
