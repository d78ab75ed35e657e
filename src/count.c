/*
 * count.c — counters that follow the transaction's outcome.
 *
 * A grant, renewal or release that is rolled back did not happen: the statistics must not count
 * it.  acquire_all rolls back the grants of a round it could not complete, and a caller may roll
 * back its own transaction or savepoint.  So these counts are kept per (sub)transaction level in
 * backend memory, handed to the parent level when a subtransaction commits, dropped when it
 * aborts, and added to the shared counters when the top-level transaction commits (or is
 * prepared).  Attempts as such (busy, refused, waits, rejected fences) count at once.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fencelock.h"
#include "shmem.h"
#include "utils/memutils.h"

/* pending[level - 1][counter]: counts made at that nesting level and not yet settled */
static uint64 (*pending)[FL_NUM_COUNTERS] = NULL;
static int pending_levels = 0; /* allocated */
static int pending_top = 0;    /* highest level with counts, 0 when none */
static bool callbacks_registered = false;

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
	if (pending_top == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* Every subtransaction has ended by now: all counts are at level 1. */
			for (int c = 0; c < FL_NUM_COUNTERS; c++)
				if (pending[0][c] > 0)
					fl_count((FlCounter) c, pending[0][c]);
			fl_pending_clear(1);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
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
