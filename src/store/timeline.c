/*
 * store/timeline.c — what makes a fence valid across crashes and failovers: the timeline in its top
 * bits (fl_timeline_base, the floor of every new fence on this server's timeline) and the durable
 * commit of the transaction that issued it.  Every path that issues a fence (grants, revoke,
 * raise_fences, a task table's claim) calls both.
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "fencelock.h"
#include "replication/syncrep.h"
#include "store/timeline.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/* The lowest fence a grant on this server's timeline may carry, less one. */
int64
fl_timeline_base(void)
{
	TimeLineID tli;

	if (RecoveryInProgress())
		ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
						errmsg("cannot acquire a lease during recovery"),
						errhint("Leases are granted by the primary server.")));
	tli = GetWALInsertionTimeLine();
	if (tli - 1 > FENCELOCK_MAX_TIMELINE)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("timeline %u is beyond the %u that fences can encode", tli,
							   FENCELOCK_MAX_TIMELINE + 1)));
	return (int64) (tli - 1) << FENCELOCK_TIMELINE_SHIFT;
}

/* synchronous_standby_names is set (syncrep.c's SyncStandbysDefined, which is not exported) */
static inline bool
sync_standbys_named(void)
{
	return SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0';
}

/*
 * A fence is valid once its grant has committed; the grant must survive a crash and a failover
 * to a synchronous standby even where the session runs with synchronous_commit = off or local,
 * or two owners could receive the same fence.  Force the local flush, and where synchronous
 * standbys are configured raise the setting to at least 'on' for this transaction (as SET LOCAL
 * would; the flush is forced too, in case a function's own SET clause restores a lower value
 * before the commit).  Without synchronous standbys every setting above 'local' means the local
 * flush, which ForceSyncCommit alone gives, without a GUC change to undo at the transaction's end.
 */
void
fl_commit_durably(void)
{
	if (sync_standbys_named() && synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	ForceSyncCommit();
}

/*
 * Grants released in their own transaction.  A grant that its own transaction releases again
 * is never held by anyone once that transaction has committed: if a crash loses the
 * transaction, it loses the grant, every write made under it and the release together, and
 * nobody can hold the fence it issued.  Such a transaction needs no more durability than its
 * own writes (the session's synchronous_commit).  So a grant's durable commit is decided at
 * PRE_COMMIT: forced when a grant of the transaction may still be held — one not released in
 * it, more grants than PENDING_MAX, a release that a rolled-back subtransaction may have undone
 * — and otherwise left to the session's setting.  With synchronous standbys the grant forces
 * the durable commit at once, as every other fence does (fl_commit_durably).
 */
#define PENDING_MAX 8

typedef struct FlPendingGrant
{
	text *resource; /* in TopTransactionContext */
	int64 fence;
} FlPendingGrant;

static FlPendingGrant pending[PENDING_MAX];
static int n_pending = 0;
static bool force_durable = false; /* decided already: the commit is made durable */
static bool released_any = false;  /* a pending grant was released in this transaction */

/* The index of the pending grant of RESOURCE with FENCE, or -1 */
static int
pending_find(text *resource, int64 fence)
{
	for (int i = 0; i < n_pending; i++)
		if (pending[i].fence == fence &&
			VARSIZE_ANY(pending[i].resource) == VARSIZE_ANY(resource) &&
			memcmp(VARDATA_ANY(pending[i].resource), VARDATA_ANY(resource),
				   VARSIZE_ANY_EXHDR(resource)) == 0)
			return i;
	return -1;
}

static void
pending_reset(void)
{
	n_pending = 0;
	force_durable = false;
	released_any = false;
}

static void
pending_xact_cb(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (force_durable || n_pending > 0)
				ForceSyncCommit();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			pending_reset();
			break;
	}
}

/*
 * A rolled-back subtransaction may have undone a release (the grant is held again) or a grant
 * (its entry stays: the commit is then durable without need, which is safe).
 */
static void
pending_subxact_cb(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
				   void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && released_any)
		force_durable = true;
}

void
fl_grant_durably(text *resource, int64 fence)
{
	static bool registered = false;

	/* fl_commit_durably forces this commit already: nothing to decide at PRE_COMMIT. */
	if (sync_standbys_named())
	{
		fl_commit_durably();
		return;
	}
	if (!registered)
	{
		fl_xact_join(FL_XACT_TIMELINE, pending_xact_cb, pending_subxact_cb);
		registered = true;
	}
	if (force_durable)
		return;
	if (pending_find(resource, fence) >= 0)
		return;
	if (n_pending == PENDING_MAX)
	{
		force_durable = true;
		return;
	}
	pending[n_pending].resource =
		(text *) MemoryContextAlloc(TopTransactionContext, VARSIZE_ANY(resource));
	memcpy(pending[n_pending].resource, resource, VARSIZE_ANY(resource));
	pending[n_pending].fence = fence;
	n_pending++;
}

void
fl_grant_released(text *resource, int64 fence)
{
	int i = pending_find(resource, fence);

	if (i < 0)
		return;
	pfree(pending[i].resource);
	pending[i] = pending[--n_pending];
	released_any = true;
}
