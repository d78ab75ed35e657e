# Packages: Debian's (debian/) and PGXN's (META.json).  Included by the top-level Makefile after
# PGXS.  See README's "Packages".
#
#   make deb     postgresql-NN-fencelock for every major debian/pgversions allows that is
#                installed (pg_buildext supported-versions), and fencelock-run, into DEB_OUTDIR
#                (default ./debs): built from a copy of the tree's files, with dpkg-buildpackage
#                (needs debhelper and postgresql-server-dev-all); DEB_BUILD_OPTIONS=nocheck skips
#                the build-time installcheck
#   make dist    fencelock-VERSION.zip, the PGXN release archive: git archive of HEAD with
#                META.json, whose version must be fencelock.control's

DEB_OUTDIR ?= $(CURDIR)/debs
DIST_ARCHIVE = fencelock-$(EXTVERSION).zip

.PHONY: deb dist fl-package-versions

# The versions the packaging states must be fencelock.control's.
fl-package-versions:
	@v=$$(sed -n '1s/^fencelock (\([^)]*\)).*/\1/p' $(srcdir)/debian/changelog); \
	[ "$$v" = '$(EXTVERSION)' ] || { echo "debian/changelog says $$v, fencelock.control $(EXTVERSION)" >&2; exit 1; }
	@v=$$(perl -MJSON::PP -e 'local $$/; print JSON::PP->new->decode(<STDIN>)->{version}' < $(srcdir)/META.json); \
	[ "$$v" = '$(EXTVERSION)' ] || { echo "META.json says $$v, fencelock.control $(EXTVERSION)" >&2; exit 1; }

deb: fl-package-versions
	rm -rf '$(DEB_OUTDIR)/src'
	$(MKDIR_P) '$(DEB_OUTDIR)/src/fencelock-$(EXTVERSION)'
	@# the tree's files (git's list in a checkout; otherwise all but build products)
	if git -C '$(srcdir)' rev-parse --git-dir >/dev/null 2>&1; then \
		(cd '$(srcdir)' && git ls-files -z --cached --others --exclude-standard) | \
			(cd '$(srcdir)' && xargs -0 cp -d --parents -t '$(DEB_OUTDIR)/src/fencelock-$(EXTVERSION)'); \
	else \
		tar -C '$(srcdir)' --exclude='./debs' --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
			--exclude='./results' --exclude='./tmp_check' --exclude='./tmp_check_iso' --exclude='./output_iso' -cf - . | \
			tar -C '$(DEB_OUTDIR)/src/fencelock-$(EXTVERSION)' -xf -; \
	fi
	cd '$(DEB_OUTDIR)/src/fencelock-$(EXTVERSION)' && rm -f bin/fencelock-run bin/fencelock-run.1 && \
		pg_buildext updatecontrol && dpkg-buildpackage -us -uc -b
	mv '$(DEB_OUTDIR)'/src/*.deb '$(DEB_OUTDIR)'/
	rm -rf '$(DEB_OUTDIR)/src'
	@ls '$(DEB_OUTDIR)'/*.deb

dist: fl-package-versions
	git -C '$(srcdir)' rev-parse --git-dir >/dev/null 2>&1 || { echo "make dist needs a git checkout" >&2; exit 1; }
	git -C '$(srcdir)' archive --format=zip --prefix=fencelock-$(EXTVERSION)/ -o '$(CURDIR)/$(DIST_ARCHIVE)' HEAD
	@echo '$(DIST_ARCHIVE)'
