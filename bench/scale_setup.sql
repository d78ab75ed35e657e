-- bench/scale.sh: 1 000 business rows with the fence trigger, the same without it, and a table of
-- the lease table's layout for the floor (three bare transactions per cycle).
CREATE TABLE scale_fenced (id text PRIMARY KEY, status text, last_fence bigint NOT NULL DEFAULT 0)
    WITH (fillfactor = 70);
CREATE TRIGGER fence BEFORE UPDATE ON scale_fenced FOR EACH ROW
    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
CREATE TABLE scale_plain (id text PRIMARY KEY, status text, last_fence bigint NOT NULL DEFAULT 0)
    WITH (fillfactor = 70);
CREATE TABLE scale_floor (LIKE fencelock.lease INCLUDING ALL) WITH (fillfactor = 70);
INSERT INTO scale_fenced (id) SELECT 'k' || g FROM generate_series(1, 1000) AS g;
INSERT INTO scale_plain (id) SELECT 'k' || g FROM generate_series(1, 1000) AS g;
INSERT INTO scale_floor (resource, fence) SELECT 'k' || g, 1 FROM generate_series(1, 1000) AS g;
VACUUM ANALYZE;
