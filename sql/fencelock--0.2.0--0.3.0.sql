-- fencelock 0.2.0 -> 0.3.0: hardening, lease-bound writes.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.3.0'" to load this file. \quit

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

-- == hardening (issue 10) ==

-- === hardening: leases ===

-- fencelock's functions run their statements as the extension's owner, naming the schema
-- fencelock: a schema owned by another role is refused, as its owner could rename it and plant
-- its own fencelock.lease (with a trigger that reads every owner token).  CREATE EXTENSION runs
-- this script after the 0.1.0 one, so it refuses to install into a schema the installing role
-- does not own; an update of an install in such a schema fails the same way (the 0.3.0 library
-- refuses to run in it anyway), until the schema's owner is changed.
DO $$
DECLARE
    ext_owner pg_catalog.name;
    nsp_owner pg_catalog.name;
    nsp_name  pg_catalog.name;
BEGIN
    SELECT r.rolname, o.rolname, n.nspname INTO ext_owner, nsp_owner, nsp_name
      FROM pg_catalog.pg_extension AS e
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
      JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) e.extowner
      JOIN pg_catalog.pg_roles AS o ON o.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE e.extname OPERATOR(pg_catalog.=) 'fencelock';
    IF nsp_owner OPERATOR(pg_catalog.<>) ext_owner THEN
        RAISE EXCEPTION 'schema "%" is owned by role "%", not by role "%", the owner of extension "fencelock"',
                        nsp_name, nsp_owner, ext_owner
              USING ERRCODE = 'object_not_in_prerequisite_state',
                    DETAIL = 'The owner of the schema could rename it or create objects in it, and fencelock runs its statements as the extension''s owner.',
                    HINT = pg_catalog.format('Run ALTER SCHEMA %I OWNER TO %I as a superuser, then try again.',
                                             nsp_name, ext_owner);
    END IF;
END
$$;

-- == lease-bound writes (issue 11) ==

-- Inheritance children are written through their parent without firing the parent's row
-- triggers, so a child without the parent's fence_trigger would be a way around it (partitions
-- are not: they get the parent's row triggers as clones).  After each command that can make an
-- inheritance child, or drop a trigger, no child of a table guarded by fence_trigger may lack a
-- trigger with the same events and arguments.  Adding the trigger to a parent whose children lack
-- it only warns: pg_restore creates the parent's trigger before the children's.
CREATE FUNCTION fencelock.inheritance_guard() RETURNS pg_catalog.event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN
        SELECT pt.tgname, i.inhparent::pg_catalog.regclass AS parent,
               i.inhrelid::pg_catalog.regclass AS child
          FROM pg_catalog.pg_trigger AS pt
          JOIN pg_catalog.pg_inherits AS i ON i.inhparent OPERATOR(pg_catalog.=) pt.tgrelid
          JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE pt.tgfoid OPERATOR(pg_catalog.=) 'fencelock.fence_trigger()'::pg_catalog.regprocedure
           AND NOT c.relispartition
           AND NOT EXISTS (
               SELECT FROM pg_catalog.pg_trigger AS ct
                WHERE ct.tgrelid OPERATOR(pg_catalog.=) i.inhrelid
                  AND ct.tgfoid OPERATOR(pg_catalog.=) pt.tgfoid
                  AND ct.tgtype OPERATOR(pg_catalog.=) pt.tgtype
                  AND ct.tgargs OPERATOR(pg_catalog.=) pt.tgargs)
         ORDER BY 2, 3
    LOOP
        IF TG_TAG OPERATOR(pg_catalog.=) 'CREATE TRIGGER' THEN
            RAISE WARNING 'inheritance child "%" of table "%" lacks its fence trigger "%"',
                v.child, v.parent, v.tgname
                USING DETAIL = 'Rows of an inheritance child written through the parent do not '
                               'fire the parent''s row triggers.',
                      HINT = 'Create the same trigger on the child.';
        ELSE
            RAISE EXCEPTION 'inheritance child "%" of table "%" lacks its fence trigger "%"',
                v.child, v.parent, v.tgname
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'Rows of an inheritance child written through the parent do not '
                               'fire the parent''s row triggers, so the child would bypass the '
                               'fence.',
                      HINT = 'Create the child without INHERITS, give it the same trigger, then '
                             'ALTER TABLE ... INHERIT; or use declarative partitioning, whose '
                             'partitions get the trigger automatically.';
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION fencelock.inheritance_guard() FROM PUBLIC;

CREATE EVENT TRIGGER fencelock_inheritance_guard ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE TRIGGER', 'DROP TRIGGER')
    EXECUTE FUNCTION fencelock.inheritance_guard();

-- == session-bound leases, revoke, notifications (issue 14) ==

-- The session a session-bound lease belongs to (NULL: an ordinary lease).  A lease whose session
-- has ended is free.
ALTER TABLE fencelock.lease ADD COLUMN session_id pg_catalog.int8;

CREATE FUNCTION fencelock.session_alive(session_id pg_catalog.int8)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_session_alive'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- acquire(..., wait => ..., session => true): the lease ends with the session that took it.
-- No defaults, so that the three- and four-argument forms stay unambiguous.
CREATE FUNCTION fencelock.acquire(resource pg_catalog.text, owner pg_catalog.text,
                                  ttl pg_catalog.interval, wait pg_catalog.interval,
                                  session pg_catalog.bool)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_session'
LANGUAGE C VOLATILE;

-- Frees a lease whoever holds it and issues a new fence at once; for operators.
CREATE FUNCTION fencelock.revoke(resource pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_revoke'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.revoke(pg_catalog.text) FROM PUBLIC;

-- stats gains revokes (before stats_reset, which stays the last column).
DROP VIEW fencelock.stats;
DROP FUNCTION fencelock.read_stats();
CREATE FUNCTION fencelock.read_stats(
    OUT grants pg_catalog.int8, OUT takeovers pg_catalog.int8, OUT reacquires pg_catalog.int8,
    OUT busy pg_catalog.int8, OUT renewals pg_catalog.int8, OUT renewals_refused pg_catalog.int8,
    OUT releases pg_catalog.int8, OUT releases_refused pg_catalog.int8,
    OUT stale_rejected pg_catalog.int8, OUT unfenced_rejected pg_catalog.int8,
    OUT waits pg_catalog.int8, OUT wait_time_ms pg_catalog.float8, OUT wait_timeouts pg_catalog.int8,
    OUT revokes pg_catalog.int8, OUT stats_reset pg_catalog.timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'fencelock_stats'
LANGUAGE C VOLATILE;
CREATE VIEW fencelock.stats AS SELECT * FROM fencelock.read_stats();
GRANT SELECT ON fencelock.stats TO PUBLIC;

-- leases: a lease of an ended session is free; how it was granted includes 'revoked'; whether it
-- is bound to its session.
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
       CASE WHEN s.live AND l.expires_at OPERATOR(pg_catalog.>) c.now
            THEN l.expires_at OPERATOR(pg_catalog.-) c.now END AS remaining,
       CASE WHEN NOT s.live THEN 'free'
            WHEN l.expires_at OPERATOR(pg_catalog.>) c.now THEN 'held'
            ELSE 'expired' END AS state,
       l.holder,
       CASE l.granted_how WHEN 'n' THEN 'new' WHEN 'r' THEN 'after release'
            WHEN 'e' THEN 'after own expiry' WHEN 't' THEN 'taken over'
            WHEN 'v' THEN 'revoked' END AS granted_how,
       fencelock.waiters(l.resource) AS waiters,
       l.session_id IS NOT NULL AND l.owner IS NOT NULL AS session_bound
  FROM fencelock.lease AS l,
       LATERAL (SELECT pg_catalog.clock_timestamp() AS now) AS c,
       LATERAL (SELECT l.owner IS NOT NULL
                   AND (l.session_id IS NULL OR fencelock.session_alive(l.session_id)) AS live) AS s;

-- === task tables: waiting claim, backoff, retention (issue 13) ===

-- claim gains wait: when no row is claimable, wait up to this long for a commit that makes rows
-- claimable (NULL or '0': do not wait).  Replaced, not overloaded, so that every call naming
-- only some arguments stays unambiguous.
DROP FUNCTION fencelock.claim(anyelement, pg_catalog.text, pg_catalog.interval, pg_catalog.int4);
-- Not STRICT: the first argument is NULL::table, only its type matters.
CREATE FUNCTION fencelock.claim(tasks anyelement, worker pg_catalog.text,
                                ttl pg_catalog.interval DEFAULT fencelock.default_ttl(),
                                max_rows pg_catalog.int4 DEFAULT 1,
                                wait pg_catalog.interval DEFAULT NULL)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'fencelock_claim'
LANGUAGE C VOLATILE ROWS 10;

-- The wake triggers enable_tasks installs, AFTER INSERT (with the new rows as a transition table)
-- and AFTER UPDATE, FOR EACH STATEMENT: the commit of an INSERT of claimable rows, or of an UPDATE
-- other than claim's and the helpers', wakes waiting claims.
CREATE FUNCTION fencelock.task_wake()
RETURNS trigger
AS 'MODULE_PATHNAME', 'fencelock_task_wake'
LANGUAGE C VOLATILE;

-- How many claims wait on a table now; wake-ups delivered to waiting claims since the start.
CREATE FUNCTION fencelock.task_waiters(tbl pg_catalog.regclass, OUT waiting pg_catalog.int4,
                                       OUT wakeups pg_catalog.int8)
RETURNS record
AS 'MODULE_PATHNAME', 'fencelock_task_waiters'
LANGUAGE C VOLATILE;

-- finished_at: an optional part of the convention, set by complete and by whatever makes a row
-- dead; purge_tasks deletes by it.  The backoff policy fail applies when it is given no backoff:
-- min(backoff_max, backoff_base * 2 ^ (attempt - 1)), of which jitter makes a random share
-- (full: all of it, equal: half, none: nothing).  Existing rows get the defaults.
ALTER TABLE fencelock.task_tables
    ADD COLUMN finished_at_col pg_catalog.name,
    ADD COLUMN backoff_base pg_catalog.interval NOT NULL DEFAULT '10 seconds',
    ADD COLUMN backoff_max pg_catalog.interval NOT NULL DEFAULT '1 hour',
    ADD COLUMN backoff_jitter pg_catalog.text NOT NULL DEFAULT 'equal'
        CHECK (backoff_jitter OPERATOR(pg_catalog.=) ANY (ARRAY['full', 'equal', 'none']));

DROP FUNCTION fencelock.enable_tasks(pg_catalog.regclass, pg_catalog.name, pg_catalog.name,
                                     pg_catalog.name, pg_catalog.name, pg_catalog.name,
                                     pg_catalog.name, pg_catalog.name, pg_catalog.name,
                                     pg_catalog.name);
CREATE FUNCTION fencelock.enable_tasks(tbl pg_catalog.regclass,
                                       state_col pg_catalog.name DEFAULT 'state',
                                       lease_owner_col pg_catalog.name DEFAULT 'lease_owner',
                                       lease_until_col pg_catalog.name DEFAULT 'lease_until',
                                       attempt_col pg_catalog.name DEFAULT 'attempt',
                                       fence_col pg_catalog.name DEFAULT 'fence',
                                       run_after_col pg_catalog.name DEFAULT NULL,
                                       priority_col pg_catalog.name DEFAULT NULL,
                                       max_attempts_col pg_catalog.name DEFAULT NULL,
                                       last_error_col pg_catalog.name DEFAULT NULL,
                                       finished_at_col pg_catalog.name DEFAULT NULL,
                                       backoff_base pg_catalog.interval DEFAULT '10 seconds',
                                       backoff_max pg_catalog.interval DEFAULT '1 hour',
                                       backoff_jitter pg_catalog.text DEFAULT 'equal')
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'fencelock_enable_tasks'
LANGUAGE C VOLATILE;

-- Deletes done (and, with include_dead, dead) rows that finished more than older_than ago, in
-- statements of batch_size rows that skip locked rows; runs as the caller.
CREATE FUNCTION fencelock.purge_tasks(tbl pg_catalog.regclass, older_than pg_catalog.interval,
                                      include_dead pg_catalog.bool DEFAULT false,
                                      batch_size pg_catalog.int4 DEFAULT 1000)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_purge_tasks'
LANGUAGE C VOLATILE;

-- Completes several claimed rows in one statement: ids[i] under exactly fences[i].  Returns how
-- many are done under their fence; FL001 (and nothing completed) when any row's fence is another.
CREATE FUNCTION fencelock.complete_all(tbl pg_catalog.regclass, ids anyarray,
                                       fences pg_catalog.int8[])
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_complete_all'
LANGUAGE C VOLATILE;

-- == privileges of the objects this update created (issue 35) ==
-- Every function, table and view of the extension that 0.2.0 did not have gets a rule: what extends
-- an object of 0.2.0 takes its privileges (claim, enable_tasks, read_stats() and stats, replaced,
-- keep their own), the rest keeps a fresh install's.  An object without a rule ends the update:
-- whoever adds one to this script gives it a rule.
DO $fl$
DECLARE
    -- target, and the 0.2.0 object it extends or NULL; a function by its signature
    rules CONSTANT pg_catalog.text[] := ARRAY[
        -- replacing or extending 0.2.0's
        ['acquire(text, text, interval, interval, boolean)', 'acquire(text, text, interval)'],
        ['claim(anyelement, text, interval, integer, interval)',
         'claim(anyelement, text, interval, integer)'],
        ['enable_tasks(regclass, name, name, name, name, name, name, name, name, name, name, interval, interval, text)',
         'enable_tasks(regclass, name, name, name, name, name, name, name, name, name)'],
        ['read_stats()', 'read_stats()'],
        ['stats', 'stats'],
        ['complete_all(regclass, anyarray, bigint[])', 'complete(regclass, anycompatible, bigint)'],
        -- extending nothing of 0.2.0's: as a fresh install
        ['session_alive(bigint)', NULL],
        ['task_wake()', NULL],
        ['task_waiters(regclass)', NULL],
        ['purge_tasks(regclass, interval, boolean, integer)', NULL],
        -- the administrators': as a fresh install
        ['revoke(text)', NULL],
        ['inheritance_guard()', NULL],
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
                  HINT = 'Give each object this script creates a rule (fencelock--0.2.0--0.3.0.sql).';
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
