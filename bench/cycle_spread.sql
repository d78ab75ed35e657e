-- Row 3: the fencelock cycle of row 2 on 1 000 resources (every 1000th key, 1000 .. 1000000),
-- run against a lease table holding only those 1 000 rows, and against one holding 1 000 000.
\set res 1000 * random(1, 1000)
\set owner random(1, 1000000000)
SELECT fencelock.acquire(:res, :owner, '30 seconds');
SELECT fencelock.release(:res, :owner);
