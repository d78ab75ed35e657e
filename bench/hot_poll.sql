-- Row 4: one hot resource, many clients, each polling: try acquire; when refused, sleep :poll ms
-- and try again (the next transaction); when granted, hold the lease :hold us, then release it.
\set owner random(1, 1000000000)
SELECT coalesce(fencelock.acquire('hot', :owner, '30 seconds'), 0) AS fence \gset
\if :fence > 0
\sleep :hold us
SELECT fencelock.release('hot', :owner);
\else
\sleep :poll ms
\endif
