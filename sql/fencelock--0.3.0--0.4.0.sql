-- fencelock 0.3.0 -> 0.4.0: the second hardening round (issue 20).
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.4.0'" to load this file. \quit

-- == after restoring an older pg_dump: every fence from now on above a bound (issue 20) ==
CREATE FUNCTION fencelock.raise_fences(above pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'fencelock_raise_fences'
LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION fencelock.raise_fences(pg_catalog.int8) FROM PUBLIC;
