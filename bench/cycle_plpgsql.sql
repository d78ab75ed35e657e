-- Row 2: the same cycle with the PL/pgSQL implementation of the contract (bench/plpgsql_lease.sql).
\set res random(1, :nrows)
\set owner random(1, 1000000000)
SELECT pllease.acquire(:res, :owner, '30 seconds');
SELECT pllease.release(:res, :owner);
