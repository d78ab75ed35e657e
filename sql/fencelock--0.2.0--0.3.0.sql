-- fencelock 0.2.0 -> 0.3.0: hardening, lease-bound writes.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.3.0'" to load this file. \quit

-- == hardening (issue 10) ==

-- == lease-bound writes (issue 11) ==

-- Inheritance children are written through their parent without firing the parent's row
-- triggers, so a child without the parent's fence_trigger would be a way around it (partitions
-- are not: they get the parent's row triggers as clones).  After each command that can make an
-- inheritance child, or drop a trigger, no child of a table guarded by fence_trigger may lack a
-- trigger with the same events and arguments.  Adding the trigger to a parent whose children lack
-- it only warns: pg_restore creates the parent's trigger before the children's.
CREATE FUNCTION fencelock.inheritance_guard() RETURNS pg_catalog.event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    FOR v IN
        SELECT pt.tgname, i.inhparent::pg_catalog.regclass AS parent,
               i.inhrelid::pg_catalog.regclass AS child
          FROM pg_catalog.pg_trigger AS pt
          JOIN pg_catalog.pg_inherits AS i ON i.inhparent OPERATOR(pg_catalog.=) pt.tgrelid
          JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE pt.tgfoid OPERATOR(pg_catalog.=) 'fencelock.fence_trigger()'::pg_catalog.regprocedure
           AND NOT c.relispartition
           AND NOT EXISTS (
               SELECT FROM pg_catalog.pg_trigger AS ct
                WHERE ct.tgrelid OPERATOR(pg_catalog.=) i.inhrelid
                  AND ct.tgfoid OPERATOR(pg_catalog.=) pt.tgfoid
                  AND ct.tgtype OPERATOR(pg_catalog.=) pt.tgtype
                  AND ct.tgargs OPERATOR(pg_catalog.=) pt.tgargs)
         ORDER BY 2, 3
    LOOP
        IF TG_TAG OPERATOR(pg_catalog.=) 'CREATE TRIGGER' THEN
            RAISE WARNING 'inheritance child "%" of table "%" lacks its fence trigger "%"',
                v.child, v.parent, v.tgname
                USING DETAIL = 'Rows of an inheritance child written through the parent do not '
                               'fire the parent''s row triggers.',
                      HINT = 'Create the same trigger on the child.';
        ELSE
            RAISE EXCEPTION 'inheritance child "%" of table "%" lacks its fence trigger "%"',
                v.child, v.parent, v.tgname
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'Rows of an inheritance child written through the parent do not '
                               'fire the parent''s row triggers, so the child would bypass the '
                               'fence.',
                      HINT = 'Create the child without INHERITS, give it the same trigger, then '
                             'ALTER TABLE ... INHERIT; or use declarative partitioning, whose '
                             'partitions get the trigger automatically.';
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION fencelock.inheritance_guard() FROM PUBLIC;

CREATE EVENT TRIGGER fencelock_inheritance_guard ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE TRIGGER', 'DROP TRIGGER')
    EXECUTE FUNCTION fencelock.inheritance_guard();
