/*
 * count.c — counters that follow the transaction's outcome.
 *
 * A grant, renewal or release that is rolled back did not happen: the statistics must not count
 * it.  acquire_all rolls back the grants of a round it could not complete, and a caller may roll
 * back its own transaction or savepoint.  So these counts are kept per (sub)transaction level in
 * backend memory, handed to the parent level when a subtransaction commits, dropped when it
 * aborts, and added to the shared counters when the top-level transaction commits.  Attempts as
 * such (busy, refused, waits, rejected fences) count at once.
 *
 * A prepared transaction commits or rolls back later, usually in another backend (COMMIT PREPARED
 * or ROLLBACK PREPARED), and an extension cannot add records to its two-phase state.  So at
 * PREPARE TRANSACTION (XACT_EVENT_PRE_PREPARE, while the transaction can still fail) its counts
 * go to a slot in shared memory under its transaction ID, and a slot is settled once that
 * transaction is no longer in progress: counted if it committed, dropped if it rolled back.
 * Settling looks at the commit log, not at which command ended the transaction, so it is exact
 * whoever ends it; it runs after every COMMIT PREPARED and ROLLBACK PREPARED statement (the
 * ProcessUtility hook), before fencelock.stats and stats_reset read or reset the counters, and
 * when the slots run out.  Shared memory does not survive a restart: a transaction prepared
 * before one is not counted.
 *
 * Locking: fl_prepared->lock guards the slots (exclusive to fill, free or settle a slot).  Settling
 * also holds XactTruncationLock shared, so the commit log it reads is not truncated meanwhile.
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "shmem.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/memutils.h"

/* pending[level - 1][counter]: counts made at that nesting level and not yet settled */
static uint64 (*pending)[FL_NUM_COUNTERS] = NULL;
static int pending_levels = 0; /* allocated */
static int pending_top = 0;    /* highest level with counts, 0 when none */
static bool callbacks_registered = false;

/* The counts of a prepared transaction, until it ends; xid InvalidTransactionId when free. */
typedef struct FlPreparedSlot
{
	TransactionId xid;
	uint64 counts[FL_NUM_COUNTERS];
} FlPreparedSlot;

typedef struct FlPrepared
{
	LWLock *lock;
	int nslots;
	FlPreparedSlot slots[FLEXIBLE_ARRAY_MEMBER];
} FlPrepared;

static FlPrepared *fl_prepared = NULL;
static int my_prepared_slot = -1; /* filled at PRE_PREPARE; freed if the PREPARE then fails */
static TransactionId my_prepared_xid = InvalidTransactionId;
static ProcessUtility_hook_type prev_utility = NULL;

/*
 * One slot per possible prepared transaction, and one per backend for a transaction between
 * XACT_EVENT_PRE_PREPARE and its prepare (or failure): settled slots are then always enough.
 */
static int
fl_prepared_nslots(void)
{
	return max_prepared_xacts > 0 ? max_prepared_xacts + MaxBackends : 0;
}

Size
fl_prepared_shmem_size(void)
{
	return add_size(offsetof(FlPrepared, slots),
					mul_size(fl_prepared_nslots(), sizeof(FlPreparedSlot)));
}

/* Attach (and in the postmaster, initialise); the caller holds AddinShmemInitLock. */
void
fl_prepared_shmem_startup(void)
{
	bool found;

	fl_prepared = ShmemInitStruct("fencelock prepared counts", fl_prepared_shmem_size(), &found);
	if (!found)
	{
		fl_prepared->lock = fl_shmem_lock(FL_LOCK_PREPARED);
		fl_prepared->nslots = fl_prepared_nslots();
		for (int i = 0; i < fl_prepared->nslots; i++)
			fl_prepared->slots[i].xid = InvalidTransactionId;
	}
}

/*
 * Count the slots of prepared transactions that have ended and free them; returns how many slots
 * are free.  A transaction older than the commit log's oldest entry (which no reader of the
 * counters or COMMIT PREPARED saw end, for a long time) can no longer be told: dropped.
 */
int
fl_prepared_settle(void)
{
	int free = 0;
	bool clog_locked = false;

	if (fl_prepared == NULL || fl_prepared->nslots == 0)
		return 0;
	LWLockAcquire(fl_prepared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < fl_prepared->nslots; i++)
	{
		FlPreparedSlot *slot = &fl_prepared->slots[i];

		if (TransactionIdIsValid(slot->xid))
		{
			if (!clog_locked)
				LWLockAcquire(XactTruncationLock, LW_SHARED);
			clog_locked = true;
			if (!TransactionIdPrecedes(slot->xid, FL_OLDEST_CLOG_XID))
			{
				if (TransactionIdIsInProgress(slot->xid))
					continue;
				if (TransactionIdDidCommit(slot->xid))
					for (int c = 0; c < FL_NUM_COUNTERS; c++)
						if (slot->counts[c] > 0)
							fl_count((FlCounter) c, slot->counts[c]);
			}
			slot->xid = InvalidTransactionId;
		}
		free++;
	}
	if (clog_locked)
		LWLockRelease(XactTruncationLock);
	LWLockRelease(fl_prepared->lock);
	return free;
}

/* A slot for the transaction being prepared, with its counts; -1 when none is free. */
static int
fl_prepared_fill(TransactionId xid)
{
	for (int attempt = 0; attempt < 2; attempt++)
	{
		int found = -1;

		LWLockAcquire(fl_prepared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < fl_prepared->nslots && found < 0; i++)
			if (!TransactionIdIsValid(fl_prepared->slots[i].xid))
				found = i;
		if (found >= 0)
		{
			fl_prepared->slots[found].xid = xid;
			memcpy(fl_prepared->slots[found].counts, pending[0], sizeof(pending[0]));
		}
		LWLockRelease(fl_prepared->lock);
		if (found >= 0 || fl_prepared_settle() == 0)
			return found;
	}
	return -1;
}

/* The PREPARE failed after PRE_PREPARE: its transaction aborts, and the slot goes with it. */
static void
fl_prepared_free_mine(void)
{
	if (my_prepared_slot < 0)
		return;
	LWLockAcquire(fl_prepared->lock, LW_EXCLUSIVE);
	/* Unless a settle found the transaction aborted already and freed the slot. */
	if (TransactionIdEquals(fl_prepared->slots[my_prepared_slot].xid, my_prepared_xid))
		fl_prepared->slots[my_prepared_slot].xid = InvalidTransactionId;
	LWLockRelease(fl_prepared->lock);
	my_prepared_slot = -1;
}

static void
fl_pending_clear(int from_level)
{
	for (int l = from_level; l <= pending_top; l++)
		memset(pending[l - 1], 0, sizeof(pending[0]));
	pending_top = Min(pending_top, from_level - 1);
}

static void
fl_count_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			/* Every subtransaction has ended by now: all counts are at level 1. */
			for (int c = 0; pending_top > 0 && c < FL_NUM_COUNTERS; c++)
				if (pending[0][c] > 0)
					fl_count((FlCounter) c, pending[0][c]);
			fl_pending_clear(1);
			break;
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * May still raise an error (settling reads the commit log): the PREPARE then fails.
			 * The transaction ID is assigned by now, and stays in progress until COMMIT PREPARED
			 * or ROLLBACK PREPARED ends the prepared transaction, or the PREPARE fails.
			 */
			my_prepared_xid = GetTopTransactionIdIfAny();
			if (pending_top > 0 && fl_prepared != NULL && fl_prepared->nslots > 0 &&
				TransactionIdIsValid(my_prepared_xid))
				my_prepared_slot = fl_prepared_fill(my_prepared_xid);
			fl_pending_clear(1);
			break;
		case XACT_EVENT_PREPARE:
			/* Prepared: the slot is the prepared transaction's now. */
			my_prepared_slot = -1;
			fl_pending_clear(1);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			fl_prepared_free_mine();
			fl_pending_clear(1);
			break;
		default:
			break;
	}
}

static void
fl_count_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int level = GetCurrentTransactionNestLevel();

	if (level > pending_top)
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int c = 0; c < FL_NUM_COUNTERS; c++)
			pending[level - 2][c] += pending[level - 1][c];
		fl_pending_clear(level);
		pending_top = Max(pending_top, level - 1);
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		fl_pending_clear(level);
}

/* Count n at the commit of the current (sub)transaction and of all its parents. */
void
fl_count_at_commit(FlCounter counter, uint64 n)
{
	int level = GetCurrentTransactionNestLevel();

	if (!fl_shmem_ready() || level < 1)
		return;
	if (!callbacks_registered)
	{
		RegisterXactCallback(fl_count_xact_callback, NULL);
		RegisterSubXactCallback(fl_count_subxact_callback, NULL);
		callbacks_registered = true;
	}
	if (level > pending_levels)
	{
		int want = Max(level, Max(8, pending_levels * 2));

		if (pending == NULL)
			pending = MemoryContextAllocZero(TopMemoryContext, sizeof(pending[0]) * want);
		else
		{
			pending = repalloc(pending, sizeof(pending[0]) * want);
			memset(pending[pending_levels], 0, sizeof(pending[0]) * (want - pending_levels));
		}
		pending_levels = want;
	}
	pending[level - 1][counter] += n;
	pending_top = Max(pending_top, level);
}

/* After a COMMIT PREPARED or ROLLBACK PREPARED that succeeded: settle at once. */
static void
fl_count_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				 ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *queryEnv,
				 DestReceiver *dest, QueryCompletion *qc)
{
	Node *parsetree = pstmt->utilityStmt;
	bool ends_prepared = IsA(parsetree, TransactionStmt) &&
						 (((TransactionStmt *) parsetree)->kind == TRANS_STMT_COMMIT_PREPARED ||
						  ((TransactionStmt *) parsetree)->kind == TRANS_STMT_ROLLBACK_PREPARED);

	if (prev_utility)
		prev_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest,
								qc);
	if (ends_prepared)
		(void) fl_prepared_settle();
}

/* Called from _PG_init while shared_preload_libraries is being processed. */
void
fl_count_init(void)
{
	prev_utility = ProcessUtility_hook;
	ProcessUtility_hook = fl_count_utility;
}
