-- Row 1: UPDATE by primary key that carries a fence at least the stored one; PostgreSQL's near-empty suppress_redundant_updates_trigger (bench/callgrind.sh only).
\set id random(1, :nrows)
UPDATE bench_nulltrig SET status = :id, last_fence = last_fence + 1 WHERE id = :id;
