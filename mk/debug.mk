# The suites on PostgreSQL's debugging builds (scripts/debug-run.sh; doc/testing.md says how long
# each takes).  Not part of CI.  Included by the top-level Makefile after PGXS.
#
#   make valgrind         regression + isolation suites, the server under memcheck
#   make discard-caches   the regression suite with debug_discard_caches = 1
#   FL_TESTS="301_claim lease_paused_holder" make valgrind    only these

.PHONY: valgrind discard-caches

valgrind discard-caches:
	bash scripts/debug-run.sh $@ $(FL_TESTS)
