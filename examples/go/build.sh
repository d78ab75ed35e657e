#!/bin/sh
# Build the programs (fenced-job, task-worker, lease-holder) against the fencelock module, and
# with "test" run the module's tests, offline from Debian 12's packages: golang-go (1.19) and
# golang-github-jackc-pgx-v4-dev, which installs pgx v4 and its dependencies as GOPATH sources
# under /usr/share/gocode and no module cache.  So this builds in GOPATH mode (GO111MODULE=off):
# the module's folder (clients/go) goes into a GOPATH of its own at its module path,
# github.com/fencelock/fencelock/clients/go, beside /usr/share/gocode, and the programs import it
# by that path as any program would.  With a module proxy, build as modules instead (go.mod here
# requires the module and replaces it with ../../clients/go): go mod tidy && go build -o bin/ ./cmd/...
#
#   sh build.sh [test [go test flags...]]     programs in bin/; GOPATH in $FENCELOCK_GOPATH
#                                             (default: ./.gopath)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
module=$(cd "$here/../../clients/go" && pwd)
gopath=${FENCELOCK_GOPATH:-$here/.gopath}
mkdir -p "$gopath/src/github.com/fencelock/fencelock/clients" "$here/bin"
ln -sfn "$module" "$gopath/src/github.com/fencelock/fencelock/clients/go"
export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS=
export GOCACHE="${GOCACHE:-$gopath/cache}"
cd "$here"
for p in fenced-job task-worker lease-holder; do
	go build -o "$here/bin/$p" "./cmd/$p"
done
if [ "${1:-}" = test ]; then
	shift
	cd "$gopath/src/github.com/fencelock/fencelock/clients/go"
	go test "$@" .
fi
