# Benchmarks against what users would pick instead (bench/run.sh, doc/bench.md).  Not part of CI.
# Included by the top-level Makefile after PGXS.
#
#   make bench                                   the full run (~14 + ~25 minutes), as root
#   BENCH_ROUNDS=1 BENCH_SECONDS=2 SEED_ROUNDS=1 SEED_SECONDS=2 make bench    smoke run (~6 minutes)
#
# bench/run.sh's rows, then the seed's workload (bench/seed.sh) with the fencelock run.sh built
# and installed.

.PHONY: bench

bench:
	bash bench/run.sh
	SEED_BUILD=0 bash bench/seed.sh

# The seed's workload alone (bench/seed.sh, issue 28): lock a key, write its row with the token,
# release; fencelock against Redis, etcd and ZooKeeper, 2/8/32 clients, durable and CPU. ~25 minutes.
.PHONY: bench-seed
bench-seed:
	bash bench/seed.sh

# Server instructions per operation under callgrind (bench/callgrind.sh): deterministic where the
# wall clock of a shared machine is not.  ~5 minutes.
.PHONY: bench-callgrind
bench-callgrind:
	bash bench/callgrind.sh

# Waiting claim vs polling vs LISTEN/NOTIFY (bench/claim_wait.sh): commit-to-claim latency, 8 workers. ~2 minutes.
.PHONY: bench-claim-wait
bench-claim-wait:
	bash bench/claim_wait.sh

# Hand-offs (bench/handoff.sh): a lease's end (release committed, or expiry) to its waiter's
# acquire returning, p50/p99 over 1 000 hand-offs each. ~1 minute.
.PHONY: bench-handoff
bench-handoff:
	bash bench/handoff.sh

# Server CPU per cycle at 2, 8 and 32 clients, fencelock's cycles beside floors without it, and
# the wait events at 32 clients (bench/scale.sh; doc/bench.md, "What scaled badly"). ~3 minutes.
.PHONY: bench-scale
bench-scale:
	bash bench/scale.sh
