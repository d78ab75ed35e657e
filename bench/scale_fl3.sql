-- The seed's cycle as three transactions: acquire; the fenced UPDATE; release.
\set k random(1, 1000)
\set o random(1, 1000000000)
SELECT COALESCE(fencelock.acquire('k' || :k, 'o' || :o, '30 seconds'), 0) AS f \gset
UPDATE scale_fenced SET status = 'x', last_fence = :f WHERE id = 'k' || :k AND :f > 0;
SELECT fencelock.release('k' || :k, 'o' || :o, :f);
