-- Issue 13: acquire, renew and release change the lease row directly (src/store/row.c), with the
-- outcome of store/rule.c's statements.  The direct path must keep the primary key complete when a new
-- version does not fit on its page, and must give way to the statements when a superuser has
-- given fencelock.lease an index or a trigger it does not maintain or fire itself.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;

-- 1. Thirty grants and releases of one wide row in one transaction: no version can be pruned,
-- the page fills, and later versions go to other pages, each needing its own key entry.  A
-- missing entry would make the next grant insert a second row for the resource, with fence 1.
DO $$
DECLARE
  r text := repeat('x', 1000);
  f bigint;
  moved bigint;
BEGIN
  FOR i IN 1..30 LOOP
    f := fencelock.acquire(r, 'owner-' || i, '1 minute');
    ASSERT f = i, format('grant %s got fence %s', i, f);
    ASSERT fencelock.renew(r, 'owner-' || i, '2 minutes'), format('renew %s refused', i);
    ASSERT fencelock.release(r, 'owner-' || i), format('release %s refused', i);
  END LOOP;
  SELECT n_tup_upd - n_tup_hot_upd INTO moved FROM pg_stat_xact_user_tables
   WHERE relid = 'fencelock.lease'::regclass;
  ASSERT moved > 0, 'every update was heap-only: the test did not move a version';
END $$;
SELECT count(*) AS rows, max(fence) AS fence, bool_and(owner IS NULL) AS released
  FROM fencelock.lease;
-- Found through the primary key, at its latest version.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET plan_cache_mode = force_generic_plan;
PREPARE by_key(text) AS SELECT fence, owner FROM fencelock.lease WHERE resource = $1;
EXPLAIN (COSTS OFF) EXECUTE by_key(repeat('x', 1000));
EXECUTE by_key(repeat('x', 1000));
DEALLOCATE by_key;
RESET plan_cache_mode;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT fencelock.acquire(repeat('x', 1000), 'owner-31', '1 minute') AS fence;

-- 2. An index a superuser added: grants keep it complete (an update that changes expires_at is
-- never heap-only, so the direct path would leave it without an entry for the new version).
CREATE INDEX lease_expires_at ON fencelock.lease (expires_at);
SELECT fencelock.acquire('indexed', 'a', '1 minute') AS fence;
SELECT fencelock.release('indexed', 'a') AS released;
SELECT fencelock.acquire('indexed', 'b', '1 hour') AS fence;
SELECT fencelock.renew('indexed', 'b', '2 hours') AS renewed;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT resource FROM fencelock.lease WHERE expires_at > now() + interval '90 minutes';
SELECT resource, owner FROM fencelock.lease WHERE expires_at > now() + interval '90 minutes';
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX fencelock.lease_expires_at;

-- 3. A trigger a superuser added fires for every change.
CREATE TABLE lease_audit (resource text, owner text, fence bigint);
CREATE FUNCTION lease_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.lease_audit VALUES (NEW.resource, NEW.owner, NEW.fence);
  RETURN NEW;
END $$;
CREATE TRIGGER lease_audit AFTER UPDATE ON fencelock.lease
  FOR EACH ROW EXECUTE FUNCTION lease_audit();
SELECT fencelock.release('indexed', 'b') AS released;
SELECT fencelock.acquire('indexed', 'c', '1 minute') AS fence;
SELECT fencelock.renew('indexed', 'c', '1 minute') AS renewed;
SELECT * FROM lease_audit;
DROP TRIGGER lease_audit ON fencelock.lease;
-- Without it, the direct path again; the audit sees nothing more.
SELECT fencelock.release('indexed', 'c') AS released;
SELECT count(*) AS audited FROM lease_audit;
DROP TABLE lease_audit;
DROP FUNCTION lease_audit();
TRUNCATE fencelock.lease, fencelock.fence_floor;
