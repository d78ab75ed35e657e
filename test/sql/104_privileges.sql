-- The functions are the only way into fencelock's tables; owner tokens are shown only to
-- the role that took the lease (and to pg_read_all_stats); search_path cannot redirect them.
\set VERBOSITY terse
CREATE ROLE regress_alice;
CREATE ROLE regress_bob;
CREATE ROLE regress_reader IN ROLE pg_read_all_stats;

SET ROLE regress_alice;
SELECT fencelock.acquire('priv:alice', 'alice-secret-token') IS NOT NULL AS alice_granted;
SELECT owner FROM fencelock.leases WHERE resource = 'priv:alice';
BEGIN;
SELECT fencelock.assert_fence('priv:alice', fencelock.current_fence('priv:alice')) AS alice_asserts;
COMMIT;
RESET ROLE;

SET ROLE regress_bob;
-- Bob sees the lease but not its owner token.
SELECT owner IS NULL AS token_hidden, state, holder FROM fencelock.leases WHERE resource = 'priv:alice';
-- Bob cannot read or change the table directly, nor purge.
SELECT * FROM fencelock.lease;
UPDATE fencelock.lease SET owner = 'bob' WHERE resource = 'priv:alice';
DELETE FROM fencelock.lease;
INSERT INTO fencelock.lease VALUES ('priv:bob', 'bob', 999999, now(), now(), 0);
TRUNCATE fencelock.lease;
UPDATE fencelock.fence_floor SET floor = 0;
SELECT fencelock.purge('0');
-- Bob cannot pin Alice's lease row with assert_fence (which would block her renewals).
BEGIN;
SELECT fencelock.assert_fence('priv:alice', (SELECT fence FROM fencelock.leases WHERE resource = 'priv:alice'));
ROLLBACK;
-- Through the functions Bob cannot take or release Alice's live lease.
SELECT fencelock.acquire('priv:alice', 'bob-token') IS NULL AS busy;
SELECT fencelock.release('priv:alice', 'bob-token') AS released;

-- A hostile search_path: Bob's own schema with an "=" for text that always says true.
RESET ROLE;
CREATE SCHEMA regress_evil AUTHORIZATION regress_bob;
SET ROLE regress_bob;
CREATE FUNCTION regress_evil.always(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.always);
-- ... and an "=" for "char" that would run as the extension's owner if any statement behind the
-- functions resolved operators through the caller's search_path (history on exercises them all).
CREATE FUNCTION regress_evil.char_eq("char", "char") RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN RAISE NOTICE 'hijacked as %', current_user; RETURN $1 OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR regress_evil.= (LEFTARG = "char", RIGHTARG = "char", FUNCTION = regress_evil.char_eq);
CREATE FUNCTION regress_evil.int8_eq(int8, int8) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN RAISE NOTICE 'hijacked as %', current_user; RETURN $1 OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR regress_evil.= (LEFTARG = int8, RIGHTARG = int8, FUNCTION = regress_evil.int8_eq);
SET search_path = regress_evil, pg_catalog, public;
SELECT fencelock.release('priv:alice', 'bob-token') AS released_with_evil_path;
SELECT fencelock.acquire('priv:alice', 'bob-token') IS NULL AS still_busy;
RESET ROLE;
SET fencelock.history = on;
SET ROLE regress_bob;
SELECT fencelock.acquire('priv:bob', 'bob-token', '1 millisecond') IS NOT NULL AS bob_granted;
SELECT pg_sleep(0.01);
SELECT fencelock.acquire('priv:bob', 'bob-token-2') IS NOT NULL AS bob_takes_over;
SELECT fencelock.renew('priv:bob', 'bob-token-2') AS renewed;
SELECT fencelock.release('priv:bob', 'bob-token-2') AS released;
SELECT fencelock.acquire_all(ARRAY['priv:b1', 'priv:b2'], 'bob-token') IS NOT NULL AS all_granted;
SELECT fencelock.release_all(ARRAY['priv:b1', 'priv:b2'], 'bob-token') AS all_released;
BEGIN;
SELECT fencelock.assert_fence('priv:bob', fencelock.current_fence('priv:bob'));
COMMIT;
RESET search_path;
RESET ROLE;
SELECT fencelock.purge('0') >= 0 AS purged_with_history;
RESET fencelock.history;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_bob';

SET ROLE regress_reader;
SELECT owner FROM fencelock.leases WHERE resource = 'priv:alice';
RESET ROLE;

SELECT owner, state FROM fencelock.leases WHERE resource = 'priv:alice';
DROP SCHEMA regress_evil CASCADE;
DROP ROLE regress_alice, regress_bob, regress_reader;
-- A lease whose role was dropped still shows, with the role name it was taken under.
SELECT state, owner FROM fencelock.leases WHERE resource = 'priv:alice';
