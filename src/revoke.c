/*
 * revoke.c — fencelock.revoke(resource): an operator frees a lease, whoever holds it.
 *
 * The lease row gets a new fence at once, held by nobody: the old holder's renew and release
 * return false, assert_fence and lease-bound tables refuse its fence from the revoke's commit
 * on, and the next grant gets a fence above the revoke's.  Not executable by PUBLIC: grant
 * EXECUTE on it to the roles that operate the system.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "count.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "settings.h"
#include "stats.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "waitqueue.h"

PG_FUNCTION_INFO_V1(fencelock_revoke);

/*
 * $1 resource, $2 timeline base, $3 now.  The holder column keeps the role of the last grant, so
 * that role's members can still tell (assert_fence: FL001) that their fence was revoked.
 */
static FlStmt revoke_update = {
	"UPDATE fencelock.lease AS l SET fence = GREATEST(l.fence, $2) OPERATOR(pg_catalog.+) 1, "
	" owner = NULL, acquired_at = $3, expires_at = $3, granted_how = 'v', lock_delay = NULL, "
	" session_id = NULL "
	"WHERE l.resource OPERATOR(pg_catalog.=) $1 RETURNING l.fence",
	3,
	{TEXTOID, INT8OID, TIMESTAMPTZOID}};

/* $1 resource, $2 the revoke's fence, $3 now: the grants it ended, and the fence it issued */
static FlStmt revoke_history = {
	"WITH ended AS (UPDATE fencelock.history AS h SET ended_at = LEAST(h.expires_at, $3), "
	"  ended_how = 'revoked' "
	"  WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.ended_at IS NULL "
	"   AND h.fence OPERATOR(pg_catalog.<) $2) "
	"INSERT INTO fencelock.history AS h (resource, fence, owner, granted_how, granted_at, "
	" expires_at, ended_at, ended_how) VALUES ($1, $2, '', 'revoked', $3, $3, $3, 'revoked') "
	"ON CONFLICT DO NOTHING",
	3,
	{TEXTOID, INT8OID, TIMESTAMPTZOID}};

Datum
fencelock_revoke(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	TimestampTz now = GetCurrentTimestamp();
	char *role = GetUserNameFromId(GetUserId(), false);
	Datum values[3];
	FlSession session;
	bool found;
	bool isnull;
	int64 fence = 0;

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fl_timeline_base());
	values[2] = TimestampTzGetDatum(now);

	fl_begin(&session);
	found = fl_run(&revoke_update, values, NULL, false) == 1;
	if (found)
	{
		fence = fl_get_int64(0, 1, &isnull);
		if (fencelock_history)
		{
			values[1] = Int64GetDatum(fence);
			fl_run(&revoke_history, values, NULL, false);
		}
	}
	fl_end(&session);
	if (!found)
		PG_RETURN_NULL();

	fl_count_at_commit(FL_REVOKES, 1);
	fl_notify("revoked", resource, fence, role);
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level,
				(errmsg("lease on resource \"%s\" revoked by role \"%s\" with fence " INT64_FORMAT,
						text_to_cstring(resource), role, fence)));
	/* The next waiter may try now; its grant waits for this transaction's row lock. */
	fl_queue_wake(resource);
	/* As for a grant: a crash must not make the revoke's fence be issued again. */
	fl_commit_durably();
	PG_RETURN_INT64(fence);
}
