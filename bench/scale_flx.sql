-- The seed's cycle in one statement (README's one-step form).
\set k random(1, 1000)
\set o random(1, 1000000000)
UPDATE scale_fenced SET status = 'x', last_fence = a.f
  FROM (SELECT fencelock.acquire_xact('k' || :k, 'o' || :o) AS f) AS a
 WHERE id = 'k' || :k AND a.f IS NOT NULL;
