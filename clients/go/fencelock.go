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
// a goroutine on its own connection, keeping the lease contract of doc/clients.md: each renewal
// (connecting included) has a context deadline at the local deadline, when the grant or last
// successful renewal was sent plus the ttl (less a margin of a tenth of it, at most 1 s); a
// renewal that fails is retried on a new connection, naming the fence, until then; when it
// passes, or a renewal finds the lease gone, Context() is cancelled, so pgx cancels the statement
// the work is running on Conn() (and closes that connection: the lease is over anyway). Release
// releases it and closes both connections.
package fencelock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
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
// renews and releases, keep it unguessable; it is made once per lease and reused by the lease's
// own retries. TTL defaults to 30 s, renewed every TTL/3; Wait (0: do not wait) is how long
// Acquire queues for the lease.
type Options struct {
	Owner string
	TTL   time.Duration
	Wait  time.Duration
}

const retryEvery = 100 * time.Millisecond

// Lease is a held fencelock lease.
type Lease struct {
	connString, resource, owner string
	ttl, margin                 time.Duration
	fence                       int64
	ctx                         context.Context
	cancel                      context.CancelFunc
	stop, done, poke            chan struct{}
	mu                          sync.Mutex
	work, wd                    *pgx.Conn     // wd: only the watchdog goroutine (and Release after it)
	sentAt                      time.Time     // when the grant or last successful renewal was sent
	renewed                     chan struct{} // closed and replaced on each successful renewal
	lost                        error
	released                    *bool
	renewals, reconnections     int
}

// Acquire takes the lease on resource (connString "" means the PG* environment variables, as in
// libpq), opening two connections: the work's (Conn) and the watchdog's. ctx bounds the
// connecting and the wait, and is the parent of Context(). An acquire whose connection breaks
// before its answer arrives (the reply was lost) is sent again on a new connection with the same
// owner token, which fencelock answers with the same fence, for up to Wait + TTL.
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
	margin := o.TTL / 10
	if margin > time.Second {
		margin = time.Second
	}
	l := &Lease{connString: connString, resource: resource, owner: o.Owner, ttl: o.TTL, margin: margin,
		stop: make(chan struct{}), done: make(chan struct{}), poke: make(chan struct{}, 1),
		renewed: make(chan struct{})}
	if err := l.take(ctx, o.Wait); err != nil {
		if l.wd != nil {
			l.wd.Close(context.Background())
		}
		return nil, err
	}
	work, err := pgx.Connect(ctx, connString)
	if err != nil {
		l.wd.Close(context.Background())
		return nil, err
	}
	l.work = work
	l.ctx, l.cancel = context.WithCancel(ctx)
	go l.watch()
	return l, nil
}

func (l *Lease) take(ctx context.Context, wait time.Duration) error {
	budget := time.Now().Add(wait + l.ttl)
	per := wait + l.ttl/3
	if per < wait+time.Second {
		per = wait + time.Second
	}
	for {
		actx, cancel := context.WithDeadline(ctx, earliest(time.Now().Add(per), budget))
		fence, sent, err := l.tryAcquire(actx, wait)
		cancel()
		if err == nil && fence == nil {
			return &Error{Kind: ErrBusy.Kind, Message: l.resource + " is held by another owner"}
		}
		if err == nil {
			l.fence, l.sentAt = *fence, sent
			if time.Since(sent) > l.ttl/3 {
				return l.renewLateGrant(ctx)
			}
			return nil
		}
		if ctx.Err() != nil || !connectionLost(err) || time.Now().Add(retryEvery).After(budget) {
			return Translate(err)
		}
		l.dropWatchConn()
		l.reconnections++
		time.Sleep(retryEvery)
	}
}

// renewLateGrant: a grant that came long after its request was sent (it waited) has a deadline,
// counted from the request, (nearly) spent, though the grant is recent. Renewed at once, bounded
// by the TTL, so the deadline counts from this renewal.
func (l *Lease) renewLateGrant(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, l.ttl)
	defer cancel()
	ok, err := l.leaseCall(rctx, true)
	if err == nil && !ok {
		err = &Error{Kind: ErrLeaseLost.Kind, Message: "granted after a long wait, expired before its first renewal"}
	}
	return err
}

// tryAcquire: the fence (nil: busy) and when the acquire was sent (the deadline counts from
// there, not from the connecting).
func (l *Lease) tryAcquire(ctx context.Context, wait time.Duration) (*int64, time.Time, error) {
	if err := l.watchConn(ctx); err != nil {
		return nil, time.Time{}, err
	}
	var fence *int64 // autocommit: the fence is valid once the grant has committed
	sent := time.Now()
	err := l.wd.QueryRow(ctx, "SELECT fencelock.acquire($1, $2, pg_catalog.make_interval(secs => $3), "+
		"pg_catalog.make_interval(secs => $4))", l.resource, l.owner, l.ttl.Seconds(), wait.Seconds()).Scan(&fence)
	return fence, sent, err
}

// Fence is the fence to carry in every write to a fenced table (or to pass to assert_fence).
func (l *Lease) Fence() int64 { return l.fence }

// Owner is the owner token the lease was taken with.
func (l *Lease) Owner() string { return l.owner }

// Conn is the work's connection (autocommit unless the work begins a transaction). Pass
// Context(), or a context derived from it, to its calls. After it broke, Exec opens a new one.
func (l *Lease) Conn() *pgx.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.work
}

// Context is cancelled when the lease is lost (or released, or Acquire's ctx ends).
func (l *Lease) Context() context.Context { return l.ctx }

// Deadline is the local deadline: when the grant or the last successful renewal was sent, plus
// the TTL, less a margin (a tenth of the TTL, at most 1 s) for scheduling and clock drift.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sentAt.Add(l.ttl - l.margin)
}

// Renewals and Reconnections count the successful renewals, and the connections the lease opened
// again after one broke.
func (l *Lease) Renewals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

func (l *Lease) Reconnections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reconnections
}

// Err is nil while the lease is held, an *Error of kind LeaseLost once it is lost.
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

// Exec runs a statement on the work's connection (a new one if it broke) until ctx or the lease
// ends, FL001/FL002 translated; ErrLeaseLost when the lease is lost, also when that cancelled the
// statement. A statement that fails because its connection broke waits for the watchdog's
// verdict: the driver's error if the lease was renewed meanwhile, ErrLeaseLost if it was lost.
func (l *Lease) Exec(ctx context.Context, sql string, args ...interface{}) (pgconn.CommandTag, error) {
	if err := l.Err(); err != nil {
		return nil, err
	}
	ctx, stop := l.bound(ctx)
	defer stop()
	work, err := l.workConn(ctx)
	if err != nil {
		return nil, l.lostOr(err)
	}
	started := time.Now()
	l.mu.Lock()
	renewed := l.renewed
	l.mu.Unlock()
	tag, err := work.Exec(ctx, sql, args...)
	if err != nil {
		if l.Err() == nil && connectionLost(err) {
			l.awaitVerdict(started, renewed)
		}
		return nil, l.lostOr(err)
	}
	return tag, l.Err()
}

func (l *Lease) lostOr(err error) error {
	if lost := l.Err(); lost != nil {
		return &Error{Kind: ErrLeaseLost.Kind, Message: lost.(*Error).Message, Err: err}
	}
	return Translate(err)
}

func (l *Lease) workConn(ctx context.Context) (*pgx.Conn, error) {
	l.mu.Lock()
	w := l.work
	l.mu.Unlock()
	if w != nil && !w.IsClosed() {
		return w, nil
	}
	w, err := pgx.Connect(ctx, l.connString)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.work = w
	l.mu.Unlock()
	return w, nil
}

// awaitVerdict: after the work's connection broke, wait for a renewal sent since, or the loss.
func (l *Lease) awaitVerdict(since time.Time, renewed chan struct{}) {
	select {
	case l.poke <- struct{}{}:
	default:
	}
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-renewed:
		}
		l.mu.Lock()
		ok, next := !l.sentAt.Before(since), l.renewed
		l.mu.Unlock()
		if ok {
			return
		}
		renewed = next
	}
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

// watch renews every TTL/3; a renewal that fails is retried on a new connection every 100 ms;
// each try, connecting included, is bounded by the local deadline (its context's deadline), and
// when the deadline passes the lease is lost. A renewal that answers false loses it at once.
func (l *Lease) watch() {
	defer close(l.done)
	next := l.sentAt.Add(l.ttl / 3)
	for {
		deadline := l.Deadline()
		wake := earliest(next, deadline)
		t := time.NewTimer(time.Until(wake))
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-l.poke:
			t.Stop()
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			l.lose("not renewed before its deadline (the last renewal sent, plus the ttl)")
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		ok, err := l.leaseCall(ctx, true)
		cancel()
		switch {
		case err != nil:
			l.dropWatchConn()
			l.mu.Lock()
			l.reconnections++
			l.mu.Unlock()
			next = time.Now().Add(retryEvery)
		case !ok:
			l.lose("the lease expired or was taken over")
			return
		default:
			l.mu.Lock()
			next = l.sentAt.Add(l.ttl / 3)
			l.mu.Unlock()
		}
	}
}

func (l *Lease) lose(why string) {
	l.mu.Lock()
	l.lost = &Error{Kind: ErrLeaseLost.Kind, Message: why}
	l.mu.Unlock()
	l.cancel() // pgx cancels the work's running statement, if any (and closes its connection)
}

func (l *Lease) watchConn(ctx context.Context) error {
	if l.wd != nil && !l.wd.IsClosed() {
		return nil
	}
	c, err := pgx.Connect(ctx, l.connString)
	if err != nil {
		return err
	}
	l.wd = c
	return nil
}

func (l *Lease) dropWatchConn() {
	if l.wd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		l.wd.Close(ctx) // a Terminate message at most; a dead peer is not waited for
		cancel()
		l.wd = nil
	}
}

// leaseCall: renew (the watchdog's) or release (Release's) on the watchdog's connection (a new
// one if it broke), naming this grant's fence: a late call (a retry after a lost response) cannot
// renew or release a newer grant of the same owner.
func (l *Lease) leaseCall(ctx context.Context, renew bool) (bool, error) {
	if err := l.watchConn(ctx); err != nil {
		return false, err
	}
	sql, args := "SELECT fencelock.release($1, $2", []interface{}{l.resource, l.owner}
	if renew {
		sql, args = "SELECT fencelock.renew($1, $2, pg_catalog.make_interval(secs => $3)", append(args, l.ttl.Seconds())
	}
	sql, args = sql+fmt.Sprintf(", $%d::pg_catalog.int8", len(args)+1), append(args, l.fence)
	sent := time.Now()
	var ok *bool
	if err := l.wd.QueryRow(ctx, sql+")", args...).Scan(&ok); err != nil {
		return false, err
	}
	held := ok != nil && *ok
	if renew && held {
		l.mu.Lock()
		l.sentAt = sent
		l.renewals++
		close(l.renewed)
		l.renewed = make(chan struct{})
		l.mu.Unlock()
	}
	return held, nil
}

// Release stops the watchdog, releases the lease and closes both connections. released is false
// when the lease had been lost (not an error: a lost lease is not released at all, so a broken
// connection cannot replace the loss with another error); err is a failure to release a lease
// still held (bounded by its local deadline). Calling it again returns the first answer.
func (l *Lease) Release(ctx context.Context) (released bool, err error) {
	l.mu.Lock()
	if l.released != nil {
		defer l.mu.Unlock()
		return *l.released, nil
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if l.Err() == nil {
		rctx, cancel := context.WithDeadline(ctx, l.Deadline())
		released, err = l.leaseCall(rctx, false)
		cancel()
		if err != nil && !time.Now().Before(l.Deadline()) {
			err = nil // the lease ran out meanwhile: released is false, as for a lost one
		}
	}
	l.cancel()
	l.mu.Lock()
	if l.work != nil {
		l.work.Close(ctx)
	}
	l.mu.Unlock()
	if l.wd != nil {
		l.wd.Close(ctx)
	}
	l.mu.Lock()
	l.released = &released
	l.mu.Unlock()
	return released, err
}

// connectionLost: the connection broke or the server went away (restart, failover, terminate,
// a timeout), as opposed to an answer of the server's.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "25006"
	}
	return true
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
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
// BEGIN; SET LOCAL idle_in_transaction_session_timeout = TTL; acquire_xact (waiting up to Wait);
// fn's writes (carry the fence); COMMIT, which frees the lease (the TTL is only the idle timeout:
// acquire_xact's grant lasts as long as its transaction). The open transaction keeps the
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
		"fencelock.acquire_xact($2, $3, pg_catalog.make_interval(secs => $4))",
		fmt.Sprint(ms), resource, o.Owner, o.Wait.Seconds())
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
	_, err = c.Exec(ctx, "COMMIT") // frees the lease: acquire_xact's grant ends with its transaction
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
