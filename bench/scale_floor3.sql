-- Three bare transactions per cycle, without fencelock: the grant's UPDATE committed
-- synchronously, the business UPDATE, the release's UPDATE.
\set k random(1, 1000)
\set o random(1, 1000000000)
BEGIN;
SELECT set_config('synchronous_commit', 'on', true);
UPDATE scale_floor SET owner = 'o' || :o, fence = fence + 1, expires_at = now() + '30 s' WHERE resource = 'k' || :k;
COMMIT;
UPDATE scale_plain SET status = 'x', last_fence = last_fence + 1 WHERE id = 'k' || :k;
UPDATE scale_floor SET owner = NULL WHERE resource = 'k' || :k AND owner = 'o' || :o;
