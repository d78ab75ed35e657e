# fencelock-run (bin/): run a command while holding a lease, renewing it, and stopping the command
# if the lease is lost.  Included by the top-level Makefile after PGXS, so $(CC), $(CFLAGS),
# $(PG_CONFIG), $(bindir) and $(INSTALL_PROGRAM) are the server's.  See doc/fencelock-run.md.
#
#   make              also builds bin/fencelock-run
#   make install      also installs it into $(bindir) (pg_config --bindir)
#   make uninstall / make clean   remove it again

FENCELOCK_RUN = bin/fencelock-run
FENCELOCK_RUN_SRCS = bin/fencelock-run.c bin/flrun_db.c bin/flrun_proc.c bin/flrun_util.c
FENCELOCK_RUN_HDRS = bin/flrun.h

.PHONY: fencelock-run install-fencelock-run uninstall-fencelock-run clean-fencelock-run

all: $(FENCELOCK_RUN)
fencelock-run: $(FENCELOCK_RUN)

$(FENCELOCK_RUN): $(FENCELOCK_RUN_SRCS) $(FENCELOCK_RUN_HDRS) fencelock.control
	$(CC) $(CFLAGS) -I$(shell $(PG_CONFIG) --includedir) \
		-DFENCELOCK_VERSION='"$(EXTVERSION)"' -o $@ $(FENCELOCK_RUN_SRCS) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

install: install-fencelock-run
install-fencelock-run: $(FENCELOCK_RUN)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) $(FENCELOCK_RUN) '$(DESTDIR)$(bindir)/fencelock-run'

uninstall: uninstall-fencelock-run
uninstall-fencelock-run:
	rm -f '$(DESTDIR)$(bindir)/fencelock-run'

clean: clean-fencelock-run
clean-fencelock-run:
	rm -f $(FENCELOCK_RUN)
