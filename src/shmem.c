/*
 * shmem.c — all of fencelock's shared memory: requested while shared_preload_libraries is
 * processed, attached at startup.  The one file that sets shmem_request_hook and
 * shmem_startup_hook, and the one tranche of LWLocks, "fencelock".  Each part says how much it
 * needs and attaches its own area, initialising it when ShmemInitStruct created it; shmem.c hands
 * it the number of slots and its lock, and no part calls anything here.  The parts, with their
 * names in pg_shmem_allocations:
 *
 *   observe/stats.c      the counters and per-table refusal counts ("fencelock stats", and the hash
 *                "fencelock tables"); the prepared transactions' counts ("fencelock prepared
 *                counts")
 *   wait/leasequeue.c  the queue of waiting acquires ("fencelock wait queue")
 *   observe/resstats.c   contention per resource ("fencelock resources", and the hash "fencelock
 *                resource stats"; none with fencelock.max_resources = 0)
 *   lease/session.c    the ids of sessions that bind leases ("fencelock sessions")
 *   wait/taskqueue.c   the waiting claims ("fencelock task waits")
 *   store/clock.c      the lease clock's anchor ("fencelock lease clock")
 *
 * The last three have one slot per PGPROC a backend can own (fl_shmem_nslots), indexed by
 * FL_MY_PROCNO.  Every part is attached, or none; a part knows whether it is from its own
 * pointer, and without preload its functions do nothing, answer as if nobody waited, or raise
 * 55000 (preload.h).
 *
 * Note about locking: the protocol of all of fencelock's shared memory, written here only.
 *
 *  - FL_LOCK_STATS guards the per-table hash's shape (entries are entered and removed under the
 *    exclusive lock; an entry found under the shared lock has its atomic counts added to under
 *    it), stats_reset and tables_reclaimed.  The counters are atomics, added to without a lock;
 *    stats_reset zeroes them under the exclusive lock (a count added meanwhile may or may not
 *    survive it).  The catalog is read with the lock released.
 *  - FL_LOCK_RESOURCES guards the per-resource hash's shape (rows entered and removed under the
 *    exclusive lock, which also bumps its generation: a row found under the shared lock, or
 *    found earlier in a generation that has not changed since, stays in place while it is held),
 *    its evicted count and reset time.  A row's counts are changed and read under the row's own
 *    spinlock, taken under the shared lock; nothing under the spinlock can fail.  The counts a
 *    transaction's commit applies (observe/count.c) take the shared lock only.
 *  - FL_LOCK_PREPARED guards the prepared transactions' slots: exclusive to fill, free or settle.
 *  - FL_LOCK_QUEUE guards every queue slot's resource and ticket, and next_ticket.  A backend
 *    writes only its own slot, under the lock held exclusively, and reads its own slot without
 *    it.  nwaiting and a slot's woken flag are atomics; a slot's condition variable has its own
 *    spinlock, and is signalled after the lock is released.
 *  - FL_LOCK_TASK_WAITS guards every waiting claim's slot (its own backend may read its table
 *    without it), next_ticket and wakeups; woken waiters' latches are set after it is released.
 *  - The session slots take no LWLock.  A slot's live id is an atomic written only by the slot's
 *    own backend: set when the session registers, cleared at its end under the slot's spinlock,
 *    which also guards the record of ended sessions (assignments only: nothing under it can
 *    fail).  next_serial is an atomic.
 *  - The lease clock takes no LWLock: its anchor is written once, its base only grows by
 *    compare-and-swap, and its list of lifted databases is guarded by its spinlock.
 *  - Order: a backend holds at most one of the tranche's locks at a time.  The only locks taken
 *    under one are PostgreSQL's own, under FL_LOCK_PREPARED: settling holds XactTruncationLock
 *    shared, so that the commit log it reads is not truncated meanwhile, and reads transactions'
 *    status (ProcArrayLock, the commit log's locks).  PostgreSQL never takes ours: no cycle.
 *  - AddinShmemInitLock is held while every part attaches (fl_shmem_startup).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "observe/resstats.h"
#include "store/clock.h"
#include "store/sessionslot.h"
#include "shmem.h"
#include "observe/stats.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "wait/taskqueue.h"
#include "wait/leasequeue.h"

#define FL_TRANCHE "fencelock"

/* The locks of tranche "fencelock", one per part that needs one (see the note above). */
typedef enum FlLock
{
	FL_LOCK_STATS,
	FL_LOCK_QUEUE,
	FL_LOCK_PREPARED,
	FL_LOCK_TASK_WAITS,
	FL_LOCK_RESOURCES,
	FL_NUM_LOCKS
} FlLock;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * The slots of the parts indexed by PGPROC number: one per backend and auxiliary process (the
 * PGPROCs of prepared transactions, numbered after them, run nothing).
 */
static int
fl_shmem_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS;
}

static void
fl_shmem_request(void)
{
	int nslots = fl_shmem_nslots();

	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(fl_stats_shmem_size());
	RequestAddinShmemSpace(fl_prepared_shmem_size());
	RequestAddinShmemSpace(fl_queue_shmem_size(nslots));
	RequestAddinShmemSpace(fl_session_shmem_size(nslots));
	RequestAddinShmemSpace(fl_task_wait_shmem_size(nslots));
	RequestAddinShmemSpace(fl_resstats_shmem_size());
	RequestAddinShmemSpace(fl_clock_shmem_size());
	RequestNamedLWLockTranche(FL_TRANCHE, FL_NUM_LOCKS);
}

static LWLock *
fl_lock(LWLockPadded *locks, FlLock which)
{
	return locks != NULL ? &locks[which].lock : NULL;
}

/*
 * Attach every part.  The tranche's locks are looked up only where shared memory is created (the
 * postmaster, a single-user backend), as PostgreSQL's documentation looks them up only for an
 * area ShmemInitStruct created: a backend started with EXEC_BACKEND attaches to areas that keep
 * their locks, and hands NULL.
 */
static void
fl_shmem_startup(void)
{
	int nslots = fl_shmem_nslots();
	LWLockPadded *locks = NULL;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	if (!IsUnderPostmaster)
		locks = GetNamedLWLockTranche(FL_TRANCHE);
	fl_stats_shmem_attach(fl_lock(locks, FL_LOCK_STATS));
	fl_prepared_shmem_attach(fl_lock(locks, FL_LOCK_PREPARED));
	fl_queue_shmem_attach(nslots, fl_lock(locks, FL_LOCK_QUEUE));
	fl_session_shmem_attach(nslots);
	fl_task_wait_shmem_attach(nslots, fl_lock(locks, FL_LOCK_TASK_WAITS));
	fl_resstats_shmem_attach(fl_lock(locks, FL_LOCK_RESOURCES));
	fl_clock_shmem_attach();
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init while shared_preload_libraries is being processed. */
void
fl_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = fl_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = fl_shmem_startup;
}
