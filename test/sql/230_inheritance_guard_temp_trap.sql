-- Issue 20, defect 4: the inheritance guard (the event trigger fencelock_inheritance_guard)
-- checked every inheritance child in the database after each CREATE TABLE, ALTER TABLE, CREATE
-- TRIGGER and DROP TRIGGER.  A role with nothing but the default TEMP privilege made a temporary
-- parent and child and put fence_trigger on the parent (only a warning): from then on every
-- role's CREATE TABLE, CREATE TEMP TABLE and ALTER TABLE failed, a superuser's (and pg_restore's)
-- too.  The guard now looks only at the tables the command itself touched, and refuses the
-- trigger on such a parent; with check_function_bodies off, as in a restore, it only warns.
\set VERBOSITY terse
CREATE ROLE regress_temp_only;
CREATE ROLE regress_ddl_user;
GRANT CREATE ON SCHEMA public TO regress_ddl_user;

-- The attack, by the role with nothing but TEMP (which PUBLIC has on every database).
SET ROLE regress_temp_only;
CREATE TEMP TABLE trap_parent (id int, last_fence bigint);
CREATE TEMP TABLE trap_child () INHERITS (trap_parent);
-- Refused: the inconsistent state is not made ...
CREATE TRIGGER fence BEFORE UPDATE ON trap_parent FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger();
-- ... unless the role asks for a restore's order (check_function_bodies off): a warning.
SET check_function_bodies = off;
CREATE TRIGGER fence BEFORE UPDATE ON trap_parent FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger();
RESET check_function_bodies;
RESET ROLE;
SELECT c.relname, count(t.oid) AS fence_triggers
  FROM pg_class c LEFT JOIN pg_trigger t ON t.tgrelid = c.oid
 WHERE c.relname IN ('trap_parent', 'trap_child') GROUP BY 1 ORDER BY 1;

-- Another role's DDL is not affected: tables, temporary tables, ALTER TABLE, its own inheritance,
-- its own fence triggers.
SET ROLE regress_ddl_user;
CREATE TABLE ddl_t (id int, last_fence bigint);
ALTER TABLE ddl_t ADD COLUMN v text;
CREATE TEMP TABLE ddl_tmp (id int);
ALTER TABLE ddl_tmp ADD COLUMN v text;
CREATE TABLE ddl_p (id int, last_fence bigint);
CREATE TABLE ddl_c () INHERITS (ddl_p);
ALTER TABLE ddl_c NO INHERIT ddl_p;
ALTER TABLE ddl_c INHERIT ddl_p;
CREATE TRIGGER fence BEFORE UPDATE ON ddl_t FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger();
DROP TRIGGER fence ON ddl_t;
DROP TABLE ddl_c, ddl_p, ddl_t, ddl_tmp;
RESET ROLE;

-- Nor a superuser's.
CREATE TABLE su_t (id int);
ALTER TABLE su_t ADD COLUMN v text;
CREATE TEMP TABLE su_tmp (id int);
ALTER TABLE su_tmp ADD COLUMN v text;
DROP TABLE su_t, su_tmp;

-- The role's own tables: a command that is not about the inheritance passes; the restore's
-- next step, the child's trigger, completes the state.
SET ROLE regress_temp_only;
ALTER TABLE trap_child ADD COLUMN note text;
CREATE TRIGGER fence BEFORE UPDATE ON trap_child FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger();
DROP TABLE trap_child, trap_parent;
RESET ROLE;

REVOKE CREATE ON SCHEMA public FROM regress_ddl_user;
DROP ROLE regress_temp_only, regress_ddl_user;
