// fencelock's Go client. The module path is the project's repository (github.com/fencelock/
// fencelock) and this folder: the GitHub organisation the Java groupId (io.github.fencelock)
// names too, and a path `go get` resolves from the project itself once a tag clients/go/v0.4.0
// exists (the version is the extension's). The package is named fencelock.
module github.com/fencelock/fencelock/clients/go

go 1.19

// The versions Debian 12 packages (golang-github-jackc-pgx-v4-dev 4.15), which it builds with
// offline in GOPATH mode (examples/go/build.sh). With a module proxy: go mod tidy && go test ./...
require (
	github.com/jackc/pgconn v1.11.0
	github.com/jackc/pgx/v4 v4.15.0
)
