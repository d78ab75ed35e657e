/*
 * mergeguard.c — knowing, in a row trigger, whether a MERGE's UPDATE action assigned a column.
 *
 * PostgreSQL reports to a BEFORE UPDATE row trigger the columns that the statement assigns
 * (tg_updatedcols).  For MERGE that is the union of the columns of all its UPDATE actions, on
 * every version from 15 on (the parser adds each action's columns to the one updatedCols set of
 * the target's range table entry, and ExecBRUpdateTriggers reports that set), so an action that
 * leaves the fence column alone looks as if it assigned it whenever another action does.  The
 * trigger cannot tell which action runs; it can tell whether every UPDATE action of the MERGE
 * assigns the column.  This file keeps a stack of the statements being run (ExecutorRun and
 * ExecutorFinish, where row triggers fire) so that the trigger can look at the innermost one's
 * plan.
 */
#include "postgres.h"

#include "executor/executor.h"
#include "fencelock.h"
#include "mergeguard.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"

#define MAX_TRACKED 64

static ExecutorRun_hook_type prev_run = NULL;
static ExecutorFinish_hook_type prev_finish = NULL;
static bool installed = false;

/* The statements being run, innermost last; deeper nesting is counted but not kept. */
static QueryDesc *running[MAX_TRACKED];
static int depth = 0;

static void
push(QueryDesc *qd)
{
	if (depth < MAX_TRACKED)
		running[depth] = qd;
	depth++;
}

static void
fl_executor_run(FL_EXECUTOR_RUN_PARAMS)
{
	int saved = depth;

	push(queryDesc);
	PG_TRY();
	{
		if (prev_run)
			prev_run(FL_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(FL_EXECUTOR_RUN_ARGS);
	}
	PG_FINALLY();
	{
		depth = saved;
	}
	PG_END_TRY();
}

static void
fl_executor_finish(QueryDesc *queryDesc)
{
	int saved = depth;

	push(queryDesc);
	PG_TRY();
	{
		if (prev_finish)
			prev_finish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_FINALLY();
	{
		depth = saved;
	}
	PG_END_TRY();
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
 * No statement tracked: the library was loaded while the statement ran (its first call, without
 * shared_preload_libraries), or the trigger fires outside the executor (COPY has no UPDATE;
 * logical replication applies no MERGE).  The client's own statement is still known.
 */
static FlMergeAssign
portal_assigns(const char *column)
{
	ListCell *lc;

	if (ActivePortal == NULL)
		return FL_MERGE_UNKNOWN;
	foreach (lc, ActivePortal->stmts)
	{
		PlannedStmt *ps = (PlannedStmt *) lfirst(lc);

		if (IsA(ps, PlannedStmt) && ps->commandType == CMD_MERGE)
			return plan_assigns(ps->planTree, column) == FL_MERGE_PARTIAL ? FL_MERGE_PARTIAL
																		  : FL_MERGE_UNKNOWN;
	}
	return FL_MERGE_UNKNOWN;
}

/*
 * For a BEFORE UPDATE row trigger: is the statement that fires it a MERGE, and do all of its
 * UPDATE actions assign COLUMN?  A MERGE in a WITH clause (PostgreSQL 17 on) counts too: any
 * MERGE in the innermost statement's plan is considered, which can only make the answer
 * stricter.
 */
FlMergeAssign
fl_merge_assigns(const char *column)
{
	PlannedStmt *ps;
	FlMergeAssign result;
	ListCell *lc;

	if (depth == 0)
		return portal_assigns(column);
	if (depth > MAX_TRACKED)
		return FL_MERGE_UNKNOWN;
	ps = running[depth - 1]->plannedstmt;
	if (ps == NULL)
		return FL_MERGE_NONE;
	if (ps->commandType != CMD_MERGE && !ps->hasModifyingCTE)
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
