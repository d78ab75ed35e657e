// Command task-worker: claim, heartbeat, checkpoint carrying the fence, complete or fail. The
// table, the options and the output are those of examples/python/task_worker.py (the
// walkthrough table of doc/claim.md; fail() needs a last_error column):
//
//	bin/task-worker --table tasks --name worker-a --steps 12 --step-time 1 --exit-when-idle
//
// A write refused with FL001 (fencelock.ErrStaleFence) means another worker has the job now: the
// worker drops it at once and claims the next. Ids starting with "bad-" fail at their second step.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	fencelock "github.com/fencelock/fencelock/clients/go"
	"github.com/jackc/pgx/v4"
)

var (
	table      = flag.String("table", "tasks", "the task table")
	name       = flag.String("name", "worker", "the worker's name (the claims' owner)")
	ttl        = flag.Float64("ttl", 30, "lease seconds; heartbeat every ttl/3")
	steps      = flag.Int("steps", 12, "steps of a job")
	stepTime   = flag.Float64("step-time", 1, "seconds per step")
	exitIdle   = flag.Bool("exit-when-idle", false, "exit when no row is claimable")
	ctx        = context.Background()
	conn       *pgx.Conn
	quotedName string
)

func say(format string, a ...interface{}) { fmt.Printf(*name+": "+format+"\n", a...) }

// exec runs one statement, FL001/FL002 translated.
func exec(sql string, args ...interface{}) error {
	_, err := conn.Exec(ctx, sql, args...)
	return fencelock.Translate(err)
}

func work(job string, checkpoint *string, fence int64) error {
	step := 0
	if checkpoint != nil {
		step, _ = strconv.Atoi(strings.SplitN(*checkpoint, "-", 2)[1])
	}
	beat := time.Now()
	for step < *steps {
		time.Sleep(time.Duration(*stepTime * float64(time.Second))) // the work
		step++
		if strings.HasPrefix(job, "bad-") && step == 2 {
			return fmt.Errorf("cannot process %s", job)
		}
		if err := exec("UPDATE "+quotedName+" SET checkpoint = $1, fence = $2 WHERE id = $3",
			fmt.Sprintf("step-%d", step), fence, job); err != nil {
			return err
		}
		say("checkpoint step-%d", step)
		if time.Since(beat).Seconds() >= *ttl/3 {
			var ok bool
			err := conn.QueryRow(ctx, "SELECT fencelock.heartbeat($1::pg_catalog.regclass, $2::pg_catalog.text, $3, "+
				"pg_catalog.make_interval(secs => $4))", *table, job, fence, *ttl).Scan(&ok)
			if err != nil {
				return fencelock.Translate(err)
			}
			if !ok {
				return &fencelock.Error{Kind: fencelock.ErrLeaseLost.Kind, Message: job + " is not running any more"}
			}
			beat = time.Now()
		}
	}
	// The result and the completion in one transaction.
	return fencelock.Translate(conn.BeginFunc(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE "+quotedName+" SET result = $1, fence = $2 WHERE id = $3",
			*name+"'s result", fence, job); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT fencelock.complete($1::pg_catalog.regclass, $2::pg_catalog.text, $3)",
			*table, job, fence)
		return err
	}))
}

func main() {
	flag.Parse()
	quotedName = pgx.Identifier(strings.Split(*table, ".")).Sanitize()
	var err error
	if conn, err = pgx.Connect(ctx, ""); err != nil { // PG* variables; autocommit
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	for {
		var job string
		var checkpoint *string
		var fence int64
		// Autocommit: a claim's fence is valid once the claim has committed.
		err := conn.QueryRow(ctx, "SELECT id, checkpoint, fence FROM fencelock.claim(NULL::"+quotedName+
			", $1, pg_catalog.make_interval(secs => $2))", *name, *ttl).Scan(&job, &checkpoint, &fence)
		if errors.Is(err, pgx.ErrNoRows) {
			if *exitIdle {
				say("no job left")
				return
			}
			time.Sleep(time.Second)
			continue
		} else if err != nil {
			fmt.Fprintln(os.Stderr, fencelock.Translate(err))
			os.Exit(1)
		}
		cp := "null"
		if checkpoint != nil {
			cp = *checkpoint
		}
		say("claimed %s with fence %d, checkpoint %s", job, fence, cp)
		err = work(job, checkpoint, fence)
		var fe *fencelock.Error
		if err != nil && !errors.Is(err, fencelock.ErrStaleFence) && !errors.Is(err, fencelock.ErrLeaseLost) {
			// The work failed: ready again (or dead at max_attempts).
			var state string
			ferr := conn.QueryRow(ctx, "SELECT fencelock.fail($1::pg_catalog.regclass, $2::pg_catalog.text, $3, $4)",
				*table, job, fence, err.Error()).Scan(&state)
			if ferr == nil {
				say("failed %s: %s; now %s", job, err, state)
				continue
			}
			err = fencelock.Translate(ferr) // FL001 here too: taken over
		}
		switch {
		case err == nil:
			say("completed %s", job)
		case errors.As(err, &fe):
			say("dropped %s: %s: %s", job, fe.Kind, fe.Message) // taken over: never retry it
		default:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
