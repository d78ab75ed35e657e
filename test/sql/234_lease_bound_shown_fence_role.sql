-- Issue 35, shown fences remembered without their role: a transaction's lease-bound writes and
-- assert_fence remember the fence shown per lease, and a later write under the lease with that
-- fence skipped the resource privilege check and the holder check, whatever role made it.  An
-- app-owned SECURITY DEFINER function writing under 'job-1' (a prefix reserved to app) let the
-- caller, mallory, then insert into the table herself in the same transaction; alone her insert
-- is refused.  The entry now remembers the role the checks passed for; another role is checked
-- again.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
CREATE ROLE regress_sr_app;
CREATE ROLE regress_sr_worker IN ROLE regress_sr_app;
CREATE ROLE regress_sr_mallory;
SELECT fencelock.grant_resources('job-', 'regress_sr_app') AS granted;
CREATE TABLE sr_jobs (id int, who text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON sr_jobs FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=job-1');
CREATE TABLE sr_open (id int, who text, fence bigint);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON sr_open FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease=open-1');
GRANT ALL ON sr_jobs, sr_open TO regress_sr_app, regress_sr_mallory;
CREATE FUNCTION sr_app_write(f bigint) RETURNS void LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, public
    AS $$ INSERT INTO public.sr_jobs VALUES (1, 'app', f) $$;
ALTER FUNCTION sr_app_write(bigint) OWNER TO regress_sr_app;
GRANT EXECUTE ON FUNCTION sr_app_write(bigint) TO regress_sr_mallory;
SET ROLE regress_sr_app;
SELECT fencelock.acquire('job-1', 'app', '1 hour') AS job_fence \gset
SELECT fencelock.acquire('open-1', 'app', '1 hour') AS open_fence \gset
INSERT INTO sr_open VALUES (1, 'app', :open_fence);
RESET ROLE;

-- The reproducer: alone, mallory's insert is refused ...
SET ROLE regress_sr_mallory;
INSERT INTO sr_jobs VALUES (2, 'mallory', :job_fence);
-- ... and after the app's function wrote under the lease in her transaction, still refused.
BEGIN;
SELECT sr_app_write(:job_fence);
INSERT INTO sr_jobs VALUES (2, 'mallory', :job_fence);
COMMIT;
-- Her DELETE after the app's write is refused the same way (it shows no fence of its own).
BEGIN;
SELECT sr_app_write(:job_fence);
DELETE FROM sr_jobs;
COMMIT;
RESET ROLE;

-- assert_fence then a write as another role (SET ROLE inside one transaction): refused for a
-- role without the resource privilege, and for one that is not a member of the holder.
BEGIN;
SET ROLE regress_sr_app;
SELECT fencelock.assert_fence('job-1', :job_fence);
SET ROLE regress_sr_mallory;
INSERT INTO sr_jobs VALUES (3, 'mallory', :job_fence);
ROLLBACK;
BEGIN;
SET ROLE regress_sr_app;
SELECT fencelock.assert_fence('open-1', :open_fence);
SET ROLE regress_sr_mallory;
INSERT INTO sr_open VALUES (3, 'mallory', :open_fence);
ROLLBACK;
BEGIN;
SET ROLE regress_sr_app;
SELECT fencelock.assert_fence('open-1', :open_fence);
SET ROLE regress_sr_mallory;
DELETE FROM sr_open;
ROLLBACK;

-- A member of the holder passes the checks run again; the role that showed the fence keeps its
-- entry after another role's check, and a savepoint rolled back after that check does not take
-- the first role's row lock with it.
BEGIN;
SET ROLE regress_sr_app;
SELECT fencelock.assert_fence('job-1', :job_fence);
SET ROLE regress_sr_worker;
INSERT INTO sr_jobs VALUES (4, 'worker', :job_fence);
SAVEPOINT s;
SET ROLE regress_sr_app;
INSERT INTO sr_jobs VALUES (5, 'app', :job_fence);
ROLLBACK TO SAVEPOINT s;
SET ROLE regress_sr_app;
DELETE FROM sr_jobs WHERE id = 4;
INSERT INTO sr_jobs VALUES (6, 'app', :job_fence);
COMMIT;
RESET ROLE;
SELECT id, who FROM sr_jobs ORDER BY id;
SELECT id, who FROM sr_open ORDER BY id;

-- Clean up.
DROP FUNCTION sr_app_write(bigint);
DROP TABLE sr_jobs, sr_open;
SELECT fencelock.revoke_resources('job-', 'regress_sr_app') AS revoked;
TRUNCATE fencelock.lease, fencelock.fence_floor;
DROP ROLE regress_sr_worker, regress_sr_app, regress_sr_mallory;
