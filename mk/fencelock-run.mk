# fencelock-run (bin/): run a command while holding a lease, renewing it, and stopping the command
# if the lease is lost.  Included by the top-level Makefile after PGXS, so $(CC), $(CFLAGS),
# $(PG_CONFIG), $(bindir) and $(INSTALL_PROGRAM) are the server's.  See doc/fencelock-run.md.
#
#   make              also builds bin/fencelock-run
#   make install      also installs it into $(bindir) (pg_config --bindir), and its man page
#   make uninstall / make clean   remove it again

FENCELOCK_RUN = bin/fencelock-run
FENCELOCK_RUN_SRCS = bin/fencelock-run.c bin/flrun_db.c bin/flrun_proc.c bin/flrun_util.c
FENCELOCK_RUN_HDRS = bin/flrun.h
# The man page, generated from the manual; installed where man(1) looks for the pages of programs
# found on PATH (BINDIR/../share/man), so `man fencelock-run` works wherever fencelock-run does.
FENCELOCK_RUN_MAN = bin/fencelock-run.1
FENCELOCK_RUN_MANDIR = $(bindir)/../share/man/man1

.PHONY: fencelock-run install-fencelock-run uninstall-fencelock-run clean-fencelock-run

all: $(FENCELOCK_RUN) $(FENCELOCK_RUN_MAN)
fencelock-run: $(FENCELOCK_RUN)

$(FENCELOCK_RUN): $(FENCELOCK_RUN_SRCS) $(FENCELOCK_RUN_HDRS) fencelock.control
	$(CC) $(CFLAGS) -I$(shell $(PG_CONFIG) --includedir) \
		-DFENCELOCK_VERSION='"$(EXTVERSION)"' -o $@ $(FENCELOCK_RUN_SRCS) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

$(FENCELOCK_RUN_MAN): doc/fencelock-run.md scripts/md2man.pl fencelock.control
	perl scripts/md2man.pl fencelock-run 1 $(EXTVERSION) < $< > $@.tmp && mv $@.tmp $@

install: install-fencelock-run
install-fencelock-run: $(FENCELOCK_RUN) $(FENCELOCK_RUN_MAN)
	$(MKDIR_P) '$(DESTDIR)$(bindir)' '$(DESTDIR)$(FENCELOCK_RUN_MANDIR)'
	$(INSTALL_PROGRAM) $(FENCELOCK_RUN) '$(DESTDIR)$(bindir)/fencelock-run'
	$(INSTALL_DATA) $(FENCELOCK_RUN_MAN) '$(DESTDIR)$(FENCELOCK_RUN_MANDIR)/fencelock-run.1'

uninstall: uninstall-fencelock-run
uninstall-fencelock-run:
	rm -f '$(DESTDIR)$(bindir)/fencelock-run' '$(DESTDIR)$(FENCELOCK_RUN_MANDIR)/fencelock-run.1'

clean: clean-fencelock-run
clean-fencelock-run:
	rm -f $(FENCELOCK_RUN) $(FENCELOCK_RUN_MAN)
