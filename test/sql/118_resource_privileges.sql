-- Resource privileges (issue 22): grant_resources(prefix, grantee) reserves the resource names
-- beginning with prefix to the grantee's members.  The adversary of the issue (an ordinary role,
-- mallory) can then neither take nor pin nor release an application's 'order-*' resource; the
-- longest covering prefix decides; names under no prefix stay open; acquire_all is all or
-- nothing; only the extension's owner (and whom it grants EXECUTE) grants.
TRUNCATE fencelock.lease, fencelock.fence_floor;
\set VERBOSITY terse
CREATE ROLE app;
CREATE ROLE app_worker IN ROLE app;
CREATE ROLE mallory;
CREATE ROLE tenant_ops;
CREATE TABLE orders (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=order-scan');
GRANT ALL ON orders TO app, mallory;

-- Before any grant every name is open, and only the owner may grant.
SELECT count(*) AS grants FROM fencelock.resource_privileges;
SET ROLE mallory;
SELECT fencelock.grant_resources('order-', 'mallory');
SELECT fencelock.acquire('order-early', 'm', '1 min') IS NOT NULL AS open_before;
RESET ROLE;
SELECT fencelock.grant_resources('order-', 'app') AS granted;
SELECT fencelock.grant_resources('order-', 'app') AS granted_again;
SELECT prefix, grantee FROM fencelock.resource_privileges ORDER BY 1, 2;

-- The adversary's reproducer: take it, pin it with a waiting or an uncommitted grant, take it
-- with a harmless name beside it.  Each is refused (42501) before it touches the lease.
SET ROLE mallory;
SELECT fencelock.acquire('order-scan', 'mallory', '1 day');
SELECT fencelock.acquire('order-scan', 'mallory', '1 day', wait => '5 s');
BEGIN;
SELECT fencelock.acquire('order-report', 'm', '1 s');
ROLLBACK;
SELECT fencelock.acquire_all(ARRAY['mallory-own', 'order-x'], 'm');
RESET ROLE;
SELECT count(*) AS nothing_granted FROM fencelock.lease WHERE resource = 'mallory-own';
SET ROLE mallory;
SELECT fencelock.acquire('mallory-own', 'm', '1 min') IS NOT NULL AS open_name;
-- The lease taken before the grant cannot be renewed or released by her any more either.
SELECT fencelock.renew('order-early', 'm', '1 min');
RESET ROLE;

-- A member of app takes it; mallory, knowing the owner token and the fence, cannot renew,
-- release, assert its fence or write under it.
SET ROLE app_worker;
SELECT fencelock.acquire('order-scan', 'w', '1 min') AS fence;
INSERT INTO orders VALUES (1, 'app', 1);
RESET ROLE;
SET ROLE mallory;
SELECT fencelock.renew('order-scan', 'w', '1 min');
SELECT fencelock.renew('order-scan', 'w', '1 min', 1);
SELECT fencelock.release('order-scan', 'w');
SELECT fencelock.release('order-scan', 'w', 1);
SELECT fencelock.set_value('order-scan', 'w', '"mallory was here"');
SELECT fencelock.release_all(ARRAY['mallory-own', 'order-scan'], 'w');
SELECT fencelock.assert_fence('order-scan', 1);
INSERT INTO orders VALUES (2, 'mallory', 1);
SELECT fencelock.release('mallory-own', 'm') AS own_still_held;
RESET ROLE;
SELECT owner, fence, state FROM fencelock.leases WHERE resource = 'order-scan';
SET ROLE app_worker;
SELECT fencelock.renew('order-scan', 'w', '1 min', 1) AS renewed,
       fencelock.release('order-scan', 'w', 1) AS released;
RESET ROLE;

-- The longest prefix decides: 'order-audit-' is mallory's alone, app's members are refused.
SELECT fencelock.grant_resources('order-audit-', 'mallory') AS granted;
SET ROLE mallory;
SELECT fencelock.acquire('order-audit-1', 'm', '1 min') IS NOT NULL AS granted;
SELECT fencelock.acquire('order-audit', 'm', '1 min');
RESET ROLE;
SET ROLE app_worker;
SELECT fencelock.acquire('order-audit-2', 'w', '1 min');
RESET ROLE;

-- The message names the prefix and the call that grants it.
\set VERBOSITY default
SET ROLE mallory;
SELECT fencelock.acquire('order-scan', 'mallory');
RESET ROLE;
\set VERBOSITY terse

-- The owner may let another role grant; a revoke opens the names again.
GRANT EXECUTE ON FUNCTION fencelock.grant_resources(text, regrole),
    fencelock.revoke_resources(text, text) TO tenant_ops;
SET ROLE tenant_ops;
SELECT fencelock.grant_resources('tenant-1:', 'app') AS granted;
SELECT fencelock.revoke_resources('order-', 'app') AS revoked;
SELECT fencelock.revoke_resources('order-', 'app') AS revoked_again;
RESET ROLE;
SET ROLE mallory;
SELECT fencelock.acquire('order-scan', 'mallory', '1 min') IS NOT NULL AS open_again;
SELECT fencelock.acquire('tenant-1:jobs', 'mallory', '1 min');
RESET ROLE;

-- Bad input changes nothing.
SELECT fencelock.grant_resources(NULL, 'app');
SELECT fencelock.grant_resources('', 'app');
SELECT fencelock.grant_resources(repeat('x', 1025), 'app');
SELECT fencelock.grant_resources('x-', NULL);
SELECT fencelock.grant_resources('x-', 0::regrole);
SELECT fencelock.revoke_resources('x-', NULL);
SELECT prefix, grantee FROM fencelock.resource_privileges ORDER BY 1, 2;

-- Clean up.
SELECT fencelock.revoke_resources(p.prefix, p.grantee) FROM fencelock.resource_privileges AS p;
REVOKE EXECUTE ON FUNCTION fencelock.grant_resources(text, regrole),
    fencelock.revoke_resources(text, text) FROM tenant_ops;
DROP TABLE orders;
DROP ROLE app_worker, app, mallory, tenant_ops;
TRUNCATE fencelock.lease, fencelock.fence_floor;
