# The SQL fuzzer (test/fuzz): every entry point of the extension, from four roles, with hostile
# arguments, tiny statement timeouts, savepoints and 2PC, its invariants checked as it goes and at
# the end.  Included by the top-level Makefile after PGXS, so $(CC), $(CFLAGS) and $(PG_CONFIG)
# are the server's.  See doc/testing.md, "The fuzzer".
#
#   make fuzz-build   build test/fuzz/fuzz
#   make fuzz         the long run (FUZZ_SECONDS, default 600) against the server named by
#                     PGHOST / PGPORT / PGDATABASE (a superuser; the database has fencelock);
#                     FUZZ_LOG names the server log to scan, extra options in FUZZ_FLAGS
#   test/fuzz/run-short.sh   the short run of the suite (about a minute), same environment

FUZZ_BIN = test/fuzz/fuzz
FUZZ_SRCS = test/fuzz/fuzz.c test/fuzz/session.c test/fuzz/gen.c test/fuzz/check.c test/fuzz/util.c
FUZZ_SECONDS ?= 600
FUZZ_FLAGS ?=
FUZZ_LOG ?=

.PHONY: fuzz fuzz-build clean-fuzz

fuzz-build: $(FUZZ_BIN)

$(FUZZ_BIN): $(FUZZ_SRCS) test/fuzz/fuzz.h
	$(CC) $(CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ $(FUZZ_SRCS) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

fuzz: $(FUZZ_BIN)
	$(FUZZ_BIN) -s $(FUZZ_SECONDS) $(if $(FUZZ_LOG),-l $(FUZZ_LOG)) $(FUZZ_FLAGS)

clean: clean-fuzz

clean-fuzz:
	rm -f $(FUZZ_BIN)
