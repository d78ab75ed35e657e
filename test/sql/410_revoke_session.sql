-- revoke(): an operator frees a lease whoever holds it, with a new fence issued at once; the old
-- holder's fence, renew and release all fail afterwards.  Session-bound leases: the arguments,
-- the leases view, and a later grant without session => true unbinding the lease.  (Ending the
-- session is in test/t/460_session_leases.pl, notifications in the notify_* isolation specs.)
\set VERBOSITY terse
-- Fences below start at 1: no lease row or purge floor left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor;
CREATE ROLE regress_ops;
CREATE ROLE regress_app;

-- Only roles granted EXECUTE may revoke.
SET ROLE regress_app;
SELECT fencelock.acquire('rv:held', 'app-token', '1 hour') AS app_fence;
SELECT fencelock.revoke('rv:held');
RESET ROLE;
GRANT EXECUTE ON FUNCTION fencelock.revoke(text) TO regress_ops;

SET ROLE regress_ops;
SELECT fencelock.revoke('rv:held') AS revoke_fence;          -- the next fence, held by nobody
SELECT fencelock.revoke('rv:never-seen') IS NULL AS nothing_to_revoke;
SELECT fencelock.revoke(NULL);
SELECT fencelock.revoke('');
RESET ROLE;

SELECT state, owner, fence, granted_how, holder FROM fencelock.leases WHERE resource = 'rv:held';
SET ROLE regress_app;
-- The old holder has lost the lease: renew and release fail, its fence is refused.
SELECT fencelock.renew('rv:held', 'app-token') AS renewed,
       fencelock.release('rv:held', 'app-token') AS released;
BEGIN;
SELECT fencelock.assert_fence('rv:held', 1);
ROLLBACK;
-- The next grant gets a fence above the revoke's.
SELECT fencelock.acquire('rv:held', 'app-token-2', '1 hour') AS next_fence;
RESET ROLE;
-- Revoking a free lease issues a fence too: nobody may still write under an older one.
SELECT fencelock.release('rv:held', 'app-token-2') AS released,
       fencelock.revoke('rv:held') AS fence_of_free_revoke;
SELECT revokes >= 2 AS revokes_counted FROM fencelock.stats;

-- A lease-bound table refuses the revoked holder's fence at once, even on rows nobody wrote since.
CREATE TABLE rv_data (id int PRIMARY KEY, v text, last_fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON rv_data FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=rv:bound');
SELECT fencelock.acquire('rv:bound', 'writer', '1 hour') AS bound_fence;
INSERT INTO rv_data VALUES (1, 'before', 1), (2, 'before', 1);
SELECT fencelock.revoke('rv:bound') AS revoked_to;
UPDATE rv_data SET v = 'after revoke', last_fence = 1 WHERE id = 2;
SELECT fencelock.renew('rv:bound', 'writer') AS writer_renews;
DROP TABLE rv_data;

-- Session-bound leases: the flag must be given, and shows in leases.
SELECT fencelock.acquire('rv:session', 'me', '1 hour', '0', NULL);
SELECT fencelock.acquire('rv:session', 'me', '1 hour', wait => '0', session => true) AS fence;
SELECT state, session_bound FROM fencelock.leases WHERE resource = 'rv:session';
SELECT fencelock.session_alive(session_id) AS my_session_alive FROM fencelock.lease
 WHERE resource = 'rv:session';
-- The same owner again without session => true keeps the fence and unbinds the lease.
SELECT fencelock.acquire('rv:session', 'me', '1 hour') AS same_fence;
SELECT state, session_bound FROM fencelock.leases WHERE resource = 'rv:session';
SELECT fencelock.acquire('rv:session', 'me', '1 hour', '0', true) AS bound_again;
SELECT fencelock.release('rv:session', 'me') AS released;
SELECT state, session_bound FROM fencelock.leases WHERE resource = 'rv:session';
-- Only the id of a live session is alive.
SELECT fencelock.session_alive(NULL) AS null_id, fencelock.session_alive(0) AS zero_id,
       fencelock.session_alive(-1) AS negative_id, fencelock.session_alive(9223372036854775807) AS unknown_id;

REVOKE EXECUTE ON FUNCTION fencelock.revoke(text) FROM regress_ops;
DROP ROLE regress_ops;
DROP ROLE regress_app;
