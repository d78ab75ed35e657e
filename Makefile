# fencelock — PGXS build.  Variables first, then PGXS, then our own targets.
#
# Out of the tree (VPATH, as pg_buildext builds: debian/): from an empty directory,
#   make -f /path/to/fencelock/Makefile [VPATH=/path/to/fencelock] PG_CONFIG=...
# PGXS sets srcdir ("." in the tree); every path below names the source through it, and the
# objects go to src/ and bin/ of the build directory.
EXTENSION  = fencelock
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(srcdir)/fencelock.control)

MODULE_big = fencelock
# src/ is the assembly (_PG_init, the shared-memory hooks, the headers every part shares); each
# folder below it is a layer, and calls and includes only go down the list (src/README.md,
# scripts/check-house.pl): lease and claim, then fence, store, wait, observe, base.
FL_FOLDERS = lease claim fence store wait observe base
OBJS = \
	src/fencelock.o \
	src/shmem.o \
	src/ddl.o \
	$(patsubst $(srcdir)/%.c,%.o,$(sort $(foreach d,$(FL_FOLDERS),$(wildcard $(srcdir)/src/$(d)/*.c))))

# The version the library reports (PostgreSQL 18's pg_get_loaded_modules()).
PG_CPPFLAGS += -DFENCELOCK_VERSION='"$(EXTVERSION)"'
# Every project include names its folder from src/: #include "store/rule.h".
PG_CPPFLAGS += -I$(srcdir)/src

DATA = $(patsubst $(srcdir)/%,%,$(wildcard $(srcdir)/sql/fencelock--*.sql))

# Regression tests: test/sql/NAME.sql, expected output in expected/NAME.out
# (test/expected is a link to it: PostgreSQL 15's pg_regress has no --expecteddir).
# A test whose name ends in _pgNN (e.g. 221_merge_returning_pg17) needs PostgreSQL NN or later:
# it is left out on older majors.  MAJORVERSION comes from PGXS below; REGRESS is expanded later.
fl_min_major = $(patsubst pg%,%,$(filter pg1% pg2% pg3%,$(lastword $(subst _, ,$(1)))))
fl_on_major = $(if $(call fl_min_major,$(1)),$(if $(filter $(call fl_min_major,$(1)),$(firstword \
	$(sort $(call fl_min_major,$(1)) $(MAJORVERSION)))),$(1)),$(1))
REGRESS = $(foreach t,$(sort $(basename $(notdir $(wildcard $(srcdir)/test/sql/*.sql)))),$(call fl_on_major,$(t)))
REGRESS_OPTS = --inputdir=$(srcdir)/test --load-extension=fencelock
ISOLATION = $(sort $(basename $(notdir $(wildcard $(srcdir)/test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=$(srcdir)/test --load-extension=fencelock
# installcheck needs no running server: pg_regress starts a temporary instance of the installed
# one (initdb, then its own socket directory) with test/fencelock.conf's settings (the library
# preloaded), as pg_cron's tests do.  Run it as any user but root, who may write here (initdb
# refuses root): runuser -u postgres -- make installcheck.  FL_TEMP_PORT=N: the instance's port
# (pg_regress picks one otherwise).  FL_USE_RUNNING=1: the running server PGHOST/PGPORT name
# instead, started with test/fencelock.conf (scripts/test.sh's cluster, Debian's pg_virtualenv).
ifndef FL_USE_RUNNING
fl_temp_opts = --temp-config=$(srcdir)/test/fencelock.conf $(if $(FL_TEMP_PORT),--port=$(FL_TEMP_PORT))
REGRESS_OPTS += --temp-instance=./tmp_check $(fl_temp_opts)
ISOLATION_OPTS += --temp-instance=./tmp_check_iso $(fl_temp_opts)
endif
TAP_TESTS = 1

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# Without PGXS the first target would be a tool's (mk/*.mk): stop instead.
ifeq ($(wildcard $(PGXS)),)
$(error no PGXS from "$(PG_CONFIG) --pgxs": install the server headers (bash scripts/pg.sh 15) or set PG_CONFIG)
endif
include $(PGXS)

# PGXS resets PROVE_FLAGS; set ours afterwards.  PROVE_JOBS=N runs N TAP files at a time.
# (prove runs in srcdir: PGXS's prove_installcheck changes into it.)
PROVE_TESTS = $(patsubst $(srcdir)/%,%,$(sort $(wildcard $(srcdir)/test/t/*.pl)))
PROVE_FLAGS += -I $(abspath $(srcdir))/test/perl $(if $(PROVE_JOBS),-j $(PROVE_JOBS))

# The temporary instance's initdb refuses root: say so before pg_regress starts it.
ifndef FL_USE_RUNNING
installcheck: fl-not-root
.PHONY: fl-not-root
fl-not-root:
	@if [ "$$(id -u)" -eq 0 ]; then \
		echo "make installcheck starts a server of its own, which root may not: run it as a user who may write here (runuser -u postgres -- make installcheck), or with FL_USE_RUNNING=1 against a server started with test/fencelock.conf" >&2; \
		exit 1; \
	fi
endif

# Out of the tree: the build directory's src/ and bin/ for the objects.
ifdef VPATH
$(OBJS) $(OBJS:.o=.bc): | fl-build-dirs
.PHONY: fl-build-dirs
fl-build-dirs:
	@$(MKDIR_P) src $(addprefix src/,$(FL_FOLDERS)) bin
endif

# Helpers, benchmarks and tools each bring a fragment.
include $(sort $(wildcard $(srcdir)/mk/*.mk))

.PHONY: format
format:
	clang-format -i src/*.[ch] $(foreach d,$(FL_FOLDERS),src/$(d)/*.[ch])
