-- Row 4: one hot resource, many clients, each waiting in acquire (up to 5 s) until the lease is
-- free; when granted, hold the lease :hold us, then release it.
\set owner random(1, 1000000000)
SELECT coalesce(fencelock.acquire('hot', :owner, '30 seconds', '5 seconds'), 0) AS fence \gset
\if :fence > 0
\sleep :hold us
SELECT fencelock.release('hot', :owner);
\endif
