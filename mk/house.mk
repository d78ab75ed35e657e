# make check-house: the house rules on this build (scripts/check-house.pl: calls and includes go
# down the folder order, no writable global shared, no call cycle, no needless export, no file
# over 1000 lines, one owner of the shared-memory hooks), then each rule seen failing on a planted
# violation (scripts/check-house-selftest.sh).  Both run; it fails if either does.  scripts/test.sh
# runs the same two after its build.  Included by the top-level Makefile after PGXS.

.PHONY: check-house

check-house: all
	@s=0; perl $(srcdir)/scripts/check-house.pl . $(srcdir) || s=1; \
	PG_CONFIG=$(PG_CONFIG) bash $(srcdir)/scripts/check-house-selftest.sh . $(srcdir) || s=1; \
	exit $$s
