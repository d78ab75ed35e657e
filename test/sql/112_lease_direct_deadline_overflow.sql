-- The grant's statement (store/rule.c, GRANT_WHERE_V2) adds a lease's lock_delay to its deadline only
-- when the row is held by another owner: a free row, or one of the same owner, is grantable
-- before that sum is evaluated.  The direct path (src/store/row.c) must evaluate the rule in the
-- same order: a row whose deadline plus lock_delay is out of range (written by hand or restored)
-- must still be granted to the same owner, or when free, instead of raising an error.
\set VERBOSITY terse
TRUNCATE fencelock.lease, fencelock.fence_floor;
INSERT INTO fencelock.lease (resource, owner, fence, expires_at, lock_delay) VALUES
  ('far-free', NULL, 1, '294276-12-20', '1 mon'),
  ('far-same', 'me', 1, '294276-12-20', '1 mon'),
  ('far-other', 'other', 1, '294276-12-20', '1 mon');
SELECT fencelock.acquire('far-free', 'me', '1 hour') AS fence;
SELECT fencelock.acquire('far-same', 'me', '1 hour') AS same_fence;
-- Another owner's row needs the sum, as in the statement.
SELECT fencelock.acquire('far-other', 'me', '1 hour') AS fence;
SELECT resource, owner, fence FROM fencelock.lease ORDER BY resource;
TRUNCATE fencelock.lease, fencelock.fence_floor;
