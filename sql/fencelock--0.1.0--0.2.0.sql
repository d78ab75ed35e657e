-- fencelock 0.1.0 -> 0.2.0: task-table claiming; waiting, several resources, statistics, history.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.2.0'" to load this file. \quit

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
