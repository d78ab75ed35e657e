-- fencelock 0.1.0: leases with fencing tokens, and the trigger that checks them.
\echo Use "CREATE EXTENSION fencelock" to load this file. \quit

-- One row per resource.  Only the primary key is indexed, so every lease change is a HOT
-- update; fillfactor leaves room on the page for it.
CREATE TABLE fencelock.lease (
    resource    pg_catalog.text COLLATE "C" PRIMARY KEY,
    owner       pg_catalog.text,                -- NULL once released
    fence       pg_catalog.int8 NOT NULL,       -- latest fence issued; never goes back
    acquired_at pg_catalog.timestamptz,         -- start of the current (or last) grant
    expires_at  pg_catalog.timestamptz,         -- deadline; the release time once released
    holder      pg_catalog.name                 -- role that took the lease (by name, so dumps carry it)
) WITH (fillfactor = 70);

-- The highest fence among purged rows: a resource that comes back starts above it.
CREATE TABLE fencelock.fence_floor (
    id    pg_catalog.bool PRIMARY KEY DEFAULT true CHECK (id),
    floor pg_catalog.int8 NOT NULL
);

SELECT pg_catalog.pg_extension_config_dump('fencelock.lease', '');
SELECT pg_catalog.pg_extension_config_dump('fencelock.fence_floor', '');

REVOKE ALL ON TABLE fencelock.lease, fencelock.fence_floor FROM PUBLIC;
GRANT USAGE ON SCHEMA fencelock TO PUBLIC;

CREATE FUNCTION fencelock.acquire(resource pg_catalog.text, owner pg_catalog.text,
                                  ttl pg_catalog.interval DEFAULT '30 seconds')
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_acquire'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.renew(resource pg_catalog.text, owner pg_catalog.text,
                                ttl pg_catalog.interval DEFAULT '30 seconds')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_renew'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.release(resource pg_catalog.text, owner pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'fencelock_release'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.current_fence(resource pg_catalog.text)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_current_fence'
LANGUAGE C STABLE PARALLEL RESTRICTED;

CREATE FUNCTION fencelock.assert_fence(resource pg_catalog.text, fence pg_catalog.int8)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'fencelock_assert_fence'
LANGUAGE C VOLATILE;

CREATE FUNCTION fencelock.purge(idle pg_catalog.interval)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_purge'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.purge(pg_catalog.interval) FROM PUBLIC;

CREATE FUNCTION fencelock.key(VARIADIC parts pg_catalog.text[])
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'fencelock_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION fencelock.fence_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'fencelock_fence_trigger'
LANGUAGE C;

-- Owner tokens are the capability to renew and release: the view shows them only to members of
-- the role that took the lease and to members of pg_read_all_stats (superusers see all).
CREATE VIEW fencelock.leases AS
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
       l.holder
  FROM fencelock.lease AS l,
       LATERAL (SELECT pg_catalog.clock_timestamp() AS now) AS c;

GRANT SELECT ON fencelock.leases TO PUBLIC;
