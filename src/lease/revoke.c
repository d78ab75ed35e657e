/*
 * lease/revoke.c — fencelock.revoke(resource): an operator frees a lease, whoever holds it.
 *
 * The lease row gets a new fence at once, held by nobody: the old holder's renew and release
 * return false, assert_fence and lease-bound tables refuse its fence from the revoke's commit
 * on, and the next grant gets a fence above the revoke's.  Not executable by PUBLIC: grant
 * EXECUTE on it to the roles that operate the system.
 */
#include "postgres.h"

#include "base/args.h"
#include "catalog/pg_type.h"
#include "observe/count.h"
#include "store/rule.h"
#include "miscadmin.h"
#include "observe/notify.h"
#include "settings.h"
#include "observe/stats.h"
#include "store/timeline.h"
#include "utils/builtins.h"
#include "store/clock.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

PG_FUNCTION_INFO_V1(fencelock_revoke);

Datum
fencelock_revoke(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	TimestampTz now = fl_lease_now();
	char *role = GetUserNameFromId(GetUserId(), false);
	int64 fence = 0;
	bool found = fl_lease_revoke(resource, now, &fence);

	if (!found)
		PG_RETURN_NULL();

	fl_count_at_commit(FL_REVOKES, 1);
	fl_notify("revoked", resource, fence, role, NULL);
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level,
				(errmsg("lease on resource \"%s\" revoked by role \"%s\" with fence " INT64_FORMAT,
						text_to_cstring(resource), role, fence)));
	/* The next waiter may try once this transaction commits. */
	fl_queue_wake_at_commit(resource);
	/* As for a grant: a crash must not make the revoke's fence be issued again. */
	fl_commit_durably();
	PG_RETURN_INT64(fence);
}
