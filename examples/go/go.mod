module example.com/fencelock

go 1.19

// The versions Debian 12 packages (golang-github-jackc-pgx-v4-dev 4.15); build.sh builds with
// those offline, in GOPATH mode. With a module proxy instead: go mod tidy && go build ./...
require (
	github.com/jackc/pgconn v1.11.0
	github.com/jackc/pgx/v4 v4.15.0
)
