-- Row 1: UPDATE by primary key that carries a fence at least the stored one; the PL/pgSQL trigger checks it.
\set id random(1, :nrows)
UPDATE bench_plfenced SET status = :id, last_fence = last_fence + 1 WHERE id = :id;
