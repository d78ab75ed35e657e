-- Issue 10, sibling of finding 4 (install-time schema takeover), in claim: the fence trigger was
-- recognised by the name fencelock.fence_trigger, which a schema planted under the name fencelock
-- redirects.  claim now recognises the trigger by its C function (the library's
-- fencelock_fence_trigger symbol), whatever its name; enable_tasks names the function by the
-- extension's own schema; and the reads of fencelock.task_tables refuse to run when the name
-- fencelock no longer leads to the extension's schema.
\set VERBOSITY terse
CREATE TABLE tq (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0);
SELECT fencelock.enable_tasks('tq');
INSERT INTO tq (id) VALUES (1), (2);
-- The real schema renamed and another planted under its name, with a fence_trigger that fences
-- nothing; the table's trigger replaced by one calling the planted function.
ALTER SCHEMA fencelock RENAME TO fencelock_real;
CREATE SCHEMA fencelock;
CREATE FUNCTION fencelock.fence_trigger() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RETURN NEW; END $$;
CREATE OR REPLACE TRIGGER fencelock_fence BEFORE UPDATE ON tq FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence');
-- Neither claim nor enable_tasks runs against the planted schema.
SELECT id FROM fencelock_real.claim(NULL::tq, 'w-1');
SELECT fencelock_real.enable_tasks('tq');
DROP SCHEMA fencelock CASCADE;
ALTER SCHEMA fencelock_real RENAME TO fencelock;
-- Names restored: the planted function is gone with its schema, and so is the trigger (the wake
-- trigger enable_tasks made calls the extension's own function, and stays).
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'tq'::regclass AND NOT tgisinternal
   AND tgname NOT LIKE 'fencelock\_wake%';
SELECT id FROM fencelock.claim(NULL::tq, 'w-1');
-- A trigger function elsewhere that is not the fence trigger does not count, even by that name.
CREATE SCHEMA other;
CREATE FUNCTION other.fence_trigger() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER fencelock_fence BEFORE UPDATE ON tq FOR EACH ROW
    EXECUTE FUNCTION other.fence_trigger('fence');
SELECT id FROM fencelock.claim(NULL::tq, 'w-1');
-- The same C function under another name does: it is the fence trigger.
CREATE FUNCTION other.my_fence() RETURNS trigger LANGUAGE c
    AS '$libdir/fencelock', 'fencelock_fence_trigger';
CREATE OR REPLACE TRIGGER fencelock_fence BEFORE UPDATE ON tq FOR EACH ROW
    EXECUTE FUNCTION other.my_fence('fence');
SELECT id, fence FROM fencelock.claim(NULL::tq, 'w-1');
UPDATE tq SET state = 'done', fence = 0 WHERE id = 1;
-- enable_tasks puts back the extension's own function.
SELECT fencelock.enable_tasks('tq');
SELECT tgfoid = 'fencelock.fence_trigger'::regproc AS extension_function
  FROM pg_trigger WHERE tgrelid = 'tq'::regclass AND tgname = 'fencelock_fence';
DROP TABLE tq;
DROP SCHEMA other CASCADE;
-- Only a C function whose symbol is fencelock_fence_trigger is loaded to find out whether it is
-- the fence trigger (fence/trigger.c's fl_is_fence_trigger, which claim shares since issue 21; claim's
-- own copy loaded every C row trigger on the fence column): a C trigger function that cannot be
-- loaded stops neither enable_tasks nor claim.  This one fires only when note is assigned.
CREATE TABLE tg (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, note text);
CREATE FUNCTION public.ghost_trigger() RETURNS trigger LANGUAGE c
    AS '$libdir/fencelock', 'fencelock_task_wake';
UPDATE pg_catalog.pg_proc SET prosrc = 'fencelock_no_such_symbol'
 WHERE oid = 'public.ghost_trigger'::regproc;
CREATE TRIGGER a_ghost BEFORE UPDATE OF note ON tg FOR EACH ROW
    EXECUTE FUNCTION public.ghost_trigger('fence');
SELECT fencelock.enable_tasks('tg');
INSERT INTO tg (id) VALUES (1);
SELECT id, fence FROM fencelock.claim(NULL::tg, 'w-1');
SELECT fencelock.complete('tg', 1, 1);
DROP TABLE tg;
DROP FUNCTION public.ghost_trigger();
-- Issue 21: a fence trigger with a column list (UPDATE OF) fires only when a listed column is
-- assigned, so a stale holder's write that assigns none would pass unchecked: it does not count
-- as the table's fence trigger, as the inheritance guard does not count one (231).  (Since issue
-- 35 such a fence trigger is refused at CREATE TRIGGER, and created again without the list where
-- check_function_bodies is off, 232: made here with the event trigger disabled.)
CREATE TABLE tu (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready', lease_owner text,
                 lease_until timestamptz, attempt int NOT NULL DEFAULT 0,
                 fence bigint NOT NULL DEFAULT 0, note text);
SELECT fencelock.enable_tasks('tu');
INSERT INTO tu (id) VALUES (1);
ALTER EVENT TRIGGER fencelock_inheritance_guard DISABLE;
CREATE OR REPLACE TRIGGER fencelock_fence BEFORE UPDATE OF note ON tu FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('fence');
ALTER EVENT TRIGGER fencelock_inheritance_guard ENABLE;
SELECT id, fence FROM fencelock.claim(NULL::tu, 'w-1');
-- enable_tasks puts the whole trigger back.
SELECT fencelock.enable_tasks('tu');
SELECT id, fence FROM fencelock.claim(NULL::tu, 'w-1');
DROP TABLE tu;
