/*
 * timeline.c — what makes a fence valid across crashes and failovers: the timeline in its top bits
 * (fl_timeline_base, the floor of every new fence on this server's timeline) and the durable
 * commit of the transaction that issued it.  Every path that issues a fence (grants, revoke,
 * raise_fences, a task table's claim) calls both.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "fencelock.h"
#include "timeline.h"
#include "utils/guc.h"

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

/*
 * A fence is valid once its grant has committed; the grant must survive a crash and a failover
 * to a synchronous standby even where the session runs with synchronous_commit = off or local,
 * or two owners could receive the same fence.  Raise the setting to at least 'on' for this
 * transaction (as SET LOCAL would), and force the local flush too, in case a function's own SET
 * clause restores a lower value before the commit.
 */
void
fl_commit_durably(void)
{
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	ForceSyncCommit();
}
