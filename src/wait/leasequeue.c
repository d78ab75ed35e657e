/*
 * wait/leasequeue.c — the queue of backends waiting for a lease, in shared memory.
 *
 * The queue has one slot per backend.  A waiting backend takes a ticket; only the oldest ticket
 * for a resource (the head) tries to acquire, so a release wakes one waiter, in arrival order,
 * and a waiting newcomer queues behind those already waiting.  A release signals the head's own
 * condition variable; a head that leaves without the lease signals the next one.
 *
 * Wake-ups at commit.  A lease that a transaction frees (release, release_all, revoke,
 * raise_fences, purge) is free for the others only once that transaction commits: a head woken
 * earlier sees the old holder and sleeps again, until the next wake-up or its recheck
 * (fencelock.wait_recheck).  So these wake-ups wait here, in backend memory, per (sub)transaction
 * level, and are signalled at XACT_EVENT_COMMIT, when the commit is visible to every new
 * snapshot: a subtransaction's are handed to its parent when it commits and dropped when it rolls
 * back, and a rolled-back transaction wakes nobody.  A head that is granted the lease passes the
 * wake-up on (fl_queue_leave): at the end of its transaction, committed or not, the next waiter
 * tries, finds the new holder (or, after a rollback, the lease as it was) and sets its timer to
 * that holder's deadline.  PREPARE TRANSACTION signals nothing: COMMIT PREPARED may run in any
 * backend, and the recheck finds the lease.  The callbacks take the queue's lock shared and
 * signal condition variables: nothing in them waits for another transaction or can raise; what
 * they need (the names) was copied when the wake-up was recorded.  Session ends wake at once
 * (lease/session.c): they run after their own commit.
 *
 * A resource is its database and its whole name: every slot keeps the name it waits for, and
 * two slots wait for the same resource only when database, length and bytes are equal.  The
 * slot's 64-bit hash of the name only lets a scan skip other resources' slots quickly; it is no
 * identity.  (It is hash_bytes_extended, which an ordinary role can make collide at will: when the
 * hash was the identity, a colliding name's waiter stood ahead of every waiter of the real
 * resource, which then timed out.)  The names take FENCELOCK_MAX_RESOURCE_LEN bytes per slot,
 * kept apart from the slots so a scan touches only the small part.
 *
 * Locking: the queue's lock (FL_LOCK_QUEUE) guards the slots' resources and tickets; the protocol
 * is in shmem.c's header.
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "compat.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"
#include "wait/leasequeue.h"

PG_FUNCTION_INFO_V1(fencelock_waiters);

typedef struct FlWaiter
{
	Oid dbid;    /* the resource's database; InvalidOid when the slot is free */
	uint32 len;  /* the length of its name (the bytes: fl_slot_name) */
	uint64 hash; /* of the name, seeded with dbid: a filter, not the identity */
	uint64 ticket;
	bool exclusive;         /* waits for the lease alone, not a share or a permit (store/group.c) */
	pg_atomic_uint32 woken; /* set by a wake-up, cleared by the waiter before it looks */
	ConditionVariable cv;
} FlWaiter;

typedef struct FlQueue
{
	LWLock *lock; /* guards the slots' resources and tickets, and next_ticket */
	uint64 next_ticket;
	pg_atomic_uint32 nwaiting; /* slots in use: lets release skip the queue when 0 */
	int nslots;
	FlWaiter slots[FLEXIBLE_ARRAY_MEMBER];
	/* then nslots names of FENCELOCK_MAX_RESOURCE_LEN bytes each (fl_slot_name) */
} FlQueue;

/* A resource as the queue compares it. */
typedef struct FlQueueKey
{
	Oid dbid;
	uint32 len;
	uint64 hash;
	const char *name;
} FlQueueKey;

/* A wake-up waiting for the end of the transaction that recorded it. */
typedef struct FlPendingWake
{
	int level;   /* the nesting level that recorded it */
	bool always; /* also when the transaction rolls back: a granted head's pass-on */
	Oid dbid;
	uint32 len;
	uint64 hash;
	char *name; /* in wake_cxt */
} FlPendingWake;

/* More resources than this in one transaction: wake every waiter at its end instead. */
#define FL_MAX_PENDING_WAKES 64

static FlQueue *fl_queue = NULL;
static FlWaiter *my_slot = NULL;
static bool exit_cb_registered = false;

static FlPendingWake pending_wakes[FL_MAX_PENDING_WAKES];
static int npending_wakes = 0;
static bool wake_everyone = false; /* the list overflowed */
static MemoryContext wake_cxt = NULL;

/* nslots: one per PGPROC (shmem.c) */
Size
fl_queue_shmem_size(int nslots)
{
	Size slots = add_size(offsetof(FlQueue, slots), mul_size(nslots, sizeof(FlWaiter)));

	return add_size(slots, mul_size(nslots, FENCELOCK_MAX_RESOURCE_LEN));
}

static char *
fl_slot_name(const FlWaiter *w)
{
	return (char *) &fl_queue->slots[fl_queue->nslots] +
		   (Size) (w - fl_queue->slots) * FENCELOCK_MAX_RESOURCE_LEN;
}

/* Attach, and initialise when created (with its lock); the caller holds AddinShmemInitLock. */
void
fl_queue_shmem_attach(int nslots, LWLock *lock)
{
	bool found;

	fl_queue = ShmemInitStruct("fencelock wait queue", fl_queue_shmem_size(nslots), &found);
	if (found)
		return;
	Assert(lock != NULL);
	fl_queue->lock = lock;
	fl_queue->next_ticket = 1;
	pg_atomic_init_u32(&fl_queue->nwaiting, 0);
	fl_queue->nslots = nslots;
	for (int i = 0; i < fl_queue->nslots; i++)
	{
		fl_queue->slots[i].dbid = InvalidOid;
		fl_queue->slots[i].len = 0;
		fl_queue->slots[i].hash = 0;
		fl_queue->slots[i].ticket = 0;
		pg_atomic_init_u32(&fl_queue->slots[i].woken, 0);
		ConditionVariableInit(&fl_queue->slots[i].cv);
	}
}

/*
 * The queue's key of a resource of the current database.  False for a name longer than a slot
 * holds: no waiter can be queued for it (every waiting acquire checked its resource's length).
 */
static bool
fl_key(text *resource, FlQueueKey *key)
{
	key->dbid = MyDatabaseId;
	key->len = VARSIZE_ANY_EXHDR(resource);
	key->name = VARDATA_ANY(resource);
	/* Seeded with the database: the same name in two databases lands apart. */
	key->hash = hash_bytes_extended((const unsigned char *) key->name, key->len, MyDatabaseId);
	return key->len <= FENCELOCK_MAX_RESOURCE_LEN && OidIsValid(key->dbid);
}

/* Whether a slot waits for the resource; the caller holds the lock (or the slot is its own). */
static bool
fl_slot_is(const FlWaiter *w, const FlQueueKey *key)
{
	return w->hash == key->hash && w->dbid == key->dbid && w->len == key->len &&
		   memcmp(fl_slot_name(w), key->name, key->len) == 0;
}

/* Waiters queued for a resource; 0 without shared memory. */
int
fl_queue_length(text *resource)
{
	FlQueueKey key;
	int n = 0;

	if (fl_queue == NULL || pg_atomic_read_u32(&fl_queue->nwaiting) == 0 || !fl_key(resource, &key))
		return 0;
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	for (int i = 0; i < fl_queue->nslots; i++)
		if (fl_slot_is(&fl_queue->slots[i], &key))
			n++;
	LWLockRelease(fl_queue->lock);
	return n;
}

static void
fl_queue_exit_cb(int code, Datum arg)
{
	if (fl_queue_queued())
		fl_queue_leave(false);
}

/*
 * Queue for a resource (at most FENCELOCK_MAX_RESOURCE_LEN bytes, as every argument is), unless
 * MAX_WAITERS (above 0) are queued for it already.  Returns how many are queued with this one, or
 * 0 when it was turned away; 1 without shared memory (no queue, no cap).
 */
int
fl_queue_enter(text *resource, int max_waiters, bool exclusive)
{
	FlQueueKey key;
	int n = 1;

	if (fl_queue == NULL)
		return 1;
	if (!fl_key(resource, &key))
		elog(ERROR, "resource of %u bytes cannot be queued", key.len);
	if (!exit_cb_registered)
	{
		before_shmem_exit(fl_queue_exit_cb, (Datum) 0);
		exit_cb_registered = true;
	}
	my_slot = &fl_queue->slots[FL_MY_PROCNO];
	LWLockAcquire(fl_queue->lock, LW_EXCLUSIVE);
	/* Counted and joined under the one lock: a cap of N never lets N + 1 in. */
	for (int i = 0; pg_atomic_read_u32(&fl_queue->nwaiting) > 0 && i < fl_queue->nslots; i++)
		if (fl_slot_is(&fl_queue->slots[i], &key))
			n++;
	if (max_waiters > 0 && n > max_waiters)
	{
		LWLockRelease(fl_queue->lock);
		return 0;
	}
	my_slot->dbid = key.dbid;
	my_slot->len = key.len;
	my_slot->hash = key.hash;
	memcpy(fl_slot_name(my_slot), key.name, key.len);
	my_slot->ticket = fl_queue->next_ticket++;
	my_slot->exclusive = exclusive;
	pg_atomic_fetch_add_u32(&fl_queue->nwaiting, 1);
	LWLockRelease(fl_queue->lock);
	return n;
}

/* Whether the queue is in shared memory (fencelock was preloaded); without it, waiters poll. */
bool
fl_queue_attached(void)
{
	return fl_queue != NULL;
}

/* Whether this backend is queued (never without shared memory). */
bool
fl_queue_queued(void)
{
	return fl_queue != NULL && my_slot != NULL && OidIsValid(my_slot->dbid);
}

/* Whether this backend is queued for this resource. */
bool
fl_queue_is_mine(text *resource)
{
	FlQueueKey key;

	return fl_queue_queued() && fl_key(resource, &key) && fl_slot_is(my_slot, &key);
}

/* The waiting slot with the lowest ticket for the resource, or NULL; caller holds the lock. */
static FlWaiter *
fl_queue_head(const FlQueueKey *key)
{
	FlWaiter *head = NULL;

	for (int i = 0; i < fl_queue->nslots; i++)
	{
		FlWaiter *w = &fl_queue->slots[i];

		if (fl_slot_is(w, key) && (head == NULL || w->ticket < head->ticket))
			head = w;
	}
	return head;
}

/*
 * Whether a waiter for the lease alone is queued for RESOURCE ahead of this backend (anywhere in
 * its queue, when this backend is not queued for it): writer preference, no share or permit is
 * granted past it.  Never without shared memory.
 */
bool
fl_queue_exclusive_ahead(text *resource)
{
	FlQueueKey key;
	bool ahead = false;
	bool mine;

	if (fl_queue == NULL || pg_atomic_read_u32(&fl_queue->nwaiting) == 0 || !fl_key(resource, &key))
		return false;
	mine = fl_queue_queued() && fl_slot_is(my_slot, &key);
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	for (int i = 0; i < fl_queue->nslots && !ahead; i++)
	{
		FlWaiter *w = &fl_queue->slots[i];

		ahead = w != my_slot && w->exclusive && fl_slot_is(w, &key) &&
				(!mine || w->ticket < my_slot->ticket);
	}
	LWLockRelease(fl_queue->lock);
	return ahead;
}

/* Without shared memory every waiter is its own head: it polls. */
bool
fl_queue_is_head(void)
{
	FlQueueKey key;
	bool head;

	if (!fl_queue_queued())
		return true;
	key.dbid = my_slot->dbid;
	key.len = my_slot->len;
	key.hash = my_slot->hash;
	key.name = fl_slot_name(my_slot);
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	head = fl_queue_head(&key) == my_slot;
	LWLockRelease(fl_queue->lock);
	return head;
}

void
fl_queue_clear_woken(void)
{
	if (fl_queue != NULL && my_slot != NULL)
		pg_atomic_write_u32(&my_slot->woken, 0);
}

/* Whether a wake-up came since fl_queue_clear_woken. */
bool
fl_queue_woken(void)
{
	return fl_queue != NULL && my_slot != NULL && pg_atomic_read_u32(&my_slot->woken) != 0;
}

/* Join the wake-up list before checking whether to sleep, so that no signal is lost. */
void
fl_queue_prepare(void)
{
	if (fl_queue != NULL && my_slot != NULL)
		ConditionVariablePrepareToSleep(&my_slot->cv);
}

/*
 * Sleep until signalled (since fl_queue_prepare) or the timeout; query cancel and
 * statement_timeout interrupt it.
 */
void
fl_queue_sleep(long timeout_ms)
{
	if (timeout_ms < 1)
		timeout_ms = 1;
	if (fl_queue == NULL || my_slot == NULL)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
						 FL_WAIT_EVENT_ACQUIRE);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return;
	}
	(void) ConditionVariableTimedSleep(&my_slot->cv, timeout_ms, FL_WAIT_EVENT_ACQUIRE);
}

/* Tell a head waiter that its turn has come. */
static void
fl_signal(FlWaiter *head)
{
	if (head != NULL)
	{
		pg_atomic_write_u32(&head->woken, 1);
		ConditionVariableSignal(&head->cv);
	}
}

static void fl_wake_add(const FlQueueKey *key, bool always);

/*
 * Leave the queue.  Without the lease, the next waiter gets its turn to try now; granted, it is
 * woken at the end of this transaction, to find the new holder and wait for its deadline (or to
 * try, when the grant was rolled back).
 */
void
fl_queue_leave(bool granted)
{
	FlQueueKey key;
	FlWaiter *next = NULL;

	if (!fl_queue_queued())
		return;
	ConditionVariableCancelSleep();
	LWLockAcquire(fl_queue->lock, LW_EXCLUSIVE);
	/* Our slot's name stays in place: only this backend writes it. */
	key.dbid = my_slot->dbid;
	key.len = my_slot->len;
	key.hash = my_slot->hash;
	key.name = fl_slot_name(my_slot);
	my_slot->dbid = InvalidOid;
	my_slot->ticket = 0;
	pg_atomic_fetch_sub_u32(&fl_queue->nwaiting, 1);
	if (!granted)
		next = fl_queue_head(&key);
	LWLockRelease(fl_queue->lock);
	if (granted)
		fl_wake_add(&key, true);
	else
		fl_signal(next);
}

/* Wake the head waiter for a resource now, if any: a committed end of a lease made its turn. */
void
fl_queue_wake(text *resource)
{
	FlQueueKey key;
	FlWaiter *head;

	if (fl_queue == NULL || pg_atomic_read_u32(&fl_queue->nwaiting) == 0 || !fl_key(resource, &key))
		return;
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	head = fl_queue_head(&key);
	LWLockRelease(fl_queue->lock);
	fl_signal(head);
}

/*
 * Signal the heads of the pending wake-ups (all of them, or after a rollback those marked
 * always), then forget every one.  Runs in the transaction callbacks: takes the queue's lock
 * shared, signals, resets a memory context; nothing that waits for others or raises.
 */
static void
fl_wake_settle(bool committed)
{
	FlWaiter *heads[FL_MAX_PENDING_WAKES];
	int nheads = 0;

	if (fl_queue != NULL && (npending_wakes > 0 || wake_everyone) &&
		pg_atomic_read_u32(&fl_queue->nwaiting) > 0)
	{
		if (wake_everyone)
		{
			/* Every waiter looks again; those that are not heads go back to sleep. */
			for (int i = 0; i < fl_queue->nslots; i++)
				if (OidIsValid(fl_queue->slots[i].dbid))
					fl_signal(&fl_queue->slots[i]);
		}
		else
		{
			LWLockAcquire(fl_queue->lock, LW_SHARED);
			for (int i = 0; i < npending_wakes; i++)
			{
				FlPendingWake *w = &pending_wakes[i];
				FlQueueKey key = {w->dbid, w->len, w->hash, w->name};

				if (committed || w->always)
					heads[nheads++] = fl_queue_head(&key);
			}
			LWLockRelease(fl_queue->lock);
			for (int i = 0; i < nheads; i++)
				fl_signal(heads[i]);
		}
	}
	npending_wakes = 0;
	wake_everyone = false;
	if (wake_cxt != NULL)
		MemoryContextReset(wake_cxt);
}

static void
fl_wake_xact_cb(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			fl_wake_settle(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			fl_wake_settle(false);
			break;
		case XACT_EVENT_PREPARE:
			/* COMMIT PREPARED may run anywhere: the waiters' recheck finds the lease. */
			npending_wakes = 0;
			wake_everyone = false;
			MemoryContextReset(wake_cxt);
			break;
		default:
			break;
	}
}

/* A subtransaction's wake-ups go to its parent when it commits, and away when it rolls back. */
static void
fl_wake_subxact_cb(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
				   void *arg)
{
	int level = GetCurrentTransactionNestLevel();
	int n = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < npending_wakes; i++)
	{
		if (pending_wakes[i].level >= level)
		{
			/* A rolled-back end of a lease frees nothing; a rolled-back grant frees its lease. */
			if (event == SUBXACT_EVENT_ABORT_SUB && !pending_wakes[i].always)
				continue;
			pending_wakes[i].level = level - 1;
		}
		pending_wakes[n++] = pending_wakes[i];
	}
	npending_wakes = n;
}

/* Record a wake-up of the key's head for the end of the current transaction. */
static void
fl_wake_add(const FlQueueKey *key, bool always)
{
	int level = GetCurrentTransactionNestLevel();
	FlPendingWake *w;

	if (wake_cxt == NULL)
	{
		wake_cxt =
			AllocSetContextCreate(TopMemoryContext, "fencelock wake-ups", ALLOCSET_SMALL_SIZES);
		fl_xact_join(FL_XACT_LEASE_WAKE, fl_wake_xact_cb, fl_wake_subxact_cb);
	}
	if (wake_everyone)
		return;
	for (int i = 0; i < npending_wakes; i++)
	{
		w = &pending_wakes[i];
		if (w->level == level && w->always == always && w->hash == key->hash &&
			w->dbid == key->dbid && w->len == key->len && memcmp(w->name, key->name, key->len) == 0)
			return;
	}
	if (npending_wakes == FL_MAX_PENDING_WAKES)
	{
		wake_everyone = true;
		return;
	}
	w = &pending_wakes[npending_wakes];
	w->name = MemoryContextAlloc(wake_cxt, Max(key->len, 1));
	memcpy(w->name, key->name, key->len);
	w->level = level;
	w->always = always;
	w->dbid = key->dbid;
	w->len = key->len;
	w->hash = key->hash;
	npending_wakes++;
}

/*
 * This transaction freed the resource's lease: wake its head when the transaction commits
 * (recorded even with nobody waiting now: a waiter may queue before the commit).
 */
void
fl_queue_wake_at_commit(text *resource)
{
	FlQueueKey key;

	if (fl_queue == NULL || !fl_key(resource, &key))
		return;
	fl_wake_add(&key, false);
}

/* SQL: waiters queued for a resource; NULL without shared memory. */
Datum
fencelock_waiters(PG_FUNCTION_ARGS)
{
	if (fl_queue == NULL || PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_INT32(fl_queue_length(PG_GETARG_TEXT_PP(0)));
}
