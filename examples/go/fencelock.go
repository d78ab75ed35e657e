// Package fencelock uses fencelock from Go (pgx v4): a lease with a watchdog whose Context is
// cancelled when the lease is lost, and typed fencing errors.
//
//	lease, err := fencelock.Acquire(ctx, "", "report:daily", fencelock.Options{TTL: 30 * time.Second})
//	if errors.Is(err, fencelock.ErrBusy) { ... }        // another owner holds it
//	defer lease.Release(context.Background())
//	for _, part := range parts {
//		_, err := lease.Exec(ctx, "UPDATE reports SET done = $1, last_fence = $2 WHERE id = 1",
//			part, lease.Fence())
//		// errors.Is(err, fencelock.ErrStaleFence): FL001 after a takeover;
//		// errors.Is(err, fencelock.ErrLeaseLost): the watchdog lost the lease
//		work(lease.Context(), part) // cancelled when the lease is lost
//	}
//
// The lease is taken by Acquire (ErrBusy when another owner holds it) and renewed every ttl/3 by
// a goroutine on its own connection; when a renewal fails or finds the lease gone, Context() is
// cancelled, so pgx cancels the statement the work is running on Conn() (and closes that
// connection: the lease is over anyway). Release releases it and closes both connections.
package fencelock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

// Error is fencelock's error: Kind names it, SQLState is the server's when it raised one, Err
// the driver's error. errors.Is(err, ErrStaleFence) and the like match it by Kind.
type Error struct {
	Kind     string // StaleFence, Unfenced, Busy, LeaseLost
	SQLState string
	Message  string
	Err      error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "fencelock: " + e.Kind
	}
	return "fencelock: " + e.Kind + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel errors below by Kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

var (
	// ErrStaleFence (FL001): a newer holder exists. Roll back and stop; never retry with the same fence.
	ErrStaleFence = &Error{Kind: "StaleFence", SQLState: "FL001"}
	// ErrUnfenced (FL002): the write did not carry a fence (a bug in the caller).
	ErrUnfenced = &Error{Kind: "Unfenced", SQLState: "FL002"}
	// ErrBusy: acquire returned NULL, another owner holds a live lease.
	ErrBusy = &Error{Kind: "Busy"}
	// ErrLeaseLost: the watchdog could not renew the lease; stop the work.
	ErrLeaseLost = &Error{Kind: "LeaseLost"}
)

// Translate returns FL001 and FL002 from pgx as *Error (ErrStaleFence, ErrUnfenced) wrapping the
// *pgconn.PgError; any other error (and nil) as it is.
func Translate(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	for _, s := range []*Error{ErrStaleFence, ErrUnfenced} {
		if pe.Code == s.SQLState {
			return &Error{Kind: s.Kind, SQLState: s.SQLState, Message: pe.Message, Err: err}
		}
	}
	return err
}

// Options of Acquire. Owner defaults to the resource and a random suffix: the owner token is what
// renews and releases, keep it unguessable. TTL defaults to 30 s, renewed every TTL/3; Wait (0:
// do not wait) is how long Acquire queues for the lease.
type Options struct {
	Owner string
	TTL   time.Duration
	Wait  time.Duration
}

// Lease is a held fencelock lease.
type Lease struct {
	resource, owner string
	ttl             time.Duration
	fence           int64
	work, wd        *pgx.Conn
	ctx             context.Context
	cancel          context.CancelFunc
	stop            chan struct{}
	done            chan struct{}
	mu              sync.Mutex
	lost            error
	released        *bool
}

// Acquire takes the lease on resource (connString "" means the PG* environment variables, as in
// libpq), opening two connections: the work's (Conn) and the watchdog's. ctx bounds the
// connecting and the wait, and is the parent of Context().
func Acquire(ctx context.Context, connString, resource string, o Options) (*Lease, error) {
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	if o.Owner == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		o.Owner = resource + ":" + hex.EncodeToString(b)
	}
	wd, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, err
	}
	work, err := pgx.Connect(ctx, connString)
	if err != nil {
		wd.Close(context.Background())
		return nil, err
	}
	var fence *int64 // autocommit: the fence is valid once the grant has committed
	err = wd.QueryRow(ctx, "SELECT fencelock.acquire($1, $2, pg_catalog.make_interval(secs => $3), "+
		"pg_catalog.make_interval(secs => $4))", resource, o.Owner, o.TTL.Seconds(), o.Wait.Seconds()).Scan(&fence)
	if err == nil && fence == nil {
		err = &Error{Kind: ErrBusy.Kind, Message: resource + " is held by another owner"}
	}
	if err != nil {
		work.Close(context.Background())
		wd.Close(context.Background())
		return nil, Translate(err)
	}
	l := &Lease{resource: resource, owner: o.Owner, ttl: o.TTL, fence: *fence, work: work, wd: wd,
		stop: make(chan struct{}), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(ctx)
	go l.watch()
	return l, nil
}

// Fence is the fence to carry in every write to a fenced table (or to pass to assert_fence).
func (l *Lease) Fence() int64 { return l.fence }

// Owner is the owner token the lease was taken with.
func (l *Lease) Owner() string { return l.owner }

// Conn is the work's connection (autocommit unless the work begins a transaction). Pass
// Context(), or a context derived from it, to its calls.
func (l *Lease) Conn() *pgx.Conn { return l.work }

// Context is cancelled when the lease is lost (or released, or Acquire's ctx ends).
func (l *Lease) Context() context.Context { return l.ctx }

// Err is nil while the lease is held, an *Error of kind LeaseLost once the watchdog lost it.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Sleep waits d (pacing, or work elsewhere), returning ErrLeaseLost at once when the lease is lost.
func (l *Lease) Sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return l.Err()
	case <-l.ctx.Done():
		if err := l.Err(); err != nil {
			return err
		}
		return l.ctx.Err()
	}
}

// Exec runs a statement on the work's connection until ctx or the lease ends, FL001/FL002
// translated; ErrLeaseLost when the lease is lost, also when that cancelled the statement.
func (l *Lease) Exec(ctx context.Context, sql string, args ...interface{}) (pgconn.CommandTag, error) {
	if err := l.Err(); err != nil {
		return nil, err
	}
	ctx, stop := l.bound(ctx)
	defer stop()
	tag, err := l.work.Exec(ctx, sql, args...)
	if err != nil {
		if lost := l.Err(); lost != nil {
			return nil, &Error{Kind: ErrLeaseLost.Kind, Message: lost.(*Error).Message, Err: err}
		}
		return nil, Translate(err)
	}
	return tag, nil
}

// bound: ctx, also cancelled when the lease's context is.
func (l *Lease) bound(ctx context.Context) (context.Context, func()) {
	if ctx == nil || ctx == l.ctx {
		return l.ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-l.ctx.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (l *Lease) watch() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		why := ""
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3+time.Second)
		ok, err := l.leaseCall(ctx, true)
		cancel()
		switch {
		case err != nil:
			why = "renewal failed: " + err.Error()
		case !ok:
			why = "the lease expired or was taken over"
		}
		if why != "" {
			l.mu.Lock()
			l.lost = &Error{Kind: ErrLeaseLost.Kind, Message: why}
			l.mu.Unlock()
			l.cancel() // pgx cancels the work's running statement, if any
			return
		}
	}
}

// leaseCall: renew (the watchdog's) or release (Release's) on the watchdog's connection, naming
// this grant's fence: a late call (a retry after a lost response) cannot renew or release a newer
// grant of the same owner.
func (l *Lease) leaseCall(ctx context.Context, renew bool) (bool, error) {
	sql, args := "SELECT fencelock.release($1, $2", []interface{}{l.resource, l.owner}
	if renew {
		sql, args = "SELECT fencelock.renew($1, $2, pg_catalog.make_interval(secs => $3)", append(args, l.ttl.Seconds())
	}
	sql, args = sql+fmt.Sprintf(", $%d::pg_catalog.int8", len(args)+1), append(args, l.fence)
	var ok *bool
	if err := l.wd.QueryRow(ctx, sql+")", args...).Scan(&ok); err != nil {
		return false, err
	}
	return ok != nil && *ok, nil
}

// Release stops the watchdog, releases the lease and closes both connections. released is false
// when the lease had been lost (not an error); err is a failure to reach the server. Calling it
// again returns the first answer.
func (l *Lease) Release(ctx context.Context) (released bool, err error) {
	l.mu.Lock()
	if l.released != nil {
		defer l.mu.Unlock()
		return *l.released, nil
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	released, err = l.leaseCall(ctx, false) // false when the lease had been lost
	l.cancel()
	l.work.Close(ctx)
	l.wd.Close(ctx)
	l.mu.Lock()
	l.released = &released
	l.mu.Unlock()
	return released, err
}

// Step runs a one-step job (take the lock, write rows carrying the fence, release) as one
// transaction on a connection of its own (connString "" means the PG* environment variables),
// without a watchdog:
//
//	err := fencelock.Step(ctx, "", "report:daily", fencelock.Options{TTL: 30 * time.Second},
//		func(c *pgx.Conn, fence int64) error {
//			_, err := c.Exec(ctx, "UPDATE reports SET total = total + 1, last_fence = $1 WHERE id = 1", fence)
//			return err
//		})
//
// BEGIN; SET LOCAL idle_in_transaction_session_timeout = TTL; acquire; fn's writes (carry the
// fence); release and COMMIT in one round trip (a pgx Batch). The open transaction keeps the
// grant's row locked, so no other owner gets the lease before it ends (a try-once acquire answers
// NULL, a waiting one waits), also past the TTL; grant, writes and release commit or vanish
// together. A step idle in its transaction for longer than the TTL (a paused process) is ended by
// the server: its writes roll back, the lease is free again, and Step returns ErrLeaseLost.
// ErrBusy when another owner holds the lease (after Wait); FL001/FL002 as ErrStaleFence/
// ErrUnfenced; on any error (also fn's, returned as it is) the transaction is rolled back.
func Step(ctx context.Context, connString, resource string, o Options, fn func(c *pgx.Conn, fence int64) error) error {
	c, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return StepConn(ctx, c, resource, o, fn)
}

// StepConn is Step on c, a connection outside a transaction. fn runs on c inside the
// transaction and must not commit or roll back.
func StepConn(ctx context.Context, c *pgx.Conn, resource string, o Options, fn func(c *pgx.Conn, fence int64) error) (err error) {
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	if o.Owner == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		o.Owner = resource + ":" + hex.EncodeToString(b)
	}
	committing := false
	defer func() {
		if err == nil {
			return
		}
		if !committing && ctx.Err() == nil && sessionEnded(c, err) {
			err = &Error{Kind: ErrLeaseLost.Kind, Message: "the session ended before the step committed: " + err.Error(), Err: err}
			return
		}
		if !c.IsClosed() {
			c.Exec(context.Background(), "ROLLBACK")
		}
		err = Translate(err)
	}()
	ms := o.TTL.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	// BEGIN (READ COMMITTED unless the session says otherwise) and the acquire in one round trip.
	// The timeout only counts while the session is idle in the transaction, so it can be set in
	// the acquire's statement.
	start := &pgx.Batch{}
	start.Queue("BEGIN")
	start.Queue("SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', $1, true), "+
		"fencelock.acquire($2, $3, pg_catalog.make_interval(secs => $4), pg_catalog.make_interval(secs => $5))",
		fmt.Sprint(ms), resource, o.Owner, o.TTL.Seconds(), o.Wait.Seconds())
	var fence *int64
	var timeout string
	br := c.SendBatch(ctx, start)
	if _, err = br.Exec(); err == nil {
		err = br.QueryRow().Scan(&timeout, &fence)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if fence == nil {
		return &Error{Kind: ErrBusy.Kind, Message: resource + " is held by another owner"}
	}
	if err = fn(c, *fence); err != nil {
		return err
	}
	committing = true
	b := &pgx.Batch{} // the release and the COMMIT in one round trip
	b.Queue("SELECT fencelock.release($1, $2, $3::pg_catalog.int8)", resource, o.Owner, *fence)
	b.Queue("COMMIT")
	br = c.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// sessionEnded: the server ended the session (idle past the TTL, a terminate, a broken
// connection).
func sessionEnded(c *pgx.Conn, err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Severity == "FATAL" {
		return true
	}
	return c.IsClosed()
}
