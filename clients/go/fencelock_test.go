package fencelock

// Against the database of the PG* environment variables (a superuser, fencelock installed);
// without PGDATABASE the tests that need it are skipped. scripts/test-clients.sh runs them.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	if os.Getenv("PGDATABASE") == "" {
		t.Skip("PGDATABASE is not set")
	}
	c, err := pgx.Connect(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func resource(t *testing.T) string {
	return fmt.Sprintf("go-test:%s:%d", t.Name(), time.Now().UnixNano())
}

func TestTranslateWithoutServer(t *testing.T) {
	stale := &pgconn.PgError{Code: "FL001", Message: "fence 1 is older than the stored fence 2"}
	err := Translate(fmt.Errorf("wrapped: %w", stale))
	var fe *Error
	if !errors.Is(err, ErrStaleFence) || errors.Is(err, ErrUnfenced) || !errors.As(err, &fe) ||
		fe.Message != stale.Message || fe.SQLState != "FL001" || !errors.Is(err, stale) {
		t.Fatalf("FL001 translated to %#v", err)
	}
	if err := Translate(&pgconn.PgError{Code: "FL002"}); !errors.Is(err, ErrUnfenced) {
		t.Fatalf("FL002 translated to %#v", err)
	}
	other := &pgconn.PgError{Code: "22012"}
	if err := Translate(other); err != other || Translate(nil) != nil {
		t.Fatalf("22012 translated to %#v", err)
	}
}

func TestBusy(t *testing.T) {
	connect(t)
	ctx, res := context.Background(), resource(t)
	a, err := Acquire(ctx, "", res, Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	if _, err := Acquire(ctx, "", res, Options{TTL: 5 * time.Second}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second owner: %v, want ErrBusy", err)
	}
	if ok, err := a.Release(ctx); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
}

// The watchdog keeps a lease past its ttl.
func TestWatchdogRenews(t *testing.T) {
	c := connect(t)
	ctx, res := context.Background(), resource(t)
	l, err := Acquire(ctx, "", res, Options{TTL: 1200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sleep(3000 * time.Millisecond); err != nil {
		t.Fatalf("sleep: %v", err)
	}
	var state string
	if err := c.QueryRow(ctx, "SELECT state FROM fencelock.leases WHERE resource = $1", res).Scan(&state); err != nil || state != "held" {
		t.Fatalf("after 2.5 ttl: %q %v", state, err)
	}
	if ok, err := l.Release(ctx); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
}

// A revoke stops a running statement within ttl/3: Context() is cancelled, pgx cancels it, and
// the error is ErrLeaseLost; the release is refused.
func TestRevokeCancelsRunningStatement(t *testing.T) {
	c := connect(t)
	ctx, res := context.Background(), resource(t)
	l, err := Acquire(ctx, "", res, Options{TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, func() { c.Exec(ctx, "SELECT fencelock.revoke($1)", res) })
	t0 := time.Now()
	_, err = l.Exec(ctx, "SELECT pg_sleep(30)")
	took := time.Since(t0)
	if !errors.Is(err, ErrLeaseLost) || took > 1500*time.Millisecond {
		t.Fatalf("after %v: %v, want ErrLeaseLost within ttl/3 of the revoke", took, err)
	}
	select {
	case <-l.Context().Done():
	default:
		t.Fatal("Context() not cancelled")
	}
	if _, err := l.Exec(ctx, "SELECT 1"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("next statement: %v", err)
	}
	if ok, err := l.Release(ctx); ok || err != nil {
		t.Fatalf("release after the revoke: %v %v, want false", ok, err)
	}
}

// FL001 and FL002 from a fenced table through Lease.Exec.
func TestExecTranslates(t *testing.T) {
	c := connect(t)
	ctx, res := context.Background(), resource(t)
	tbl := pgx.Identifier{fmt.Sprintf("go_test_%d", time.Now().UnixNano())}.Sanitize()
	for _, q := range []string{
		"CREATE TABLE " + tbl + " (id int PRIMARY KEY, v int, fence bigint)",
		"CREATE TRIGGER fence BEFORE UPDATE ON " + tbl + " FOR EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('fence')",
		"INSERT INTO " + tbl + " VALUES (1, 0, 0)",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer c.Exec(ctx, "DROP TABLE "+tbl)
	l, err := Acquire(ctx, "", res, Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := l.Exec(ctx, "UPDATE "+tbl+" SET v = 1, fence = $1", l.Fence()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Exec(ctx, "UPDATE "+tbl+" SET v = 2, fence = $1", l.Fence()); !errors.Is(err, ErrStaleFence) {
		t.Fatalf("older fence: %v, want ErrStaleFence", err)
	}
	if _, err := l.Exec(ctx, "UPDATE "+tbl+" SET v = 3"); !errors.Is(err, ErrUnfenced) {
		t.Fatalf("no fence: %v, want ErrUnfenced", err)
	}
	var pe *pgconn.PgError
	if _, err := l.Exec(ctx, "SELECT 1/0"); !errors.As(err, &pe) || pe.Code != "22012" || errors.Is(err, ErrStaleFence) {
		t.Fatalf("1/0: %v", err)
	}
}
