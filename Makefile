# fencelock — PGXS build.  Variables first, then PGXS, then our own targets.
EXTENSION  = fencelock
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" fencelock.control)

MODULE_big = fencelock
OBJS = \
	src/fencelock.o \
	src/exec.o \
	src/lease.o \
	src/key.o \
	src/trigger.o \
	src/shmem.o \
	src/wait.o \
	src/history.o \
	src/claim.o \
	src/leasebound.o \
	src/mergeguard.o \
	src/session.o \
	src/notify.o \
	src/revoke.o \
	src/taskwait.o

DATA = $(wildcard sql/fencelock--*.sql)

# Regression tests: test/sql/NAME.sql, expected output in expected/NAME.out
# (test/expected is a link to it: PostgreSQL 15's pg_regress has no --expecteddir).
REGRESS = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=fencelock
ISOLATION = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=fencelock
TAP_TESTS = 1

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS resets PROVE_FLAGS; set ours afterwards.
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))
PROVE_FLAGS += -I $(CURDIR)/test/perl

# Helpers, benchmarks and tools each bring a fragment.
include $(sort $(wildcard mk/*.mk))

.PHONY: format
format:
	clang-format -i src/*.c src/*.h
