/*
 * wait/taskqueue.c — waking workers that wait in claim(..., wait => ...) when rows become
 * claimable.
 *
 * enable_tasks installs two statement triggers that call fencelock_task_wake.  AFTER INSERT ...
 * REFERENCING NEW TABLE counts the inserted rows that are claimable (ready, and due: the trigger's
 * arguments name the state and run_after columns).  AFTER UPDATE counts each UPDATE statement as
 * one wake-up of unknown size, except the statements of claim, heartbeat, complete and fail
 * themselves (fl_task_wait_set_own): claim and complete never make a row claimable, and fail
 * announces the row it makes ready at once itself (fl_task_wake_pending).  A row trigger would
 * know each updated row, but measured 17 000 instructions per UPDATE (its WHEN clause is read
 * from text and compiled for every statement), 8 % of a claim + complete cycle; a transition
 * table on UPDATE would copy every row claim and complete update.  The statement trigger costs
 * about 4 000 per UPDATE statement (doc/bench.md).
 *
 * Nothing is signalled at trigger time: at XACT_EVENT_COMMIT, when the rows are visible to every
 * new snapshot, the counts are handed to the waiters of that table (a rolled-back transaction or
 * subtransaction wakes nobody; PREPARE TRANSACTION hands over nothing, and the waiters' backstop
 * finds its rows).
 *
 * Waiters register in shared memory (one slot per PGPROC: database, table, max_rows, and a ticket
 * that orders them by arrival).  A commit that made n rows claimable wakes the oldest waiters of
 * the table, by setting their latch, until their max_rows add up to n: never two workers for one
 * row.  An UPDATE's wake-up, of unknown size, wakes one waiter and marks it to pass it on: having
 * claimed a full max_rows, it wakes the next waiter the same way (fl_task_wake_next), since more
 * rows may be there.  A waiter ignores latch wake-ups that are not its own, and tries again at
 * most every fencelock.claim_recheck: the backstop that finds rows no commit announced (leases
 * that lapsed, run_after reached, rows written straight into a partition, whose statements fire
 * only the partition's own statement triggers).
 *
 * The slots are a part of shmem.c's shared memory, under FL_LOCK_TASK_WAITS (the protocol is in
 * shmem.c's header); without shared_preload_libraries the waiting claim polls every
 * fencelock.claim_recheck.
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "base/args.h"
#include "base/monotonic.h"
#include "catalog/partition.h"
#include "commands/trigger.h"
#include "compat.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "pgstat.h"
#include "preload.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "wait/taskqueue.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(fencelock_task_wake);
PG_FUNCTION_INFO_V1(fencelock_task_waiters);

typedef struct TaskWaiter
{
	Oid dbid;
	Oid relid; /* InvalidOid: the slot is free */
	int32 max_rows;
	bool woken;
	bool pass_on;  /* woken by a wake-up of unknown size: a full batch wakes the next waiter */
	uint64 ticket; /* arrival order */
} TaskWaiter;

typedef struct TaskWaiters
{
	LWLock *lock;
	uint64 next_ticket;
	uint64 wakeups; /* waiters woken by commits (and by full batches), since the server started */
	int nslots;
	TaskWaiter slots[FLEXIBLE_ARRAY_MEMBER]; /* indexed by pgprocno */
} TaskWaiters;

static TaskWaiters *task_waiters = NULL;
static bool exit_callback_set = false;

/* The task table whose statements claim runs now: its wake trigger counts nothing. */
static Oid task_own_relid = InvalidOid;

/* Rows made claimable by this transaction, per table and subtransaction level. */
typedef struct PendingWake
{
	Oid relid;    /* the trigger's relation */
	Oid target;   /* the task table waiters wait on: the root of a partition tree */
	int level;    /* transaction nesting level */
	bool unknown; /* UPDATE statements: rows counts statements, not rows */
	int64 rows;
} PendingWake;

/* Whether the wake-up this waiter took last was of unknown size (to be passed on). */
static bool my_pass_on = false;

static PendingWake *pending = NULL;
static int npending = 0;
static int maxpending = 0;
static bool callbacks_set = false;

/* nslots: one per PGPROC (shmem.c) */
Size
fl_task_wait_shmem_size(int nslots)
{
	return add_size(offsetof(TaskWaiters, slots), mul_size(nslots, sizeof(TaskWaiter)));
}

/* Attach, and initialise when created (with its lock); the caller holds AddinShmemInitLock. */
void
fl_task_wait_shmem_attach(int nslots, LWLock *lock)
{
	bool found;

	task_waiters = ShmemInitStruct("fencelock task waits", fl_task_wait_shmem_size(nslots), &found);
	if (!found)
	{
		Assert(lock != NULL);
		task_waiters->lock = lock;
		task_waiters->next_ticket = 1;
		task_waiters->wakeups = 0;
		task_waiters->nslots = nslots;
		memset(task_waiters->slots, 0, task_waiters->nslots * sizeof(TaskWaiter));
	}
}

/* ---------------------------------------------------------------------------------------------
 * Waiters
 * ---------------------------------------------------------------------------------------------
 */

static TaskWaiter *
my_slot(void)
{
	Assert(FL_MY_PROCNO < task_waiters->nslots);
	return &task_waiters->slots[FL_MY_PROCNO];
}

static void
task_wait_exit(int code, Datum arg)
{
	fl_task_wait_leave();
}

/* Register this backend as a waiter on the table (a no-op without shared memory). */
void
fl_task_wait_enter(Oid relid, int32 max_rows)
{
	TaskWaiter *w;

	if (task_waiters == NULL)
		return;
	if (!exit_callback_set)
	{
		/* A backend that ends (FATAL) inside a wait must not stay registered. */
		before_shmem_exit(task_wait_exit, (Datum) 0);
		exit_callback_set = true;
	}
	w = my_slot();
	LWLockAcquire(task_waiters->lock, LW_EXCLUSIVE);
	w->dbid = MyDatabaseId;
	w->relid = relid;
	w->max_rows = max_rows;
	w->woken = false;
	w->pass_on = false;
	w->ticket = task_waiters->next_ticket++;
	my_pass_on = false;
	LWLockRelease(task_waiters->lock);
}

void
fl_task_wait_leave(void)
{
	TaskWaiter *w;

	if (task_waiters == NULL || MyProc == NULL)
		return;
	w = my_slot();
	if (w->relid == InvalidOid)
		return;
	LWLockAcquire(task_waiters->lock, LW_EXCLUSIVE);
	w->relid = InvalidOid;
	w->woken = false;
	LWLockRelease(task_waiters->lock);
}

/* Whether a commit woke this waiter since the last call; clears the flag. */
static bool
task_wait_take_wakeup(void)
{
	TaskWaiter *w;
	bool woken;

	if (task_waiters == NULL)
		return false;
	w = my_slot();
	LWLockAcquire(task_waiters->lock, LW_EXCLUSIVE);
	woken = w->woken;
	if (woken)
		my_pass_on = w->pass_on;
	w->woken = false;
	LWLockRelease(task_waiters->lock);
	return woken;
}

/*
 * Sleep until a commit wakes this waiter or timeout_ms pass.  Latch wake-ups meant for something
 * else (the latch is shared) do not end the sleep.  Returns whether a commit woke it.
 */
bool
fl_task_wait_sleep(long timeout_ms)
{
	int64 end = fl_mono_us() + (int64) timeout_ms * 1000;

	for (;;)
	{
		long left = (long) ((end - fl_mono_us() + 999) / 1000);
		int rc;

		if (task_wait_take_wakeup())
			return true;
		if (left <= 0)
			return false;
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left,
					   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Wake the oldest waiters of a table until their max_rows cover rows.  Runs after a commit: it
 * must not fail, so it only takes the lock and sets latches.
 */
static void task_wake(Oid dbid, Oid relid, int64 rows, bool unknown);

/*
 * A waiter (gone from the queue) that claimed a full batch: if the wake-up it took was of unknown
 * size, more rows may be there: pass it on to the next waiter.
 */
void
fl_task_wake_next(Oid relid)
{
	if (task_waiters != NULL && my_pass_on)
		task_wake(MyDatabaseId, relid, 1, true);
	my_pass_on = false;
}

static void
task_wake(Oid dbid, Oid relid, int64 rows, bool unknown)
{
	int woken[64];
	int nwoken = 0;

	LWLockAcquire(task_waiters->lock, LW_EXCLUSIVE);
	while (rows > 0 && nwoken < lengthof(woken))
	{
		int best = -1;

		for (int i = 0; i < task_waiters->nslots; i++)
		{
			TaskWaiter *w = &task_waiters->slots[i];

			if (w->relid == relid && w->dbid == dbid && !w->woken &&
				(best < 0 || w->ticket < task_waiters->slots[best].ticket))
				best = i;
		}
		if (best < 0)
			break;
		task_waiters->slots[best].woken = true;
		task_waiters->slots[best].pass_on = unknown;
		task_waiters->wakeups++;
		rows -= Max(task_waiters->slots[best].max_rows, 1);
		woken[nwoken++] = best;
	}
	LWLockRelease(task_waiters->lock);
	for (int i = 0; i < nwoken; i++)
		SetLatch(&ProcGlobal->allProcs[woken[i]].procLatch);
}

/* ---------------------------------------------------------------------------------------------
 * Wakers: the trigger counts, the commit hands over
 * ---------------------------------------------------------------------------------------------
 */

static void
task_wake_xact_cb(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (task_waiters != NULL)
				for (int i = 0; i < npending; i++)
					task_wake(MyDatabaseId, pending[i].target, pending[i].rows, pending[i].unknown);
			npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_ABORT:
			npending = 0;
			break;
		default:
			break;
	}
}

static void
task_wake_subxact_cb(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
					 void *arg)
{
	int level = GetCurrentTransactionNestLevel();
	int n = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < npending; i++)
	{
		if (pending[i].level >= level)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
				continue; /* rolled back: its rows are gone */
			pending[i].level = level - 1;
		}
		pending[n++] = pending[i];
	}
	npending = n;
}

/* The table waiters of relid wait on: relid, or the root of its partition tree. */
static Oid
wake_target(Oid relid)
{
	List *ancestors;

	if (!get_rel_relispartition(relid))
		return relid;
	ancestors = get_partition_ancestors(relid);
	return ancestors != NIL ? llast_oid(ancestors) : relid;
}

/*
 * Count rows that became claimable in relid (the table or a partition of it); with unknown, rows
 * counts statements that may have made some claimable.
 */
void
fl_task_wake_pending(Oid relid, int64 rows, bool unknown)
{
	int level = GetCurrentTransactionNestLevel();
	PendingWake *p = NULL;

	for (int i = npending - 1; i >= 0; i--)
		if (pending[i].relid == relid && pending[i].level == level && pending[i].unknown == unknown)
		{
			p = &pending[i];
			break;
		}
	if (p == NULL)
	{
		Oid target = wake_target(relid);

		if (!callbacks_set)
		{
			fl_xact_join(FL_XACT_TASK_WAKE, task_wake_xact_cb, task_wake_subxact_cb);
			callbacks_set = true;
		}
		if (npending == maxpending)
		{
			maxpending = Max(8, maxpending * 2);
			pending = pending == NULL
						  ? MemoryContextAlloc(TopMemoryContext, maxpending * sizeof(PendingWake))
						  : repalloc(pending, maxpending * sizeof(PendingWake));
		}
		p = &pending[npending++];
		p->relid = relid;
		p->target = target;
		p->level = level;
		p->unknown = unknown;
		p->rows = 0;
	}
	p->rows += rows;
}

/*
 * The claimable rows among an INSERT's new rows: state 'ready' and, with a run_after column
 * (the second trigger argument), run_after NULL or reached.
 */
static int64
count_claimable(TriggerData *td)
{
	Relation rel = td->tg_relation;
	Trigger *tg = td->tg_trigger;
	AttrNumber state_att;
	AttrNumber run_after_att = InvalidAttrNumber;
	TupleTableSlot *slot;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	int64 n = 0;

	if (td->tg_newtable == NULL || tg->tgnargs < 1)
		return 1; /* not as enable_tasks made it: one wake-up of unknown size */
	state_att = attnameAttNum(rel, tg->tgargs[0], false);
	if (tg->tgnargs > 1)
		run_after_att = attnameAttNum(rel, tg->tgargs[1], false);
	if (state_att <= 0 || (tg->tgnargs > 1 && run_after_att <= 0))
		return 1; /* a column renamed since: one wake-up (the next enable_tasks fixes the names) */
	slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsMinimalTuple);
	tuplestore_rescan(td->tg_newtable);
	while (tuplestore_gettupleslot(td->tg_newtable, true, false, slot))
	{
		bool isnull;
		Datum d = slot_getattr(slot, state_att, &isnull);
		text *state;

		if (isnull)
			continue;
		state = DatumGetTextPP(d);
		if (VARSIZE_ANY_EXHDR(state) != 5 || memcmp(VARDATA_ANY(state), "ready", 5) != 0)
			continue;
		if (run_after_att != InvalidAttrNumber)
		{
			d = slot_getattr(slot, run_after_att, &isnull);
			if (!isnull && DatumGetTimestampTz(d) > now)
				continue;
		}
		n++;
	}
	ExecDropSingleTupleTableSlot(slot);
	return n;
}

/* Claim's statements on RELID run now (InvalidOid: none run); returns the table set before. */
Oid
fl_task_wait_set_own(Oid relid)
{
	Oid before = task_own_relid;

	task_own_relid = relid;
	return before;
}

/*
 * The wake triggers: AFTER INSERT (with the new rows as a transition table) counts the rows that
 * are claimable; AFTER UPDATE counts the statement, unless it is claim/claim.c's own.
 */
Datum
fencelock_task_wake(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Oid relid;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(td->tg_event))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
						errmsg("fencelock.task_wake must be called as an AFTER STATEMENT trigger"),
						errhint("fencelock.enable_tasks installs it.")));
	relid = RelationGetRelid(td->tg_relation);
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
	{
		int64 n = count_claimable(td);

		if (n > 0)
			fl_task_wake_pending(relid, n, td->tg_newtable == NULL || td->tg_trigger->tgnargs < 1);
	}
	else if (relid != task_own_relid)
		fl_task_wake_pending(relid, 1, true);
	return PointerGetDatum(NULL);
}

/*
 * task_waiters(tbl): the claims waiting on the table now, and the wake-ups delivered to waiting
 * claims of every table since the server started.
 */
Datum
fencelock_task_waiters(PG_FUNCTION_ARGS)
{
	Oid relid;
	TupleDesc desc;
	Datum values[2];
	bool nulls[2] = {false, false};
	int32 waiting = 0;
	uint64 wakeups;

	fl_arg_not_null(fcinfo, 0, "tbl", "Pass the task table, e.g. 'jobs'.");
	fl_require_preload(task_waiters != NULL, "fencelock.task_waiters");
	relid = PG_GETARG_OID(0);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	LWLockAcquire(task_waiters->lock, LW_SHARED);
	for (int i = 0; i < task_waiters->nslots; i++)
		if (task_waiters->slots[i].relid == relid && task_waiters->slots[i].dbid == MyDatabaseId)
			waiting++;
	wakeups = task_waiters->wakeups;
	LWLockRelease(task_waiters->lock);
	values[0] = Int32GetDatum(waiting);
	values[1] = Int64GetDatum((int64) wakeups);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
