# Chaos harness (test/chaos): workers take short leases, are frozen with SIGSTOP past them,
# write with their fence, and the run is audited.  Included by the top-level Makefile after
# PGXS, so $(CC), $(CFLAGS) and $(PG_CONFIG) are the server's.  See doc/chaos.md.
#
#   make chaos        build test/chaos/chaos
#   make chaos-long   the long run (CHAOS_LONG_SECONDS, default 600) against the server named
#                     by PGHOST / PGPORT / PGDATABASE; extra options in CHAOS_FLAGS
#   test/chaos/run-short.sh   the short run (< 60 s), same environment

CHAOS_BIN = test/chaos/chaos
CHAOS_SRCS = test/chaos/chaos.c test/chaos/worker.c test/chaos/audit.c test/chaos/util.c
CHAOS_LONG_SECONDS ?= 600
CHAOS_FLAGS ?=

.PHONY: chaos chaos-long clean-chaos

chaos: $(CHAOS_BIN)

$(CHAOS_BIN): $(CHAOS_SRCS) test/chaos/chaos.h
	$(CC) $(CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ $(CHAOS_SRCS) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

chaos-long: $(CHAOS_BIN)
	$(CHAOS_BIN) -s $(CHAOS_LONG_SECONDS) $(CHAOS_FLAGS)

clean: clean-chaos

clean-chaos:
	rm -f $(CHAOS_BIN)
