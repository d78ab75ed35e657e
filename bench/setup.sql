-- Tables of the benchmark (doc/bench.md).  Loaded once into a throwaway database by bench/run.sh,
-- after CREATE EXTENSION fencelock and bench/plpgsql_lease.sql.  :nrows is the number of rows
-- (and of resources) the UPDATE and acquire + release rows pick from at random.

-- Row 1: the same table three times, with the C fence trigger, without any trigger, and with the
-- same check written as a PL/pgSQL trigger.  Only the primary key is indexed: every UPDATE is HOT.
CREATE TABLE bench_plain (id int PRIMARY KEY, status int NOT NULL, last_fence bigint)
    WITH (fillfactor = 70);
CREATE TABLE bench_fenced (LIKE bench_plain INCLUDING ALL) WITH (fillfactor = 70);
CREATE TABLE bench_plfenced (LIKE bench_plain INCLUDING ALL) WITH (fillfactor = 70);
-- (bench/callgrind.sh only) the same table with PostgreSQL's own, nearly empty C trigger: what any
-- BEFORE ROW UPDATE trigger costs before its function does anything.
CREATE TABLE bench_nulltrig (LIKE bench_plain INCLUDING ALL) WITH (fillfactor = 70);
CREATE TRIGGER noop BEFORE UPDATE ON bench_nulltrig FOR EACH ROW
    EXECUTE FUNCTION suppress_redundant_updates_trigger();

CREATE TRIGGER fence BEFORE UPDATE ON bench_fenced FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');

-- (row 1) the same table bound to one lease: every write must carry the lease's latest fence.
CREATE TABLE bench_leased (LIKE bench_plain INCLUDING ALL) WITH (fillfactor = 70);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON bench_leased FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=bench-leased');
INSERT INTO fencelock.lease (resource, owner, fence, acquired_at, expires_at, holder)
    VALUES ('bench-leased', 'bench', 1, now(), now() + interval '1 day', current_user);

-- fence_trigger's check in PL/pgSQL: NULL fence (FL002), fence older than the stored one (FL001).
-- (PL/pgSQL cannot see which columns the UPDATE assigned, so fence_trigger's "UPDATE without the
-- fence column" FL002 check has no counterpart here; that only makes this contender cheaper.)
CREATE FUNCTION bench_fence_plpgsql() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last_fence IS NULL THEN
        RAISE EXCEPTION 'update of table "%" carries no fence', TG_TABLE_NAME
            USING ERRCODE = 'FL002';
    END IF;
    IF NEW.last_fence < OLD.last_fence THEN
        RAISE EXCEPTION 'fence % is older than the stored fence %', NEW.last_fence, OLD.last_fence
            USING ERRCODE = 'FL001';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER fence BEFORE UPDATE ON bench_plfenced FOR EACH ROW
    EXECUTE FUNCTION bench_fence_plpgsql();

INSERT INTO bench_plain SELECT i, 0, 1 FROM generate_series(1, :nrows) AS i;
INSERT INTO bench_fenced SELECT * FROM bench_plain;
INSERT INTO bench_plfenced SELECT * FROM bench_plain;
INSERT INTO bench_nulltrig SELECT * FROM bench_plain;
INSERT INTO bench_leased SELECT * FROM bench_plain;

-- Row 2, the floor: fencelock.lease's layout, updated by two bare UPDATEs by primary key.
CREATE TABLE bench_floor (LIKE pllease.lease INCLUDING ALL) WITH (fillfactor = 70);

-- The same :nrows resources, released, in every lease table: the steady state where a resource
-- has been used before.
INSERT INTO fencelock.lease (resource, owner, fence, acquired_at, expires_at, holder)
    SELECT i::text, NULL, 1, now(), now(), NULL FROM generate_series(1, :nrows) AS i;
INSERT INTO pllease.lease (resource, owner, fence, acquired_at, expires_at, holder)
    SELECT resource, owner, fence, acquired_at, expires_at, holder FROM fencelock.lease
     WHERE owner IS NULL; -- not row 1's bench-leased, held for the whole run
INSERT INTO bench_floor SELECT * FROM pllease.lease;

VACUUM ANALYZE;
