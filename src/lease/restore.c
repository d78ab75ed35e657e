/*
 * lease/restore.c — fencelock.raise_fences(above): after restoring an older pg_dump, every fence
 * issued from then on exceeds `above`.
 *
 * A dump holds each resource's fence as it was when the dump was taken.  The cluster it came from
 * may have issued higher fences afterwards, to the resources in the dump and to resources created
 * since, and a restore cannot know them: without help, the restored database issues those fences
 * a second time.  The operator knows a bound: the highest fence the old cluster can have issued.
 * The highest timeline T it reached gives one without knowing anything else, since every fence
 * issued on timelines up to T is below T << 48 (fencelock.h).
 *
 * raise_fences sets every lease row whose fence is below `above` to `above`, free, as revoke
 * leaves a row (a holder from before the restore can no longer renew, release or write under it),
 * and raises the purge floor to `above`, so that a resource the dump lacks starts above it too.
 * The next grant of any resource, new or old, gets at least above + 1.  Not executable by PUBLIC.
 */
#include "postgres.h"

#include "base/args.h"
#include "catalog/pg_type.h"
#include "store/rule.h"
#include "store/timeline.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

PG_FUNCTION_INFO_V1(fencelock_raise_fences);

#define ABOVE_HINT                                                                                 \
	"Pass the highest fence the cluster the dump came from can have issued, e.g. "                 \
	"(T::bigint << 48) for a cluster that reached timeline T."

Datum
fencelock_raise_fences(PG_FUNCTION_ARGS)
{
	int64 above;
	int64 raised;

	fl_arg_not_null(fcinfo, 0, "above", ABOVE_HINT);
	above = PG_GETARG_INT64(0);
	if (above < 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("above must not be negative"), errhint(ABOVE_HINT)));
	if (above == PG_INT64_MAX)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("above must be less than " INT64_FORMAT, PG_INT64_MAX),
						errdetail("No fence could be issued above it."), errhint(ABOVE_HINT)));

	/* Waiters of a freed lease may try once this transaction commits. */
	raised = fl_lease_raise(above, fl_queue_wake_at_commit);
	/* As for a grant: a crash must not lose the raise while fences above it go out. */
	fl_commit_durably();
	PG_RETURN_INT64(raised);
}
