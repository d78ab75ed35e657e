/*
 * waitqueue.c — the queue of backends waiting for a lease, in shared memory.
 *
 * The queue has one slot per backend.  A waiting backend takes a ticket; only the oldest ticket
 * for a resource (the head) tries to acquire, so a release wakes one waiter, in arrival order,
 * and a waiting newcomer queues behind those already waiting.  A release signals the head's own
 * condition variable; a head that leaves without the lease signals the next one.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "shmem.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/wait_event.h"

PG_FUNCTION_INFO_V1(fencelock_waiters);

typedef struct FlWaiter
{
	uint64 key; /* resource hash; 0 when the slot is free */
	uint64 ticket;
	pg_atomic_uint32 woken; /* set by a wake-up, cleared by the waiter before it looks */
	ConditionVariable cv;
} FlWaiter;

typedef struct FlQueue
{
	LWLock *lock; /* guards the slots' keys and tickets, and next_ticket */
	uint64 next_ticket;
	pg_atomic_uint32 nwaiting; /* slots in use: lets release skip the queue when 0 */
	int nslots;
	FlWaiter slots[FLEXIBLE_ARRAY_MEMBER];
} FlQueue;

static FlQueue *fl_queue = NULL;
static FlWaiter *my_slot = NULL;
static bool exit_cb_registered = false;

static int
fl_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS;
}

Size
fl_queue_shmem_size(void)
{
	return add_size(offsetof(FlQueue, slots), mul_size(fl_nslots(), sizeof(FlWaiter)));
}

/* Attach (and in the postmaster, initialise); the caller holds AddinShmemInitLock. */
void
fl_queue_shmem_startup(void)
{
	bool found;

	fl_queue = ShmemInitStruct("fencelock wait queue", fl_queue_shmem_size(), &found);
	if (found)
		return;
	fl_queue->lock = fl_shmem_lock(FL_LOCK_QUEUE);
	fl_queue->next_ticket = 1;
	pg_atomic_init_u32(&fl_queue->nwaiting, 0);
	fl_queue->nslots = fl_nslots();
	for (int i = 0; i < fl_queue->nslots; i++)
	{
		fl_queue->slots[i].key = 0;
		fl_queue->slots[i].ticket = 0;
		pg_atomic_init_u32(&fl_queue->slots[i].woken, 0);
		ConditionVariableInit(&fl_queue->slots[i].cv);
	}
}

uint64
fl_resource_key(text *resource)
{
	/* Seeded with the database: the same name in two databases is two resources. */
	uint64 h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(resource),
								   VARSIZE_ANY_EXHDR(resource), MyDatabaseId);

	return h == 0 ? 1 : h;
}

/* Waiters queued for a resource; 0 without shared memory. */
int
fl_queue_length(uint64 key)
{
	int n = 0;

	if (fl_queue == NULL || pg_atomic_read_u32(&fl_queue->nwaiting) == 0)
		return 0;
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	for (int i = 0; i < fl_queue->nslots; i++)
		if (fl_queue->slots[i].key == key)
			n++;
	LWLockRelease(fl_queue->lock);
	return n;
}

static void
fl_queue_exit_cb(int code, Datum arg)
{
	if (my_slot != NULL && my_slot->key != 0)
		fl_queue_leave(true);
}

void
fl_queue_enter(uint64 key)
{
	if (fl_queue == NULL)
		return;
	if (!exit_cb_registered)
	{
		before_shmem_exit(fl_queue_exit_cb, (Datum) 0);
		exit_cb_registered = true;
	}
	my_slot = &fl_queue->slots[FL_MY_PROCNO];
	LWLockAcquire(fl_queue->lock, LW_EXCLUSIVE);
	my_slot->key = key;
	my_slot->ticket = fl_queue->next_ticket++;
	pg_atomic_fetch_add_u32(&fl_queue->nwaiting, 1);
	LWLockRelease(fl_queue->lock);
}

/* The resource this backend is queued for, or 0 (also without shared memory). */
uint64
fl_queue_my_key(void)
{
	if (fl_queue == NULL || my_slot == NULL)
		return 0;
	return my_slot->key;
}

/* The waiting slot with the lowest ticket for key, or NULL; caller holds the lock. */
static FlWaiter *
fl_queue_head(uint64 key)
{
	FlWaiter *head = NULL;

	for (int i = 0; i < fl_queue->nslots; i++)
	{
		FlWaiter *w = &fl_queue->slots[i];

		if (w->key == key && (head == NULL || w->ticket < head->ticket))
			head = w;
	}
	return head;
}

/* Without shared memory every waiter is its own head: it polls. */
bool
fl_queue_is_head(void)
{
	bool head;

	if (fl_queue == NULL || my_slot == NULL)
		return true;
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	head = fl_queue_head(my_slot->key) == my_slot;
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

/* Leave the queue; when we leave without the lease, the next waiter gets its turn to try. */
void
fl_queue_leave(bool wake_next)
{
	uint64 key;

	if (fl_queue == NULL || my_slot == NULL || my_slot->key == 0)
		return;
	ConditionVariableCancelSleep();
	LWLockAcquire(fl_queue->lock, LW_EXCLUSIVE);
	key = my_slot->key;
	my_slot->key = 0;
	my_slot->ticket = 0;
	pg_atomic_fetch_sub_u32(&fl_queue->nwaiting, 1);
	LWLockRelease(fl_queue->lock);
	if (wake_next)
		fl_queue_wake(key);
}

/* Wake the head waiter for a resource, if any: a release made its turn. */
void
fl_queue_wake(uint64 key)
{
	FlWaiter *head;

	if (fl_queue == NULL || pg_atomic_read_u32(&fl_queue->nwaiting) == 0)
		return;
	LWLockAcquire(fl_queue->lock, LW_SHARED);
	head = fl_queue_head(key);
	LWLockRelease(fl_queue->lock);
	if (head != NULL)
	{
		pg_atomic_write_u32(&head->woken, 1);
		ConditionVariableSignal(&head->cv);
	}
}

/* SQL: waiters queued for a resource; NULL without shared memory. */
Datum
fencelock_waiters(PG_FUNCTION_ARGS)
{
	if (fl_queue == NULL || PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_INT32(fl_queue_length(fl_resource_key(PG_GETARG_TEXT_PP(0))));
}
