-- Issue 20, item 3 (every elog a superuser can reach): a task table whose key's default btree
-- operator class (a superuser's) has no equality operator.  claim cannot compare keys: it says so
-- with SQLSTATE 42883 and a hint, not an internal error naming OIDs.
\set VERBOSITY default
CREATE FUNCTION point_cmp_x(point, point) RETURNS int LANGUAGE sql IMMUTABLE
    AS 'SELECT sign($1[0] - $2[0])::int';
CREATE OPERATOR CLASS point_noeq DEFAULT FOR TYPE point USING btree AS
    OPERATOR 1 <<, FUNCTION 1 point_cmp_x(point, point);
CREATE TABLE pj (id point PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('pj');
INSERT INTO pj (id) VALUES ('(1,1)');
\set VERBOSITY sqlstate
SELECT id FROM fencelock.claim(NULL::pj, 'w');
\set VERBOSITY default
SELECT id FROM fencelock.claim(NULL::pj, 'w');
-- Nothing was claimed.
SELECT state, attempt, fence FROM pj;
DROP TABLE pj;
DROP OPERATOR CLASS point_noeq USING btree;
DROP OPERATOR FAMILY point_noeq USING btree;
DROP FUNCTION point_cmp_x(point, point);
