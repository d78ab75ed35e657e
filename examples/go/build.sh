#!/bin/sh
# Build (and with "test", test) the package and its two programs offline from Debian 12's
# packages: golang-go (1.19) and golang-github-jackc-pgx-v4-dev, which installs pgx v4 and its
# dependencies as GOPATH sources under /usr/share/gocode and no module cache.  So this builds in
# GOPATH mode (GO111MODULE=off): the package goes into a GOPATH of its own at its import path,
# example.com/fencelock, beside /usr/share/gocode.  With a module proxy, build as a module
# instead: go mod tidy && go build -o bin/ ./cmd/... && go test ./...
#
#   sh build.sh [test [go test flags...]]     programs in bin/; GOPATH in $FENCELOCK_GOPATH
#                                             (default: ./.gopath)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gopath=${FENCELOCK_GOPATH:-$here/.gopath}
mkdir -p "$gopath/src/example.com" "$here/bin"
ln -sfn "$here" "$gopath/src/example.com/fencelock"
export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS=
export GOCACHE="${GOCACHE:-$gopath/cache}"
cd "$gopath/src/example.com/fencelock"
go build -o "$here/bin/" example.com/fencelock/cmd/fenced-job example.com/fencelock/cmd/task-worker
if [ "${1:-}" = test ]; then
	shift
	go test "$@" example.com/fencelock
fi
