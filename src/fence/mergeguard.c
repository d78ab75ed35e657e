/*
 * fence/mergeguard.c — knowing, in a row trigger, whether a MERGE's UPDATE action assigned a
 * column.
 *
 * PostgreSQL reports to a BEFORE UPDATE row trigger the columns that the statement assigns
 * (tg_updatedcols).  For MERGE that is the union of the columns of all its UPDATE actions, on
 * every version from 15 on (the parser adds each action's columns to the one updatedCols set of
 * the target's range table entry, and ExecBRUpdateTriggers reports that set), so an action that
 * leaves the fence column alone looks as if it assigned it whenever another action does.  The
 * trigger cannot tell which action runs; it can tell whether every UPDATE action of the MERGE
 * assigns the column, from the plan of the statement that fires it.
 *
 * That statement is found with hooks on ExecutorRun and ExecutorFinish, where row triggers fire:
 * each call links a frame, on its own C stack, to a list of the statements being run, innermost
 * first, and unlinks it when it returns or an error passes through.  Nesting has no limit and
 * costs no allocation; the innermost frame is the statement whose row fires the trigger.
 *
 * Only a MERGE (or a statement with a data-modifying WITH, which may hold one) needs a frame of
 * its own, and so does every statement run inside one (so that it hides the MERGE from the
 * triggers it fires); every statement outside a MERGE runs without one, with no PG_TRY
 * (fl_needs_frame: a few instructions, row 6 of make bench-callgrind).  Outside the transaction
 * that loaded the library, a trigger fired with no frame is fired by no MERGE.
 *
 * Without shared_preload_libraries the library is loaded by the first call of one of its
 * functions in the session — often the fence trigger itself, in the middle of a statement — and
 * the statements already running then have no frame.  No statement outlives its transaction, so
 * until the transaction that loaded the library ends, a trigger that finds no frame may be fired
 * by one of them: it looks at the client's statement (ActivePortal) when the memory context it
 * is called in shows that the client's statement is the one firing it; otherwise it answers
 * FL_MERGE_UNKNOWN, and the trigger takes the stricter answer.  After that transaction, a
 * trigger fired with no frame is fired by no MERGE.  (Logical replication's workers apply
 * changes outside any statement; the fence trigger passes their changes before it asks.)
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/xact.h"
#include "compat.h"
#include "executor/executor.h"
#include "fence/mergeguard.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/memutils.h"
#include "utils/portal.h"

/* A statement being run: one per ExecutorRun or ExecutorFinish call in progress. */
typedef struct RunFrame
{
	QueryDesc *queryDesc;
	struct RunFrame *outer;
} RunFrame;

static ExecutorRun_hook_type prev_run = NULL;
static ExecutorFinish_hook_type prev_finish = NULL;
static bool installed = false;

/* The statement being run, innermost; NULL outside the executor. */
static RunFrame *innermost = NULL;

/* The library was loaded in this transaction, perhaps while statements ran that have no frame. */
static bool untracked_possible = false;

/*
 * Whether a statement about to run needs a frame: a MERGE or a data-modifying WITH; anything
 * inside a statement with a frame; anything while statements without one may be running.
 */
static inline bool
fl_needs_frame(QueryDesc *queryDesc)
{
	PlannedStmt *ps = queryDesc->plannedstmt;

	return innermost != NULL || untracked_possible || ps == NULL || ps->commandType == CMD_MERGE ||
		   ps->hasModifyingCTE;
}

static void
fl_executor_run(FL_EXECUTOR_RUN_PARAMS)
{
	RunFrame frame;

	if (!fl_needs_frame(queryDesc))
	{
		if (prev_run)
			prev_run(FL_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(FL_EXECUTOR_RUN_ARGS);
		return;
	}
	frame.queryDesc = queryDesc;
	frame.outer = innermost;
	innermost = &frame;
	PG_TRY();
	{
		if (prev_run)
			prev_run(FL_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(FL_EXECUTOR_RUN_ARGS);
	}
	PG_FINALLY();
	{
		innermost = frame.outer;
	}
	PG_END_TRY();
}

static void
fl_executor_finish(QueryDesc *queryDesc)
{
	RunFrame frame;

	if (!fl_needs_frame(queryDesc))
	{
		if (prev_finish)
			prev_finish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
		return;
	}
	frame.queryDesc = queryDesc;
	frame.outer = innermost;
	innermost = &frame;
	PG_TRY();
	{
		if (prev_finish)
			prev_finish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_FINALLY();
	{
		innermost = frame.outer;
	}
	PG_END_TRY();
}

/* No statement is running when a transaction ends, so every one from then on has its frame. */
static void
at_xact_end(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			untracked_possible = false;
			break;
		default:
			break;
	}
}

void
fl_merge_guard_init(void)
{
	if (installed)
		return;
	prev_run = ExecutorRun_hook;
	ExecutorRun_hook = fl_executor_run;
	prev_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = fl_executor_finish;
	/*
	 * Loaded inside a transaction (a function's first call, LOAD, CREATE EXTENSION): statements
	 * may be running.  Loaded by shared_preload_libraries, or at session start by
	 * session_preload_libraries: none is.
	 */
	untracked_possible = IsTransactionState();
	/* Preloaded, nothing is left to forget at a transaction's end: no callback to call. */
	if (untracked_possible)
		fl_xact_join(FL_XACT_MERGE_GUARD, at_xact_end, NULL);
	installed = true;
}

/* Does this UPDATE action's target list assign COLUMN?  (Its entries keep the column names.) */
static bool
action_assigns(MergeAction *action, const char *column)
{
	ListCell *lc;

	foreach (lc, action->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (!tle->resjunk && tle->resname != NULL && strcmp(tle->resname, column) == 0)
			return true;
	}
	return false;
}

/* FL_MERGE_NONE, _ALL or _PARTIAL for one plan node, if it is a MERGE. */
static FlMergeAssign
plan_assigns(Plan *plan, const char *column)
{
	ModifyTable *mt;
	ListCell *l1;
	bool any = false;

	if (plan == NULL || !IsA(plan, ModifyTable))
		return FL_MERGE_NONE;
	mt = (ModifyTable *) plan;
	if (mt->operation != CMD_MERGE)
		return FL_MERGE_NONE;
	foreach (l1, mt->mergeActionLists)
	{
		ListCell *l2;

		foreach (l2, (List *) lfirst(l1))
		{
			MergeAction *action = lfirst_node(MergeAction, l2);

			if (action->commandType != CMD_UPDATE)
				continue;
			if (!action_assigns(action, column))
				return FL_MERGE_PARTIAL;
			any = true;
		}
	}
	return any ? FL_MERGE_ALL : FL_MERGE_NONE;
}

/*
 * For one statement's plan: a MERGE, also one in a WITH clause (PostgreSQL 17 on), counts; any
 * MERGE in the plan is considered, which can only make the answer stricter.
 */
static FlMergeAssign
stmt_assigns(PlannedStmt *ps, const char *column)
{
	FlMergeAssign result;
	ListCell *lc;

	if (ps == NULL || (ps->commandType != CMD_MERGE && !ps->hasModifyingCTE))
		return FL_MERGE_NONE;
	result = plan_assigns(ps->planTree, column);
	if (result == FL_MERGE_PARTIAL)
		return result;
	foreach (lc, ps->subplans)
	{
		FlMergeAssign sub = plan_assigns((Plan *) lfirst(lc), column);

		if (sub == FL_MERGE_PARTIAL)
			return sub;
		if (sub == FL_MERGE_ALL)
			result = sub;
	}
	return result;
}

/*
 * With no frame: is the trigger fired by the client's own statement, the active portal's?  A row
 * trigger is called in the per-tuple memory context of the executor state of the statement that
 * fires it, a child of the context the statement was started in; a portal starts its statements
 * in its own context, while statements run by functions (SPI, SQL functions) start in contexts
 * of their own.  A portal of a utility command (EXPLAIN ANALYZE runs its statement in the
 * portal's context) does not count.  NIL when not shown.
 */
static List *
firing_portal_stmts(void)
{
	MemoryContext query_cxt = MemoryContextGetParent(CurrentMemoryContext);
	ListCell *lc;

	if (ActivePortal == NULL || query_cxt == NULL ||
		MemoryContextGetParent(query_cxt) != ActivePortal->portalContext)
		return NIL;
	foreach (lc, ActivePortal->stmts)
	{
		PlannedStmt *ps = (PlannedStmt *) lfirst(lc);

		if (!IsA(ps, PlannedStmt) || ps->commandType == CMD_UTILITY || ps->utilityStmt != NULL)
			return NIL;
	}
	return ActivePortal->stmts;
}

/*
 * For a BEFORE UPDATE row trigger, called in the memory context the trigger was called in: is
 * the statement that fires it a MERGE, and do all of its UPDATE actions assign COLUMN?
 */
FlMergeAssign
fl_merge_assigns(const char *column)
{
	List *stmts;
	FlMergeAssign result = FL_MERGE_NONE;
	ListCell *lc;

	if (innermost != NULL)
		return stmt_assigns(innermost->queryDesc->plannedstmt, column);
	/* Every MERGE has a frame, but for those started before the library was loaded. */
	if (!untracked_possible)
		return FL_MERGE_NONE;
	stmts = firing_portal_stmts();
	if (stmts != NIL)
	{
		foreach (lc, stmts)
		{
			FlMergeAssign one = stmt_assigns((PlannedStmt *) lfirst(lc), column);

			if (one == FL_MERGE_PARTIAL)
				return one;
			if (one == FL_MERGE_ALL)
				result = one;
		}
		return result;
	}
	return FL_MERGE_UNKNOWN;
}
