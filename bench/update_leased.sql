-- Row 1: the same UPDATE by primary key on a lease-bound table: it carries the lease's latest fence
-- (1, granted by bench/setup.sql), which the C fence_trigger checks against the lease row, locked
-- once per transaction.  status counts the updates (bench/run.sh checks its sum).
\set id random(1, :nrows)
UPDATE bench_leased SET status = status + 1, last_fence = 1 WHERE id = :id;
