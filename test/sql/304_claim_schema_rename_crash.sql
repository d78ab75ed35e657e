-- Issue 10, finding 1: a server crash (type confusion) by a non-superuser in claim after a schema
-- rename.  claim's statements were kept per table OID but named the table by its schema-qualified
-- name; after ALTER SCHEMA m RENAME the plan cache resolved the name to a new m.q with other column
-- types, and claim copied its values as the old table's (signal 11, or heap pointers as ids).
-- Now the statements are built again when a schema (or operator) changes, and every result is
-- checked (relation and column types) before anything is copied or counted as done.
\set VERBOSITY terse
CREATE ROLE fl_schema_owner LOGIN;
SELECT current_database() AS db \gset
GRANT CREATE ON DATABASE :"db" TO fl_schema_owner;
SET ROLE fl_schema_owner;
CREATE SCHEMA m;
CREATE TABLE m.q (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                  lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                  fence bigint NOT NULL DEFAULT 0, payload text);
SELECT fencelock.enable_tasks('m.q');
INSERT INTO m.q (id, payload) VALUES (1, 'one'), (2, 'two'), (3, 'three');
-- Claim once: the statements are built and kept, naming "m"."q".
SELECT id, payload, fence FROM fencelock.claim(NULL::m.q, 'w', '10 s', 1);
SELECT fencelock.heartbeat('m.q', 1, 1, '10 s') AS heartbeat_before;
-- The schema is renamed and a table of the same name, with other types, takes its place.
ALTER SCHEMA m RENAME TO m_old;
CREATE SCHEMA m;
CREATE TABLE m.q (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                  lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                  fence bigint NOT NULL DEFAULT 0, payload bigint);
INSERT INTO m.q (id, payload) VALUES (1, 12345), (2, 7), (3, 8);
-- Claims through the old table's type claim the old table's rows, typed as they are.
SELECT id, payload, fence FROM fencelock.claim(NULL::m_old.q, 'w', '10 s', 1);
SELECT id, payload FROM fencelock.claim(NULL::m_old.q, 'w', '10 s', 5);
-- The helpers act on the old table too (their statements were kept as well).
SELECT fencelock.heartbeat('m_old.q', 1, 1, '10 s') AS heartbeat_old;
SELECT fencelock.complete('m_old.q', 2, 1) AS complete_old;
SELECT fencelock.fail('m_old.q', 3, 1) AS fail_old;
SELECT id, state, fence, payload FROM m_old.q ORDER BY id;
-- The new m.q was not touched.
SELECT id, state, fence, payload FROM m.q ORDER BY id;
-- The table itself renamed, and moved: the same.
ALTER TABLE m_old.q RENAME TO q_renamed;
CREATE TABLE m_old.q (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                      lease_owner text, lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                      fence bigint NOT NULL DEFAULT 0, payload int);
INSERT INTO m_old.q (id) VALUES (3);
SELECT id, payload FROM fencelock.claim(NULL::m_old.q_renamed, 'w', '10 s', 5);
CREATE SCHEMA m2;
ALTER TABLE m_old.q_renamed SET SCHEMA m2;
SELECT fencelock.complete('m2.q_renamed', 3, 2) AS complete_moved;
SELECT id, state, fence FROM m2.q_renamed ORDER BY id;
SELECT id, state, fence FROM m_old.q ORDER BY id;
RESET ROLE;
DROP SCHEMA m, m_old, m2 CASCADE;
SELECT current_database() AS db \gset
REVOKE CREATE ON DATABASE :"db" FROM fl_schema_owner;
DROP ROLE fl_schema_owner;
