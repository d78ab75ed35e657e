-- fencelock 0.2.0 -> 0.3.0: hardening, lease-bound writes.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.3.0'" to load this file. \quit

-- == hardening (issue 10) ==

-- === hardening: leases ===

-- fencelock's functions run their statements as the extension's owner, naming the schema
-- fencelock: a schema owned by another role is refused, as its owner could rename it and plant
-- its own fencelock.lease (with a trigger that reads every owner token).  CREATE EXTENSION runs
-- this script after the 0.1.0 one, so it refuses to install into a schema the installing role
-- does not own; an update of an install in such a schema fails the same way (the 0.3.0 library
-- refuses to run in it anyway), until the schema's owner is changed.
DO $$
DECLARE
    ext_owner pg_catalog.name;
    nsp_owner pg_catalog.name;
    nsp_name  pg_catalog.name;
BEGIN
    SELECT r.rolname, o.rolname, n.nspname INTO ext_owner, nsp_owner, nsp_name
      FROM pg_catalog.pg_extension AS e
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
      JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) e.extowner
      JOIN pg_catalog.pg_roles AS o ON o.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE e.extname OPERATOR(pg_catalog.=) 'fencelock';
    IF nsp_owner OPERATOR(pg_catalog.<>) ext_owner THEN
        RAISE EXCEPTION 'schema "%" is owned by role "%", not by role "%", the owner of extension "fencelock"',
                        nsp_name, nsp_owner, ext_owner
              USING ERRCODE = 'object_not_in_prerequisite_state',
                    DETAIL = 'The owner of the schema could rename it or create objects in it, and fencelock runs its statements as the extension''s owner.',
                    HINT = pg_catalog.format('Run ALTER SCHEMA %I OWNER TO %I as a superuser, then try again.',
                                             nsp_name, ext_owner);
    END IF;
END
$$;

-- == lease-bound writes (issue 11) ==
