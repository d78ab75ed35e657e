-- Row 2: a lease cycle with fencelock: the grant (its own transaction, committed synchronously by
-- acquire itself), then the compare-and-release in a second transaction.  A random resource among
-- :nrows, a fresh owner token per cycle.
\set res random(1, :nrows)
\set owner random(1, 1000000000)
SELECT fencelock.acquire(:res, :owner, '30 seconds');
SELECT fencelock.release(:res, :owner);
