/*
 * base/xact.c — the one pair of transaction callbacks every part of fencelock shares.
 *
 * PostgreSQL calls transaction callbacks in the reverse order of their registration, so parts
 * that registered their own on first use ran in an order that differed between backends (the one
 * in which each backend happened to use them).  Here a part joins on its first use, as before, but
 * is called in the order of FlXactPart (base/xact.h), whatever the order of joining: first the
 * decision that the commit must be durable, then the counts, then the session's bindings, then
 * the wake-ups (a waiter woken by this commit finds it counted), and last the caches that only
 * forget.  src/README.md ("Transaction callbacks") states what each may assume.
 *
 * The callbacks are registered with PostgreSQL on the first join, so a backend that never uses
 * fencelock never runs them.
 */
#include "postgres.h"

#include "base/xact.h"

static XactCallback part_xact[FL_XACT_NUM_PARTS];
static SubXactCallback part_subxact[FL_XACT_NUM_PARTS];
static bool registered = false;
static bool dispatching = false;

/*
 * While the parts are called, none may join (a join from a callback would be called in this same
 * round or not, depending on its place).  An error in a callback leaves the flag set until the
 * abort's round, which starts afresh; no statement runs in between.
 */
static void
fl_xact_dispatch(XactEvent event, void *arg)
{
	dispatching = true;
	for (int p = 0; p < FL_XACT_NUM_PARTS; p++)
		if (part_xact[p] != NULL)
			part_xact[p](event, NULL);
	dispatching = false;
}

static void
fl_subxact_dispatch(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
					void *arg)
{
	dispatching = true;
	for (int p = 0; p < FL_XACT_NUM_PARTS; p++)
		if (part_subxact[p] != NULL)
			part_subxact[p](event, mySubid, parentSubid, NULL);
	dispatching = false;
}

void
fl_xact_join(FlXactPart part, XactCallback xact, SubXactCallback subxact)
{
	Assert(part >= 0 && part < FL_XACT_NUM_PARTS);
	/* A part joins on its first use, in a transaction, never from another part's callback. */
	Assert(!dispatching);
	Assert(part_xact[part] == NULL || part_xact[part] == xact);
	part_xact[part] = xact;
	part_subxact[part] = subxact;
	if (!registered)
	{
		RegisterXactCallback(fl_xact_dispatch, NULL);
		RegisterSubXactCallback(fl_subxact_dispatch, NULL);
		registered = true;
	}
}
