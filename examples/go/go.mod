// The example programs, a module of their own that uses the fencelock module like any program.
// Offline (Debian's pgx in GOPATH mode): sh build.sh. With a module proxy: go mod tidy && go build ./cmd/...
module github.com/fencelock/fencelock/examples/go

go 1.19

require github.com/fencelock/fencelock/clients/go v0.4.0

replace github.com/fencelock/fencelock/clients/go => ../../clients/go
