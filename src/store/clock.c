/*
 * store/clock.c — the lease clock: the moment every lease decision is taken at (a grant's
 * acquired_at and deadline, whether a deadline has passed, a renewal's new deadline, a release's
 * moment, a session's end), shown as timestamptz so that rows, views and dumps keep their meaning.
 *
 * With shared memory (fencelock preloaded) the clock does not step: it is the wall clock read once
 * at the server's start (the anchor), plus the time the monotonic clock has run since
 * (base/monotonic.h).  An NTP step or `date -s` moves the wall clock and not this one, so a lease
 * of 10 s lasts 10 s of real time whichever way the wall clock jumps, and a deadline that has
 * passed stays passed.  The anchor lives in shared memory and is taken afresh at every start of
 * the server (and after a crash of a backend, when the postmaster makes shared memory anew); the
 * clock is then lifted, at most once per database after that start, to the latest moment that
 * database's lease rows record (clock_floor_apply; store/README.md's lease rule says why that is
 * enough): a server restarted with its wall clock behind the clock it ran on does not give the
 * leases of before back the time the step took away.  The lift only moves the clock forward.
 *
 * Without shared memory the clock is the wall clock, which it follows when it steps (README's
 * Guarantees), held by this backend never to run backwards.
 *
 * Locking: the anchor's monotonic reading is written once, when the area is made.  The base (the
 * lease clock at that reading) only grows, by compare-and-swap, without a lock; the list of
 * databases already lifted is guarded by the area's spinlock (assignments only: nothing under
 * it can fail).  No LWLock (shmem.c's header).
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "base/asowner.h"
#include "base/monotonic.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "store/clock.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_lease_clock);

/* Databases whose lift is remembered in shared memory; beyond them, each backend lifts its own. */
#define FL_CLOCK_DBS 64

typedef struct FlClock
{
	int64 anchor_mono;     /* the monotonic clock (µs) when the area was made; never changes */
	pg_atomic_uint64 base; /* the lease clock at anchor_mono (a TimestampTz); only grows */
	slock_t mutex;         /* guards nlifted and lifted */
	int nlifted;
	Oid lifted[FL_CLOCK_DBS]; /* databases lifted to their floor since the start */
} FlClock;

static FlClock *fl_clock = NULL;

/* This backend's highest reading: the clock never runs backwards here. */
static TimestampTz clock_last = DT_NOBEGIN;
/* This backend's database has been lifted (floor_in_recovery: while the server was a standby). */
static bool floor_done = false;
static bool floor_in_recovery = false;
static bool floor_loading = false;

Size
fl_clock_shmem_size(void)
{
	return sizeof(FlClock);
}

/* Attach, and anchor the clock when the area is made; the caller holds AddinShmemInitLock. */
void
fl_clock_shmem_attach(void)
{
	bool found;

	fl_clock = ShmemInitStruct("fencelock lease clock", fl_clock_shmem_size(), &found);
	if (!found)
	{
		fl_clock->anchor_mono = fl_mono_us();
		pg_atomic_init_u64(&fl_clock->base, (uint64) GetCurrentTimestamp());
		SpinLockInit(&fl_clock->mutex);
		fl_clock->nlifted = 0;
	}
}

/* The clock, read: no database access, no lock. */
TimestampTz
fl_lease_clock_read(void)
{
	TimestampTz now;

	if (fl_clock != NULL)
		now = (TimestampTz) pg_atomic_read_u64(&fl_clock->base) +
			  (fl_mono_us() - fl_clock->anchor_mono);
	else
		now = GetCurrentTimestamp();
	if (now < clock_last)
		return clock_last;
	clock_last = now;
	return now;
}

/*
 * The latest moment this database's lease rows record: every grant's acquired_at (a share's or
 * permit's in its holder row), and the moment of every release, revoke and acquire_xact grant
 * (a free row's expires_at).  A sequential scan, once per database after a start.
 */
#define FLOOR_LEASE                                                                                \
	"SELECT pg_catalog.max(GREATEST(l.acquired_at, "                                               \
	"CASE WHEN l.owner IS NULL THEN l.expires_at END)) FROM fencelock.lease AS l"

static FlStmt floor_select[2] = {
	{FLOOR_LEASE, 0, {InvalidOid}},
	{"SELECT GREATEST((" FLOOR_LEASE "), "
	 "(SELECT pg_catalog.max(h.acquired_at) FROM fencelock.lease_holder AS h))",
	 0,
	 {InvalidOid}}};

static TimestampTz
floor_read(void)
{
	bool holders = OidIsValid(get_relname_relid("lease_holder", fl_extension_schema()));
	FlSession s;
	bool isnull;
	Datum d;

	fl_begin(&s);
	(void) fl_run_latest(&floor_select[holders ? 1 : 0], NULL, NULL);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	fl_end(&s);
	return isnull ? DT_NOBEGIN : DatumGetTimestampTz(d); /* no row: DT_NOBEGIN */
}

/* Lift the clock so that it reads at least FLOOR now; only forward, never by anyone else's loss. */
static void
clock_lift(TimestampTz floor)
{
	TimestampTz now = fl_lease_clock_read();
	uint64 old = pg_atomic_read_u64(&fl_clock->base);
	int64 by;

	/* No row, or a moment that is no moment (a row written by hand): nothing to lift to. */
	if (TIMESTAMP_NOT_FINITE(floor) || floor <= now)
		return;
	by = floor - now;
	while (!pg_atomic_compare_exchange_u64(&fl_clock->base, &old, old + (uint64) by))
	{
		/* Another backend moved the base: lift only what is still missing. */
		now = (TimestampTz) old + (fl_mono_us() - fl_clock->anchor_mono);
		by = floor - now;
		if (by <= 0)
			return;
	}
	ereport(LOG,
			(errmsg("lease clock lifted by %.3f s to the latest lease moment of database "
					"\"%s\"",
					(double) by / USECS_PER_SEC, get_database_name(MyDatabaseId)),
			 errdetail("The server started with its wall clock behind the moment of a "
					   "grant or release made before; leases are timed from that moment on.")));
}

/* Whether this database is in the list of those lifted; the caller holds the spinlock. */
static bool
floor_listed(void)
{
	for (int i = 0; i < fl_clock->nlifted; i++)
		if (fl_clock->lifted[i] == MyDatabaseId)
			return true;
	return false;
}

static bool
floor_lifted_here(void)
{
	bool found;

	SpinLockAcquire(&fl_clock->mutex);
	found = floor_listed();
	SpinLockRelease(&fl_clock->mutex);
	return found;
}

/* Remember this database as lifted (once: two first calls may have lifted it at once). */
static void
floor_remember(void)
{
	SpinLockAcquire(&fl_clock->mutex);
	if (!floor_listed() && fl_clock->nlifted < FL_CLOCK_DBS)
		fl_clock->lifted[fl_clock->nlifted++] = MyDatabaseId;
	SpinLockRelease(&fl_clock->mutex);
}

/*
 * This database's first use of the clock since the start: lift it to the floor.  A standby's
 * backend lifts it for itself, and again once the server has been promoted (the rows it then
 * holds are the old primary's latest).
 */
static void
clock_floor_apply(void)
{
	bool in_recovery = RecoveryInProgress();

	if (!in_recovery && floor_lifted_here())
	{
		floor_done = true;
		floor_in_recovery = false;
		return;
	}
	floor_loading = true;
	PG_TRY();
	{
		clock_lift(floor_read());
	}
	PG_FINALLY();
	{
		floor_loading = false;
	}
	PG_END_TRY();
	if (!in_recovery)
		floor_remember();
	floor_done = true;
	floor_in_recovery = in_recovery;
}

/*
 * Now on the lease clock.  In a transaction of a database with fencelock, the first call since
 * the start (per database) lifts the clock above the latest moment the lease rows record.
 */
TimestampTz
fl_lease_now(void)
{
	if (unlikely(floor_in_recovery) && !RecoveryInProgress())
		floor_done = false;
	if (unlikely(!floor_done) && fl_clock != NULL && !floor_loading && IsTransactionState() &&
		OidIsValid(MyDatabaseId))
		clock_floor_apply();
	return fl_lease_clock_read();
}

/* fencelock.lease_clock(): the lease clock, as the leases views compare deadlines with it. */
Datum
fencelock_lease_clock(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(fl_lease_now());
}
