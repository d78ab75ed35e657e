/*
 * observe/count.c — counters that follow the transaction's outcome.
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
 * go to a slot in shared memory under its transaction ID (observe/stats.c: fl_prepared_fill),
 * settled once that transaction is no longer in progress: counted if it committed, dropped if it
 * rolled back.  The ProcessUtility hook settles after every COMMIT PREPARED and ROLLBACK PREPARED.
 *
 * The counts wait here in backend memory; the shared counters and the prepared transactions'
 * slots are observe/stats.c's.  Without preload nothing is counted.
 *
 * Per-resource grants, renewals and releases (observe/resstats.c) follow the transaction the same
 * way: held here as a list of events in the order they were made, each with its nesting level (the
 * events of an open subtransaction are always the list's tail), relabelled to the parent level
 * when a subtransaction commits, cut off when it aborts, applied at the commit.  A prepared
 * transaction's per-resource events are dropped at PREPARE: it has no place to keep them.
 *
 * The list lives for one transaction in a context of its own ("fencelock pending events"), and
 * an array only grows: one transaction of millions of grants, renewals and releases would keep
 * its size, about 64 bytes an event, for the rest of the session.  A list that grew past
 * FL_EVENTS_KEEP events is given back at the transaction's end instead (issue 35's search for
 * unbounded inputs, as fence/bound.c drops its large table of fences shown).  So are the counts
 * per level once they grew past FL_LEVELS_KEEP levels (128 bytes a level: a grant under
 * thousands of nested savepoints).
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/transam.h"
#include "access/xact.h"
#include "observe/count.h"
#include "miscadmin.h"
#include "observe/resstats.h"
#include "observe/stats.h"
#include "tcop/utility.h"
#include "utils/memutils.h"

/* pending[level - 1][counter]: counts made at that nesting level and not yet settled */
static uint64 (*pending)[FL_NUM_COUNTERS] = NULL;
static int pending_levels = 0; /* allocated */
static int pending_top = 0;    /* highest level with counts, 0 when none */
static bool callbacks_registered = false;

/* Per-resource events not yet committed: the name (in TopTransactionContext), the level */
typedef struct FlPendingEvent
{
	char *name;
	int len;
	int level;
	FlResEvent event;
} FlPendingEvent;

/* The most events, and nesting levels, whose memory a session keeps after their transaction */
#define FL_EVENTS_KEEP 1024
#define FL_LEVELS_KEEP 64

static MemoryContext events_cxt = NULL;
static FlPendingEvent *events = NULL;
static int events_allocated = 0;
static int nevents = 0;

static int my_prepared_slot = -1; /* filled at PRE_PREPARE; freed if the PREPARE then fails */
static TransactionId my_prepared_xid = InvalidTransactionId;
static ProcessUtility_hook_type prev_utility = NULL;

/* The PREPARE failed after PRE_PREPARE: its transaction aborts, and the slot goes with it. */
static void
fl_prepared_free_mine(void)
{
	if (my_prepared_slot < 0)
		return;
	fl_prepared_free(my_prepared_slot, my_prepared_xid);
	my_prepared_slot = -1;
}

static void
fl_pending_clear(int from_level)
{
	for (int l = from_level; l <= pending_top; l++)
		memset(pending[l - 1], 0, sizeof(pending[0]));
	pending_top = Min(pending_top, from_level - 1);
}

/*
 * The transaction ended: its counts and events are settled or dropped; a large list, or counts
 * of many levels, give back their memory.
 */
static void
fl_xact_clear(void)
{
	fl_pending_clear(1);
	nevents = 0;
	if (events_allocated > FL_EVENTS_KEEP)
	{
		MemoryContextReset(events_cxt);
		events = NULL;
		events_allocated = 0;
	}
	if (pending_levels > FL_LEVELS_KEEP)
	{
		pfree(pending);
		pending = NULL;
		pending_levels = 0;
	}
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
			for (int i = 0; i < nevents; i++)
				fl_resstats_apply(MyDatabaseId, events[i].name, events[i].len, &events[i].event);
			fl_xact_clear();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * May still raise an error (settling reads the commit log): the PREPARE then fails.
			 * The transaction ID is assigned by now, and stays in progress until COMMIT PREPARED
			 * or ROLLBACK PREPARED ends the prepared transaction, or the PREPARE fails.
			 */
			my_prepared_xid = GetTopTransactionIdIfAny();
			if (pending_top > 0 && TransactionIdIsValid(my_prepared_xid))
				my_prepared_slot = fl_prepared_fill(my_prepared_xid, pending[0]);
			fl_pending_clear(1);
			break;
		case XACT_EVENT_PREPARE:
			/* Prepared: the slot is the prepared transaction's now. */
			my_prepared_slot = -1;
			fl_xact_clear();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			fl_prepared_free_mine();
			fl_xact_clear();
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

	/* The events of this subtransaction are the list's tail. */
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		for (int i = nevents - 1; i >= 0 && events[i].level >= level; i--)
			events[i].level = level - 1;
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		while (nevents > 0 && events[nevents - 1].level >= level)
			nevents--;
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

static void
fl_count_register(void)
{
	if (!callbacks_registered)
	{
		fl_xact_join(FL_XACT_COUNT, fl_count_xact_callback, fl_count_subxact_callback);
		callbacks_registered = true;
	}
}

/* Count n at the commit of the current (sub)transaction and of all its parents. */
void
fl_count_at_commit(FlCounter counter, uint64 n)
{
	int level = GetCurrentTransactionNestLevel();

	if (!fl_stats_kept() || level < 1)
		return;
	fl_count_register();
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

/* A grant, renewal or release of RESOURCE, applied to its row when the transaction commits. */
void
fl_count_resource_at_commit(text *resource, FlResEventKind kind, int64 fence, TimestampTz at,
							TimestampTz expires, bool takeover)
{
	int level = GetCurrentTransactionNestLevel();
	FlPendingEvent *p;

	if (!fl_resstats_kept() || level < 1)
		return;
	fl_count_register();
	if (nevents == events_allocated)
	{
		int want = Max(16, events_allocated * 2);

		if (events_cxt == NULL)
			events_cxt = AllocSetContextCreate(TopMemoryContext, "fencelock pending events",
											   ALLOCSET_SMALL_SIZES);
		events = events == NULL ? MemoryContextAlloc(events_cxt, sizeof(FlPendingEvent) * want)
								: repalloc(events, sizeof(FlPendingEvent) * want);
		events_allocated = want;
	}
	p = &events[nevents];
	p->event.kind = kind;
	p->event.fence = fence;
	p->event.at = at;
	p->event.expires = expires;
	p->event.takeover = takeover;
	fl_resstats_touch(resource, &p->event);
	if (p->event.entry == NULL)
		return; /* no row to count in */
	p->len = VARSIZE_ANY_EXHDR(resource);
	p->name = MemoryContextAlloc(TopTransactionContext, p->len);
	memcpy(p->name, VARDATA_ANY(resource), p->len);
	p->level = level;
	nevents++;
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
