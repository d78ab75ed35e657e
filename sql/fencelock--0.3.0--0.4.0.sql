-- fencelock 0.3.0 -> 0.4.0: the second hardening round (issue 20).
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.4.0'" to load this file. \quit

-- == the inheritance guard checks the command's own tables (issue 20, defect 4) ==
-- First in this script: 0.3.0's guard checks every inheritance child of the database after each
-- CREATE TABLE or ALTER TABLE, so one child without its parent's fence trigger anywhere would make
-- the DDL below fail (and this update with it).
--
-- The guard (src/fence/inhguard.c) now looks only at the tables a command created, attached, or gave
-- or took a trigger, refuses a fence trigger on a parent whose inheritance children lack it, and
-- only warns when check_function_bodies is off (as in a restore).  It sees CREATE FOREIGN TABLE,
-- CREATE SCHEMA's tables and triggers dropped by any command too: the event trigger is made anew
-- for its new tags (WHEN cannot be altered), under the same name, beside one on sql_drop.  A guard
-- the database disabled (or enabled for replicas only, or always) stays so, both triggers.
--
-- It is the first function of this script in C that 0.3.0's library lacks: when the library this
-- session uses is 0.3.0's, the update stops here with an error that says so (issue 35), not with
-- 42883 naming a file that, on disk, has the function.  A server started with
-- shared_preload_libraries = 'fencelock' keeps the library it started with until it restarts:
-- every backend inherits the postmaster's mapping, and PostgreSQL looks a library up by its path
-- among those already loaded before it reads the file (a session without preload that used
-- fencelock before the new library was installed keeps its copy the same way).
DO $fl$
BEGIN
    CREATE OR REPLACE FUNCTION fencelock.inheritance_guard() RETURNS pg_catalog.event_trigger
    AS 'MODULE_PATHNAME', 'fencelock_inheritance_guard'
    LANGUAGE C SET search_path = pg_catalog, pg_temp;
EXCEPTION WHEN undefined_function THEN
    RAISE EXCEPTION 'the fencelock library loaded in this session is older than 0.4.0'
        USING ERRCODE = '55000',
              DETAIL = pg_catalog.format('The update to 0.4.0 needs the functions of 0.4.0''s library: %s. A server started with shared_preload_libraries = ''fencelock'' keeps the library it started with until it restarts, and a session keeps the one it has loaded.', SQLERRM),
              HINT = 'Install fencelock 0.4.0''s library, restart the server (without shared_preload_libraries, open a new session), then update again.';
END
$fl$;

DO $fl$
DECLARE
    state pg_catalog."char";
BEGIN
    SELECT e.evtenabled INTO state FROM pg_catalog.pg_event_trigger e
     WHERE e.evtname OPERATOR(pg_catalog.=) 'fencelock_inheritance_guard';
    DROP EVENT TRIGGER fencelock_inheritance_guard;
    CREATE EVENT TRIGGER fencelock_inheritance_guard ON ddl_command_end
        WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'CREATE SCHEMA', 'ALTER TABLE',
                     'ALTER FOREIGN TABLE', 'CREATE TRIGGER')
        EXECUTE FUNCTION fencelock.inheritance_guard();
    CREATE EVENT TRIGGER fencelock_inheritance_guard_drop ON sql_drop
        EXECUTE FUNCTION fencelock.inheritance_guard();
    IF state OPERATOR(pg_catalog.=) 'D' THEN
        ALTER EVENT TRIGGER fencelock_inheritance_guard DISABLE;
        ALTER EVENT TRIGGER fencelock_inheritance_guard_drop DISABLE;
    ELSIF state OPERATOR(pg_catalog.=) 'R' THEN
        ALTER EVENT TRIGGER fencelock_inheritance_guard ENABLE REPLICA;
        ALTER EVENT TRIGGER fencelock_inheritance_guard_drop ENABLE REPLICA;
    ELSIF state OPERATOR(pg_catalog.=) 'A' THEN
        ALTER EVENT TRIGGER fencelock_inheritance_guard ENABLE ALWAYS;
        ALTER EVENT TRIGGER fencelock_inheritance_guard_drop ENABLE ALWAYS;
    END IF;
END
$fl$;
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
-- == after restoring an older pg_dump: every fence from now on above a bound (issue 20) ==
CREATE FUNCTION fencelock.raise_fences(above pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_raise_fences'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.raise_fences(pg_catalog.int8) FROM PUBLIC;
-- == who may take which lease (issue 22) ==
-- A release and a renew that name their grant: they act only on the grant with that fence, so a
-- retried release whose first try committed cannot free the same owner's newer lease.
CREATE FUNCTION fencelock.release(resource pg_catalog.text, owner pg_catalog.text,
                                  fence pg_catalog.int8)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_release_grant'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.renew(resource pg_catalog.text, owner pg_catalog.text,
                                ttl pg_catalog.interval, fence pg_catalog.int8)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_renew_grant'
LANGUAGE C VOLATILE;

-- Resource privileges: once a prefix here covers a resource name, only members of its grantees
-- (and superusers) may acquire, renew, release or assert_fence it, or write a table bound to it;
-- the longest covering prefix decides; names under no prefix stay open (src/store/privilege.c).
-- grantee is the role's name, which a dump restores whatever roles exist (a regrole made the
-- whole COPY fail, and left every prefix open); a grant is in force for the role of that name
-- holding itself SELECT on the column grantee, the marker grant_resources gives and nothing else
-- does: PostgreSQL's dependency on that privilege refuses DROP ROLE, and a name that resolves to
-- no role holding the marker (dropped, renamed, created later under the name) matches nobody.
CREATE TABLE fencelock.resource_grants (
    prefix  pg_catalog.text COLLATE "C" NOT NULL CHECK (prefix OPERATOR(pg_catalog.<>) ''),
    grantee pg_catalog.text COLLATE "C" NOT NULL CHECK (grantee OPERATOR(pg_catalog.<>) ''),
    PRIMARY KEY (prefix, grantee)
);
REVOKE ALL ON TABLE fencelock.resource_grants FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('fencelock.resource_grants', '');

CREATE FUNCTION fencelock.grant_resources(prefix pg_catalog.text, grantee pg_catalog.regrole)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_grant_resources'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.grant_resources(pg_catalog.text, pg_catalog.regrole) FROM PUBLIC;

-- grantee as resource_privileges shows it: a grant whose role is gone can be taken back too.
CREATE FUNCTION fencelock.revoke_resources(prefix pg_catalog.text, grantee pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_revoke_resources'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.revoke_resources(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

CREATE VIEW fencelock.resource_privileges AS
SELECT g.prefix, g.grantee FROM fencelock.resource_grants AS g;
GRANT SELECT ON fencelock.resource_privileges TO PUBLIC;
-- == contention per resource (issue 26) ==
-- One row per resource of this database (src/observe/resstats.c; with shared_preload_libraries, bounded
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
-- == a fence trigger fires for every row (issue 35, defect 4) ==
-- A fence trigger with an UPDATE OF list or a WHEN condition skips rows, and a stale holder's write
-- it skips commits unchecked.  0.4.0 refuses one at CREATE TRIGGER and at each firing; one that
-- exists already might never fire (its WHEN skipping exactly the stale writes), so the update
-- refuses to run while one exists, naming them all (a partition's clone with its parent's).
DO $fl$
DECLARE
    found pg_catalog.text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%I on %s', t.tgname, t.tgrelid::pg_catalog.regclass),
                                 ', ' ORDER BY t.tgrelid::pg_catalog.regclass::pg_catalog.text, t.tgname)
      INTO found
      FROM pg_catalog.pg_trigger t
      JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
      JOIN pg_catalog.pg_language lang ON lang.oid OPERATOR(pg_catalog.=) p.prolang
     WHERE lang.lanname OPERATOR(pg_catalog.=) 'c'
       AND p.prosrc OPERATOR(pg_catalog.=) 'fencelock_fence_trigger'
       AND t.tgparentid OPERATOR(pg_catalog.=) 0
       AND (t.tgqual IS NOT NULL OR t.tgattr::pg_catalog.text OPERATOR(pg_catalog.<>) '');
    IF found IS NOT NULL THEN
        RAISE EXCEPTION 'cannot update fencelock while fence triggers have a column list (UPDATE OF) or a WHEN condition: %', found
            USING ERRCODE = 'trigger_protocol_violated',
                  DETAIL = 'A fence trigger must fire for every row it is for: a stale write it '
                           'skipped would commit unchecked.  fencelock 0.4.0 refuses such a '
                           'trigger when it is created and when it fires.',
                  HINT = 'Drop each and create it again without UPDATE OF and WHEN, then update '
                         'the extension.';
    END IF;
END
$fl$;
-- == acquire(resource, owner, ttl, session => true) without wait (issue 24) ==
-- One function for every form of acquire: wait defaults to '0' (one try), session to false; an
-- explicit NULL for either is still an error (22004), as before.  No
-- overload could add the form: one with a boolean fourth parameter makes
-- acquire(r, o, ttl, '5 seconds') ambiguous, and defaults on the waiting one make
-- acquire(r, o, ttl) ambiguous.  The three overloads it replaces hand it their privileges (those
-- of the one-try form, by the rules at the end of this script; the update refuses to guess when
-- the three differ).
DO $fl$
BEGIN
    IF (SELECT pg_catalog.count(DISTINCT COALESCE(p.proacl::pg_catalog.text, ''))
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'fencelock'::pg_catalog.regnamespace
           AND p.proname OPERATOR(pg_catalog.=) 'acquire') OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'the three fencelock.acquire functions have different privileges'
            USING ERRCODE = '55000',
                  HINT = 'Grant or revoke EXECUTE on all three alike, then update: 0.4.0 has one acquire function.';
    END IF;
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
END
$fl$;
-- == a value on the lease (issue 27) ==
-- One value per resource, stamped with the fence of the grant it belongs to: shown while that
-- grant is held, replaced only by a value of the same or a newer grant (a stale holder cannot
-- overwrite its successor's), deleted by purge once no lease shows it.
CREATE TABLE fencelock.lease_value (
    resource pg_catalog.text COLLATE "C" PRIMARY KEY,
    fence    pg_catalog.int8 NOT NULL,        -- the grant the value belongs to
    value    pg_catalog.jsonb NOT NULL,
    set_at   pg_catalog.timestamptz NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('fencelock.lease_value', '');
REVOKE ALL ON TABLE fencelock.lease_value FROM PUBLIC;

CREATE FUNCTION fencelock.set_value(resource pg_catalog.text, owner pg_catalog.text,
                                    value pg_catalog.jsonb)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_set_value'
LANGUAGE C VOLATILE;

-- acquire gains value (default NULL: none), last; replaced, not overloaded (an overload with a
-- default would make every shorter call ambiguous), its privileges carried over (the rules at the
-- end of this script).
DROP FUNCTION fencelock.acquire(pg_catalog.text, pg_catalog.text, pg_catalog.interval,
                                pg_catalog.interval, pg_catalog.bool);
CREATE FUNCTION fencelock.acquire(resource pg_catalog.text, owner pg_catalog.text,
                                  ttl pg_catalog.interval DEFAULT fencelock.default_ttl(),
                                  wait pg_catalog.interval DEFAULT '0',
                                  session pg_catalog.bool DEFAULT false,
                                  value pg_catalog.jsonb DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_0_4'
LANGUAGE C VOLATILE;

-- == the lease clock (issue 38) ==
-- The clock every lease decision is taken at (src/store/clock.c): with shared_preload_libraries,
-- the wall clock at the server's start plus the time the monotonic clock has run since, so a step
-- of the wall clock does not move it; without, the wall clock.  Volatile, as clock_timestamp():
-- the views compare each deadline with the clock as it reads then.
CREATE FUNCTION fencelock.lease_clock()
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'fencelock_lease_clock'
LANGUAGE C VOLATILE;

-- leases gains value: the held grant's (NULL once it is released, expired, ended or replaced).
-- Everyone who reads leases reads it.
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
       l.session_id IS NOT NULL AND l.owner IS NOT NULL AS session_bound,
       CASE WHEN s.live AND l.expires_at OPERATOR(pg_catalog.>) c.now
            THEN (SELECT v.value FROM fencelock.lease_value AS v
                   WHERE v.resource OPERATOR(pg_catalog.=) l.resource
                     AND v.fence OPERATOR(pg_catalog.=) l.fence) END AS value
  FROM fencelock.lease AS l,
       LATERAL (SELECT fencelock.lease_clock() AS now) AS c,
       LATERAL (SELECT l.owner IS NOT NULL
                   AND (l.session_id IS NULL OR fencelock.session_alive(l.session_id)) AS live) AS s;

-- == one-step jobs (issue 28) ==
-- The lease for the rest of this transaction: a new fence, or NULL when another owner holds it
-- (after wait, queued as a waiting acquire is).  The grant is written released and its row stays
-- locked until the transaction ends: the commit frees the lease, a rollback undoes the grant.
-- Nothing to release.
CREATE FUNCTION fencelock.acquire_xact(resource pg_catalog.text, owner pg_catalog.text,
                                       wait pg_catalog.interval DEFAULT '0')
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_xact'
LANGUAGE C VOLATILE;

-- == shared leases and permits (issue 27) ==
-- While shared or permit holders exist, the resource's lease row is held by their group: owner ''
-- (a token no caller can pass), expires_at the latest holder's deadline with its lock_delay.
-- The holders are rows of their own, of the current group only; no role has privileges on them.
CREATE TABLE fencelock.lease_holder (
    resource    pg_catalog.text COLLATE "C" NOT NULL,
    owner       pg_catalog.text COLLATE "C" NOT NULL,
    fence       pg_catalog.int8 NOT NULL,            -- this holder's grant
    acquired_at pg_catalog.timestamptz NOT NULL,
    expires_at  pg_catalog.timestamptz NOT NULL,
    holder      pg_catalog.name NOT NULL,            -- the role that took it
    lock_delay  pg_catalog.interval,
    session_id  pg_catalog.int8,                     -- bound to this session, or NULL
    slot        pg_catalog.int4,                     -- a permit's slot, 1..permits; NULL: a share
    permits     pg_catalog.int4,                     -- the group's count; NULL: shared
    value       pg_catalog.jsonb,
    PRIMARY KEY (resource, owner)
);
SELECT pg_catalog.pg_extension_config_dump('fencelock.lease_holder', '');
REVOKE ALL ON TABLE fencelock.lease_holder FROM PUBLIC;

ALTER TABLE fencelock.history
    ADD COLUMN mode pg_catalog.text NOT NULL DEFAULT 'exclusive',  -- exclusive, shared, permit
    ADD COLUMN slot pg_catalog.int4;                                -- a permit's slot

CREATE FUNCTION fencelock.acquire_shared(resource pg_catalog.text, owner pg_catalog.text,
                                         ttl pg_catalog.interval DEFAULT fencelock.default_ttl(),
                                         wait pg_catalog.interval DEFAULT '0',
                                         session pg_catalog.bool DEFAULT false,
                                         value pg_catalog.jsonb DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_shared'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.acquire_permit(resource pg_catalog.text, owner pg_catalog.text,
                                         ttl pg_catalog.interval, permits pg_catalog.int4,
                                         wait pg_catalog.interval DEFAULT '0',
                                         session pg_catalog.bool DEFAULT false,
                                         value pg_catalog.jsonb DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire_permit'
LANGUAGE C VOLATILE;

-- The current group's holders; the owner token is shown to members of the holder's role.
CREATE VIEW fencelock.lease_holders AS
SELECT h.resource,
       CASE WHEN pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
              OR EXISTS (SELECT FROM pg_catalog.pg_roles AS r
                          WHERE r.rolname OPERATOR(pg_catalog.=) h.holder
                            AND pg_catalog.pg_has_role(r.oid, 'MEMBER'))
            THEN h.owner END AS owner,
       CASE WHEN h.permits IS NULL THEN 'shared' ELSE 'permit' END AS mode,
       h.slot,
       h.permits,
       h.fence,
       h.acquired_at,
       h.expires_at,
       CASE WHEN s.live THEN h.expires_at OPERATOR(pg_catalog.-) c.now END AS remaining,
       CASE WHEN s.live THEN 'held' ELSE 'expired' END AS state,
       h.holder,
       h.session_id IS NOT NULL AS session_bound,
       CASE WHEN s.live THEN h.value END AS value
  FROM fencelock.lease_holder AS h
  JOIN fencelock.lease AS l ON l.resource OPERATOR(pg_catalog.=) h.resource
                           AND l.owner OPERATOR(pg_catalog.=) '',
       LATERAL (SELECT fencelock.lease_clock() AS now) AS c,
       LATERAL (SELECT h.expires_at OPERATOR(pg_catalog.>) c.now
                   AND (h.session_id IS NULL OR fencelock.session_alive(h.session_id)) AS live) AS s;
GRANT SELECT ON fencelock.lease_holders TO PUBLIC;

-- leases gains mode (exclusive, shared, permit; NULL when free); a group's row shows no owner.
CREATE OR REPLACE VIEW fencelock.leases AS
SELECT l.resource,
       CASE WHEN l.owner OPERATOR(pg_catalog.=) '' THEN NULL
            WHEN pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
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
       l.session_id IS NOT NULL AND l.owner IS NOT NULL AS session_bound,
       CASE WHEN s.live AND l.expires_at OPERATOR(pg_catalog.>) c.now
            THEN (SELECT v.value FROM fencelock.lease_value AS v
                   WHERE v.resource OPERATOR(pg_catalog.=) l.resource
                     AND v.fence OPERATOR(pg_catalog.=) l.fence) END AS value,
       CASE WHEN l.owner IS NULL THEN NULL
            WHEN l.owner OPERATOR(pg_catalog.<>) '' THEN 'exclusive'
            WHEN EXISTS (SELECT FROM fencelock.lease_holder AS h
                          WHERE h.resource OPERATOR(pg_catalog.=) l.resource
                            AND h.permits IS NOT NULL) THEN 'permit'
            ELSE 'shared' END AS mode
  FROM fencelock.lease AS l,
       LATERAL (SELECT fencelock.lease_clock() AS now) AS c,
       LATERAL (SELECT l.owner IS NOT NULL
                   AND (l.session_id IS NULL OR fencelock.session_alive(l.session_id)) AS live) AS s;

-- stats gains shared_grants and permit_grants (of grants; before stats_reset, the last column).
-- The view and its function are replaced, their privileges carried over (by the rules at the end
-- of this script).
-- Objects of the database's own that depend on the view would keep it from being dropped: the
-- update refuses, naming them.
DO $fl$
DECLARE
    deps pg_catalog.text;
BEGIN
    -- (Up to 15 a view's own rule depends on the view normally too: not counted.)
    SELECT pg_catalog.string_agg(o.what, ', ' ORDER BY o.what)
      INTO deps
      FROM (SELECT DISTINCT pg_catalog.pg_describe_object(d.classid, d.objid, 0) AS what
              FROM pg_catalog.pg_depend d
             WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=) 'fencelock.stats'::pg_catalog.regclass
               AND d.deptype OPERATOR(pg_catalog.=) 'n'
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_rewrite r
                                WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                                  AND r.oid OPERATOR(pg_catalog.=) d.objid
                                  AND r.ev_class OPERATOR(pg_catalog.=) 'fencelock.stats'::pg_catalog.regclass)) o;
    IF deps IS NOT NULL THEN
        RAISE EXCEPTION 'cannot update fencelock: other objects depend on view fencelock.stats'
            USING ERRCODE = '2BP01',
                  DETAIL = pg_catalog.format('The update to 0.4.0 replaces the view (it gains columns before stats_reset). Depending on it: %s.', deps),
                  HINT = 'Drop those objects, update, and create them again.';
    END IF;
    DROP VIEW fencelock.stats;
    DROP FUNCTION fencelock.read_stats();
    CREATE FUNCTION fencelock.read_stats(
        OUT grants pg_catalog.int8, OUT takeovers pg_catalog.int8, OUT reacquires pg_catalog.int8,
        OUT busy pg_catalog.int8, OUT renewals pg_catalog.int8, OUT renewals_refused pg_catalog.int8,
        OUT releases pg_catalog.int8, OUT releases_refused pg_catalog.int8,
        OUT stale_rejected pg_catalog.int8, OUT unfenced_rejected pg_catalog.int8,
        OUT waits pg_catalog.int8, OUT wait_time_ms pg_catalog.float8, OUT wait_timeouts pg_catalog.int8,
        OUT revokes pg_catalog.int8, OUT shared_grants pg_catalog.int8,
        OUT permit_grants pg_catalog.int8, OUT stats_reset pg_catalog.timestamptz)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencelock_stats'
    LANGUAGE C VOLATILE;
    CREATE VIEW fencelock.stats AS SELECT * FROM fencelock.read_stats();
    GRANT SELECT ON fencelock.stats TO PUBLIC;
END
$fl$;

-- == a dropped task table takes its row with it (issue 35) ==
-- fencelock.task_tables names a table by OID without a dependency: the sql_drop event trigger
-- (fencelock_inheritance_guard_drop, src/fence/inhguard.c) now removes a dropped table's row at DROP.
-- Rows of tables dropped before this update would stay until the next enable_tasks: removed
-- now, before a new table can take their OID.
DELETE FROM fencelock.task_tables AS c
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class AS r
                    WHERE r.oid OPERATOR(pg_catalog.=) c.tbl::pg_catalog.oid);
-- == privileges of the objects this update created (issue 35) ==
-- Every function, table and view of the extension that 0.3.0 did not have gets a rule: what extends
-- an object of 0.3.0 takes its privileges (a database that revoked acquire from PUBLIC and granted
-- it to its application does the same for acquire_shared), the rest keeps a fresh install's.  An
-- object without a rule ends the update: whoever adds one to this script gives it a rule.
DO $fl$
DECLARE
    -- target, and the 0.3.0 object it extends or NULL; a function by its signature
    rules CONSTANT pg_catalog.text[] := ARRAY[
        -- the one acquire (0.3.0's three have the same privileges, checked above) and what extends it
        ['acquire(text, text, interval, interval, boolean, jsonb)',
         'acquire(text, text, interval)'],
        ['acquire_shared(text, text, interval, interval, boolean, jsonb)',
         'acquire(text, text, interval)'],
        ['acquire_permit(text, text, interval, integer, interval, boolean, jsonb)',
         'acquire(text, text, interval)'],
        ['acquire_xact(text, text, interval)', 'acquire(text, text, interval)'],
        ['set_value(text, text, jsonb)', 'acquire(text, text, interval)'],
        -- renew and release naming a fence
        ['renew(text, text, interval, bigint)', 'renew(text, text, interval)'],
        ['release(text, text, bigint)', 'release(text, text)'],
        -- what is read as leases and stats are
        ['lease_holders', 'leases'],
        ['read_stats()', 'read_stats()'],
        ['stats', 'stats'],
        ['read_resource_stats()', 'read_stats()'],
        ['resource_stats', 'stats'],
        ['read_resource_stats_info()', 'read_stats()'],
        ['resource_stats_info', 'stats'],
        -- extending nothing of 0.3.0's: as a fresh install
        ['resource_grants', NULL],
        ['resource_privileges', NULL],
        ['lease_value', NULL],
        ['lease_holder', NULL],
        ['lease_clock()', NULL],
        -- the administrators': as a fresh install
        ['raise_fences(bigint)', NULL],
        ['grant_resources(text, regrole)', NULL],
        ['revoke_resources(text, text)', NULL],
        ['resource_stats_reset()', NULL],
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
                  HINT = 'Give each object this script creates a rule (fencelock--0.3.0--0.4.0.sql).';
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
