-- Issue 35, checks remembered without their role (sibling of 234): claim checks that the caller
-- may UPDATE the table before it takes any lock, so that a role without the privilege cannot
-- queue behind the table's writers.  The check ran only when the session's cache entry of the
-- table was built: after the owner's claim, another role of the same session (SET ROLE) skipped
-- it and waited for the table's lock.  It now runs at every call.
\set VERBOSITY terse
CREATE ROLE regress_cpr_owner;
CREATE ROLE regress_cpr_reader;
CREATE SCHEMA regress_cpr AUTHORIZATION regress_cpr_owner;
SET ROLE regress_cpr_owner;
CREATE TABLE regress_cpr.jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                               lease_owner text, lease_until timestamptz,
                               attempt int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0);
INSERT INTO regress_cpr.jobs (id) VALUES (1);
GRANT USAGE ON SCHEMA regress_cpr TO regress_cpr_reader;
GRANT SELECT ON regress_cpr.jobs TO regress_cpr_reader;
SELECT fencelock.enable_tasks('regress_cpr.jobs') IS NOT NULL AS enabled;
-- The owner's claim builds the session's entry of the table.
SELECT id FROM fencelock.claim(NULL::regress_cpr.jobs, worker => 'w-1');
RESET ROLE;

-- A prepared transaction holds the table's lock; the reader, refused at once, does not wait.
BEGIN;
LOCK TABLE regress_cpr.jobs IN ACCESS EXCLUSIVE MODE;
PREPARE TRANSACTION 'regress_cpr_lock';
SET lock_timeout = '200ms';
SET ROLE regress_cpr_reader;
SELECT id FROM fencelock.claim(NULL::regress_cpr.jobs, worker => 'w-2');
RESET ROLE;
RESET lock_timeout;
COMMIT PREPARED 'regress_cpr_lock';

-- Clean up.
DROP SCHEMA regress_cpr CASCADE;
DROP ROLE regress_cpr_owner, regress_cpr_reader;
