-- Claiming needs an immediate primary key: a DEFERRABLE one counts as none, on every major.
-- (PostgreSQL 18's relcache can return a deferrable primary key when asked; src/compat.h's
-- FL_PRIMARY_KEY_INDEX asks for an immediate one, which is all 15-17 ever return.)
\set VERBOSITY default
CREATE TABLE deferred_tasks (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, state text,
                             lease_owner text, lease_until timestamptz, attempt int, fence bigint);
SELECT fencelock.enable_tasks('deferred_tasks');
-- The same table with an immediate primary key is accepted.
CREATE TABLE immediate_tasks (LIKE deferred_tasks);
ALTER TABLE immediate_tasks ADD PRIMARY KEY (id);
SELECT fencelock.enable_tasks('immediate_tasks') IS NOT NULL AS enabled;
DROP TABLE deferred_tasks, immediate_tasks;
