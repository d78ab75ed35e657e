-- The PL/pgSQL contender of the acquire + release benchmark (doc/bench.md, row 2): the contract of
-- fencelock.acquire and fencelock.release written the way a team without the extension would
-- write it.  Same table layout and HOT-friendly fillfactor, same statements (UPDATE-then-INSERT
-- with ON CONFLICT DO NOTHING, a fence per resource that never goes back, the purge floor read on
-- the insert path, compare-and-release), same argument checks, the server's clock at the moment
-- of the call, and the grant's commit forced synchronous (SET LOCAL synchronous_commit = on).
-- Same privilege model: nobody has rights on the table, the functions run as their owner with a
-- pinned search_path (SECURITY DEFINER ... SET search_path, as the project's style guide prescribes).
-- Left out: the timeline base of fences after a failover (PL/pgSQL has no cheap way to read the
-- WAL insertion timeline); that omission only makes this contender cheaper.

CREATE SCHEMA pllease;

CREATE TABLE pllease.lease (
    resource    text COLLATE "C" PRIMARY KEY,
    owner       text,
    fence       bigint NOT NULL,
    acquired_at timestamptz,
    expires_at  timestamptz,
    holder      name
) WITH (fillfactor = 70);

CREATE TABLE pllease.fence_floor (
    id    bool PRIMARY KEY DEFAULT true CHECK (id),
    floor bigint NOT NULL
);

REVOKE ALL ON TABLE pllease.lease, pllease.fence_floor FROM PUBLIC;

CREATE FUNCTION pllease.acquire(p_resource text, p_owner text,
                                p_ttl interval DEFAULT '30 seconds')
RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_fence bigint;
BEGIN
    IF p_resource IS NULL OR p_owner IS NULL OR p_ttl IS NULL THEN
        RAISE EXCEPTION 'resource, owner and ttl must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_resource = '' OR p_owner = '' THEN
        RAISE EXCEPTION 'resource and owner must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_resource) > 1024 OR octet_length(p_owner) > 256 THEN
        RAISE EXCEPTION 'resource or owner too long' USING ERRCODE = '54000';
    END IF;
    IF p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'ttl % out of range', p_ttl USING ERRCODE = '22023';
    END IF;
    UPDATE pllease.lease AS l
       SET fence = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
                        THEN l.fence ELSE l.fence + 1 END,
           acquired_at = CASE WHEN l.owner = p_owner AND l.expires_at > v_now
                              THEN l.acquired_at ELSE v_now END,
           owner = p_owner, expires_at = v_now + p_ttl, holder = session_user
     WHERE l.resource = p_resource
       AND (l.owner IS NULL OR l.expires_at <= v_now OR l.owner = p_owner)
    RETURNING l.fence INTO v_fence;
    IF NOT FOUND THEN
        SELECT coalesce(max(f.floor), 0) + 1 INTO v_fence FROM pllease.fence_floor AS f;
        INSERT INTO pllease.lease AS l (resource, owner, fence, acquired_at, expires_at, holder)
        VALUES (p_resource, p_owner, v_fence, v_now, v_now + p_ttl, session_user)
        ON CONFLICT (resource) DO NOTHING
        RETURNING l.fence INTO v_fence;
        IF NOT FOUND THEN
            RETURN NULL;                -- another owner holds a live lease
        END IF;
    END IF;
    SET LOCAL synchronous_commit = on;  -- a fence must survive a crash
    RETURN v_fence;
END
$$;

CREATE FUNCTION pllease.release(p_resource text, p_owner text)
RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    IF p_resource IS NULL OR p_owner IS NULL THEN
        RAISE EXCEPTION 'resource and owner must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_resource = '' OR p_owner = '' THEN
        RAISE EXCEPTION 'resource and owner must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_resource) > 1024 OR octet_length(p_owner) > 256 THEN
        RAISE EXCEPTION 'resource or owner too long' USING ERRCODE = '54000';
    END IF;
    UPDATE pllease.lease AS l
       SET owner = NULL, holder = NULL, expires_at = v_now
     WHERE l.resource = p_resource AND l.owner = p_owner AND l.expires_at > v_now;
    RETURN FOUND;
END
$$;
