-- One transaction per cycle: the business UPDATE alone (what Redis + PG asks of PostgreSQL).
\set k random(1, 1000)
\set t random(1, 1000000000)
UPDATE scale_plain SET status = 'x', last_fence = :t WHERE id = 'k' || :k AND last_fence < :t;
