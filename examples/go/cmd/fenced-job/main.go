// Command fenced-job: one worker at a time runs it; a paused worker's late writes are refused.
// The table and the exit statuses are those of examples/python/fenced_job.py:
//
//	CREATE TABLE report_runs (resource text PRIMARY KEY, step integer, written_by text,
//	                          last_fence bigint);
//	CREATE TRIGGER fence BEFORE UPDATE ON report_runs FOR EACH ROW
//	    EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
//	INSERT INTO report_runs (resource) VALUES ('report:daily');
//
//	bin/fenced-job --name worker-a --ttl 30 --steps 5 --work 2
//	bin/fenced-job --name worker-a --ttl 30 --steps 1 --one-step
//
// --one-step runs the job as fencelock.Step (one transaction, no watchdog), with --hold-file and
// --fail-at as in examples/python/fenced_job.py; exit 5 when the job failed (nothing committed).
//
// Connection settings come from PG* environment variables. Exit status: 0 done, 2 busy, 3 lease
// lost (the watchdog stopped the work), 4 stale fence (a write was refused with FL001).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	fencelock "github.com/fencelock/fencelock/clients/go"
	"github.com/jackc/pgx/v4"
)

var errJobFailed = errors.New("job failed")

func main() {
	resource := flag.String("resource", "report:daily", "the lease")
	name := flag.String("name", "worker", "the worker's name")
	ttl := flag.Float64("ttl", 30, "lease seconds; renewed every ttl/3")
	wait := flag.Float64("wait", 0, "seconds to wait for the lease")
	steps := flag.Int("steps", 5, "steps to write")
	work := flag.Float64("work", 1, "seconds of work after each write")
	oneStep := flag.Bool("one-step", false, "one transaction, no watchdog")
	holdFile := flag.String("hold-file", "", "--one-step: before committing, wait until this exists")
	failAt := flag.Int("fail-at", 0, "--one-step: fail after this step")
	flag.Parse()
	say := func(format string, a ...interface{}) { fmt.Printf(*name+": "+format+"\n", a...) }
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	suffix := make([]byte, 16)
	if _, err := rand.Read(suffix); err != nil {
		panic(err)
	}

	owner := *name + ":" + hex.EncodeToString(suffix)
	if *oneStep {
		ctx := context.Background()
		err := fencelock.Step(ctx, "", *resource, fencelock.Options{Owner: owner, TTL: secs(*ttl), Wait: secs(*wait)},
			func(c *pgx.Conn, fence int64) error {
				say("acquired %s with fence %d", *resource, fence)
				for step := 1; step <= *steps; step++ {
					if _, err := c.Exec(ctx, "UPDATE report_runs SET step = $1, written_by = $2, last_fence = $3 WHERE resource = $4",
						step, *name, fence, *resource); err != nil {
						return err
					}
					say("step %d written with fence %d", step, fence)
					if step == *failAt {
						return fmt.Errorf("%w: failed after step %d", errJobFailed, step)
					}
					time.Sleep(secs(*work)) // idle in the transaction: past the TTL the server ends it
				}
				for *holdFile != "" {
					if _, err := os.Stat(*holdFile); err == nil {
						break
					}
					if _, err := c.Exec(ctx, "SELECT pg_catalog.pg_sleep(0.1)"); err != nil {
						return err
					}
				}
				return nil
			})
		var fe *fencelock.Error
		errors.As(err, &fe)
		switch {
		case err == nil:
			say("done; released: true")
		case errors.Is(err, fencelock.ErrBusy):
			say("busy: %s", fe.Message)
			os.Exit(2)
		case errors.Is(err, fencelock.ErrLeaseLost):
			say("lease lost, nothing committed: %s", fe.Message)
			os.Exit(3)
		case errors.Is(err, fencelock.ErrStaleFence):
			say("stale fence, nothing committed: %s", fe.Message)
			os.Exit(4)
		case errors.Is(err, errJobFailed):
			say("failed, nothing committed: %s", err)
			os.Exit(5)
		default:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	lease, err := fencelock.Acquire(context.Background(), "", *resource, fencelock.Options{
		Owner: owner, TTL: secs(*ttl), Wait: secs(*wait)})
	if errors.Is(err, fencelock.ErrBusy) {
		say("busy: %s", err.(*fencelock.Error).Message)
		os.Exit(2)
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	say("acquired %s with fence %d", *resource, lease.Fence())
	status, outcome := 0, "done"
	for step := 1; step <= *steps && err == nil; step++ {
		// Every write carries the fence: after a takeover it is refused (ErrStaleFence).
		_, err = lease.Exec(lease.Context(),
			"UPDATE report_runs SET step = $1, written_by = $2, last_fence = $3 WHERE resource = $4",
			step, *name, lease.Fence(), *resource)
		if err == nil {
			say("step %d written with fence %d", step, lease.Fence())
			err = lease.Sleep(secs(*work)) // the work; returns at once if the lease is lost
		}
	}
	var fe *fencelock.Error
	switch {
	case err == nil:
	case errors.Is(err, fencelock.ErrLeaseLost) && errors.As(err, &fe):
		status, outcome = 3, "lease lost, work stopped: "+fe.Message
	case errors.Is(err, fencelock.ErrStaleFence) && errors.As(err, &fe):
		status, outcome = 4, "stale fence, stopped: "+fe.Message
	default:
		lease.Release(context.Background())
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	released, rerr := lease.Release(context.Background())
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "release:", rerr)
	}
	say("%s; released: %t", outcome, released)
	os.Exit(status)
}
