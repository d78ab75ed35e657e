// Command lease-holder: the program the fault scenarios of doc/clients.md drive. It acquires
// --resource as --owner for --ttl seconds (connection settings from the PG* variables, with
// application_name set to the owner token; waiting up to --wait seconds), then holds the lease
// for --hold seconds while the library renews it: waiting on the lease's context, or with --query
// running a statement that long (pg_sleep) on the lease's connection, which the lease's context
// cancels; a statement whose connection broke while the lease held is run again for the time
// left (a "work:" line). Lines on stdout:
//
//	acquired R with fence N at EPOCH_MS
//	busy                                   (exit 2)
//	lost at EPOCH_MS: ErrLeaseLost: ...    (exit 3)
//	held; released: true|false            (exit 0)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	fencelock "github.com/fencelock/fencelock/clients/go"
)

func main() {
	resource := flag.String("resource", "fault", "the lease")
	owner := flag.String("owner", "", "the owner token (also the application_name)")
	ttl := flag.Float64("ttl", 3, "lease seconds; renewed every ttl/3")
	wait := flag.Float64("wait", 0, "seconds to wait for the lease")
	hold := flag.Float64("hold", 10, "seconds to hold the lease")
	query := flag.Bool("query", false, "hold it running a statement, cancelled on loss")
	flag.Parse()
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	ms := func() int64 { return time.Now().UnixNano() / int64(time.Millisecond) }
	os.Setenv("PGAPPNAME", *owner)
	lost := func(err error) {
		kind := fmt.Sprintf("%T", err)
		if errors.Is(err, fencelock.ErrLeaseLost) {
			kind = "ErrLeaseLost"
		}
		fmt.Printf("lost at %d: %s: %v\n", ms(), kind, err)
	}

	ctx := context.Background()
	lease, err := fencelock.Acquire(ctx, "", *resource, fencelock.Options{Owner: *owner, TTL: secs(*ttl), Wait: secs(*wait)})
	if errors.Is(err, fencelock.ErrBusy) {
		fmt.Println("busy")
		os.Exit(2)
	} else if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Printf("acquired %s with fence %d at %d\n", *resource, lease.Fence(), ms())
	if *query {
		end := time.Now().Add(secs(*hold))
		for left := time.Until(end); left > 0; left = time.Until(end) {
			_, err = lease.Exec(ctx, "SELECT pg_catalog.pg_sleep($1)", left.Seconds())
			if err == nil || errors.Is(err, fencelock.ErrLeaseLost) {
				break
			}
			// The connection broke and the lease was renewed meanwhile (else this would be
			// ErrLeaseLost): go on, on a new connection.
			fmt.Printf("work: %v; the lease holds, again\n", err)
			err = nil
		}
	} else {
		t := time.NewTimer(secs(*hold))
		select {
		case <-lease.Context().Done(): // the loss, as Go delivers it
			err = lease.Err()
		case <-t.C:
		}
	}
	if err != nil {
		lost(err)
	}
	released, rerr := lease.Release(ctx)
	if err != nil {
		os.Exit(3) // the loss stands, whatever the release did
	}
	if rerr != nil {
		fmt.Println("error: release:", rerr)
		os.Exit(1)
	}
	fmt.Printf("held; released: %v\n", released)
}
