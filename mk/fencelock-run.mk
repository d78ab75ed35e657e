# fencelock-run (bin/): run a command while holding a lease, renewing it, and stopping the command
# if the lease is lost.  Included by the top-level Makefile after PGXS, so $(CC), $(CFLAGS),
# $(PG_CONFIG), $(bindir) and $(INSTALL_PROGRAM) are the server's.  See doc/fencelock-run.md.
#
#   make              also builds bin/fencelock-run
#   make install      also installs it into $(bindir) (pg_config --bindir), and its man page, and
#                     links both into /usr/local (FENCELOCK_RUN_LINKDIR) for login shells
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

# (the sources by their VPATH-found names, $^: out of the tree they live in $(srcdir))
$(FENCELOCK_RUN): $(FENCELOCK_RUN_SRCS) $(FENCELOCK_RUN_HDRS) fencelock.control
	@$(MKDIR_P) $(@D)
	$(CC) $(CFLAGS) -I$(shell $(PG_CONFIG) --includedir) \
		-DFENCELOCK_VERSION='"$(EXTVERSION)"' -o $@ $(filter %.c,$^) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq

$(FENCELOCK_RUN_MAN): doc/fencelock-run.md scripts/md2man.pl fencelock.control
	@$(MKDIR_P) $(@D)
	perl $(filter %.pl,$^) fencelock-run 1 $(EXTVERSION) < $< > $@.tmp && mv $@.tmp $@

# A login shell's PATH has no per-major bindir (Debian's /usr/lib/postgresql/NN/bin): make install
# also links the tool into FENCELOCK_RUN_LINKDIR/bin and its page into
# FENCELOCK_RUN_LINKDIR/share/man/man1 (default /usr/local: on every login PATH and man-db's
# manpath), when that directory is writable and no DESTDIR is given (a package installs it into
# /usr/bin itself: debian/).  FENCELOCK_RUN_LINKDIR= installs no links.
FENCELOCK_RUN_LINKDIR ?= /usr/local

install: install-fencelock-run
install-fencelock-run: $(FENCELOCK_RUN) $(FENCELOCK_RUN_MAN)
	$(MKDIR_P) '$(DESTDIR)$(bindir)' '$(DESTDIR)$(FENCELOCK_RUN_MANDIR)'
	$(INSTALL_PROGRAM) $(FENCELOCK_RUN) '$(DESTDIR)$(bindir)/fencelock-run'
	$(INSTALL_DATA) $(FENCELOCK_RUN_MAN) '$(DESTDIR)$(FENCELOCK_RUN_MANDIR)/fencelock-run.1'
	@l='$(FENCELOCK_RUN_LINKDIR)'; \
	if [ -n "$$l" ] && [ -z '$(DESTDIR)' ] && [ '$(bindir)' != "$$l/bin" ]; then \
		if [ -w "$$l/bin" ] && mkdir -p "$$l/share/man/man1" 2>/dev/null; then \
			ln -sf '$(bindir)/fencelock-run' "$$l/bin/fencelock-run" && \
			ln -sf "$$(cd '$(FENCELOCK_RUN_MANDIR)' && pwd)/fencelock-run.1" "$$l/share/man/man1/fencelock-run.1" && \
			echo "fencelock-run: linked into $$l/bin and $$l/share/man/man1"; \
		else echo "fencelock-run: $$l/bin not writable: add $(bindir) to PATH"; fi; \
	fi

uninstall: uninstall-fencelock-run
uninstall-fencelock-run:
	rm -f '$(DESTDIR)$(bindir)/fencelock-run' '$(DESTDIR)$(FENCELOCK_RUN_MANDIR)/fencelock-run.1'
	@l='$(FENCELOCK_RUN_LINKDIR)'; \
	if [ -n "$$l" ] && [ -z '$(DESTDIR)' ] && [ "$$(readlink "$$l/bin/fencelock-run")" = '$(bindir)/fencelock-run' ]; then \
		rm -f "$$l/bin/fencelock-run" "$$l/share/man/man1/fencelock-run.1"; fi

clean: clean-fencelock-run
clean-fencelock-run:
	rm -f $(FENCELOCK_RUN) $(FENCELOCK_RUN_MAN)
