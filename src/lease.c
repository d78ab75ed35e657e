/*
 * lease.c — the lease API: acquire, renew, release, current_fence, assert_fence, purge.
 *
 * One row of fencelock.lease per resource holds its owner, deadline and the latest fence.  A
 * grant, its owner, deadline and fence change together in one row update (a HOT update: only the
 * primary key on resource is indexed).  Lease times come from the clock at the moment of the call.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "count.h"
#include "fencelock.h"
#include "leasebound.h"
#include "leaserow.h"
#include "miscadmin.h"
#include "settings.h"
#include "stats.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "waitqueue.h"

PG_FUNCTION_INFO_V1(fencelock_acquire);
PG_FUNCTION_INFO_V1(fencelock_acquire_0_2);
PG_FUNCTION_INFO_V1(fencelock_renew_0_2);
PG_FUNCTION_INFO_V1(fencelock_release_0_2);
PG_FUNCTION_INFO_V1(fencelock_purge_0_2);
PG_FUNCTION_INFO_V1(fencelock_renew);
PG_FUNCTION_INFO_V1(fencelock_release);
PG_FUNCTION_INFO_V1(fencelock_current_fence);
PG_FUNCTION_INFO_V1(fencelock_assert_fence);
PG_FUNCTION_INFO_V1(fencelock_purge);

/* The same owner's live lease keeps its fence; any other grant takes a new one. */
#define SAME_LIVE_OWNER                                                                            \
	"l.owner OPERATOR(pg_catalog.=) $2 AND l.expires_at OPERATOR(pg_catalog.>) $3"

/* $1 resource, $2 owner, $3 now, $4 new deadline, $5 timeline base, $6 caller's role */
static FlStmt acquire_update = {
	"UPDATE fencelock.lease AS l SET "
	" fence = CASE WHEN " SAME_LIVE_OWNER " THEN l.fence "
	"  ELSE GREATEST(l.fence, $5) OPERATOR(pg_catalog.+) 1 END, "
	" acquired_at = CASE WHEN " SAME_LIVE_OWNER " THEN l.acquired_at ELSE $3 END, "
	" owner = $2, expires_at = $4, holder = $6 "
	"WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	" AND (l.owner IS NULL OR l.expires_at OPERATOR(pg_catalog.<=) $3 "
	"  OR l.owner OPERATOR(pg_catalog.=) $2) "
	"RETURNING l.fence",
	6,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, NAMEOID}};

/* $1..$4, $6 as above, $5 the new row's fence */
static FlStmt acquire_insert = {
	"INSERT INTO fencelock.lease AS l "
	" (resource, owner, fence, acquired_at, expires_at, holder) "
	"VALUES ($1, $2, $5, $3, $4, $6) "
	"ON CONFLICT (resource) DO NOTHING RETURNING l.fence",
	6,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, NAMEOID}};

/*
 * FL_API_0_2 grants also record how the lease was granted (lease.granted_how, an FlGrantedHow;
 * these statements spell its letters out) and honour lock_delay ($7, the granting session's
 * fencelock.lock_delay, kept in the row: a lease that expired without a release stays ungrantable
 * to another owner for that long after its deadline).
 */
#define GRANT_SET_V2                                                                               \
	" fence = CASE WHEN " SAME_LIVE_OWNER " THEN l.fence "                                         \
	"  ELSE GREATEST(l.fence, $5) OPERATOR(pg_catalog.+) 1 END, "                                  \
	" acquired_at = CASE WHEN " SAME_LIVE_OWNER " THEN l.acquired_at ELSE $3 END, "                \
	" granted_how = CASE WHEN " SAME_LIVE_OWNER " THEN l.granted_how "                             \
	"  WHEN l.owner IS NULL THEN 'r' WHEN l.owner OPERATOR(pg_catalog.=) $2 THEN 'e' "             \
	"  ELSE 't' END, "                                                                             \
	" owner = $2, expires_at = $4, holder = $6, lock_delay = $7 "
#define GRANT_WHERE_V2                                                                             \
	"WHERE l.resource OPERATOR(pg_catalog.=) $1 "                                                  \
	" AND (l.owner IS NULL OR l.owner OPERATOR(pg_catalog.=) $2 "                                  \
	"  OR l.expires_at OPERATOR(pg_catalog.+) COALESCE(l.lock_delay, '0') "                        \
	"   OPERATOR(pg_catalog.<=) $3 "
#define GRANT_RETURNING_V2                                                                         \
	"RETURNING l.fence, l.granted_how, l.acquired_at OPERATOR(pg_catalog.=) $3"
#define GRANT_ARGTYPES_V2                                                                          \
	TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, NAMEOID, INTERVALOID

static FlStmt acquire_update_v2 = {"UPDATE fencelock.lease AS l SET " GRANT_SET_V2 GRANT_WHERE_V2
								   ") " GRANT_RETURNING_V2,
								   7,
								   {GRANT_ARGTYPES_V2}};

static FlStmt acquire_insert_v2 = {
	"INSERT INTO fencelock.lease AS l "
	" (resource, owner, fence, acquired_at, expires_at, holder, granted_how, lock_delay) "
	"VALUES ($1, $2, $5, $3, $4, $6, 'n', $7) "
	"ON CONFLICT (resource) DO NOTHING RETURNING l.fence, l.granted_how, true",
	7,
	{GRANT_ARGTYPES_V2}};

/*
 * Since 0.3.0 a grant may bind the lease to the caller's session ($8, NULL for an ordinary
 * lease), and a lease whose session has ended is free (session.c).
 */
static FlStmt acquire_update_v3 = {"UPDATE fencelock.lease AS l SET " GRANT_SET_V2
								   ", session_id = $8 " GRANT_WHERE_V2
								   "  OR (l.session_id IS NOT NULL AND NOT "
								   "fencelock.session_alive(l.session_id))) " GRANT_RETURNING_V2,
								   8,
								   {GRANT_ARGTYPES_V2, INT8OID}};

static FlStmt acquire_insert_v3 = {
	"INSERT INTO fencelock.lease AS l (resource, owner, fence, acquired_at, expires_at, holder, "
	" granted_how, lock_delay, session_id) "
	"VALUES ($1, $2, $5, $3, $4, $6, 'n', $7, $8) "
	"ON CONFLICT (resource) DO NOTHING RETURNING l.fence, l.granted_how, true",
	8,
	{GRANT_ARGTYPES_V2, INT8OID}};

/* For a waiter: when the current holder's lease runs out ($1 resource). */
static FlStmt holder_expiry = {
	"SELECT l.expires_at OPERATOR(pg_catalog.+) COALESCE(l.lock_delay, '0') "
	"FROM fencelock.lease AS l "
	"WHERE l.resource OPERATOR(pg_catalog.=) $1 AND l.owner IS NOT NULL",
	1,
	{TEXTOID}};

static FlStmt floor_select = {"SELECT f.floor FROM fencelock.fence_floor AS f", 0, {InvalidOid}};

/* $1 resource, $2 fence: lifts a just-inserted row above the purge floor */
static FlStmt fence_raise = {
	"UPDATE fencelock.lease AS l SET fence = $2 WHERE l.resource OPERATOR(pg_catalog.=) $1",
	2,
	{TEXTOID, INT8OID}};

/* $1 resource, $2 owner, $3 now, $4 new deadline */
static FlStmt renew_update = {"UPDATE fencelock.lease AS l SET expires_at = $4 "
							  "WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SAME_LIVE_OWNER
							  " RETURNING l.fence",
							  4,
							  {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}};

/* $1 resource, $2 owner, $3 now */
static FlStmt release_update = {"UPDATE fencelock.lease AS l SET owner = NULL, expires_at = $3 "
								"WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SAME_LIVE_OWNER
								" RETURNING l.fence",
								3,
								{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

static FlStmt fence_select = {
	"SELECT l.fence FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1",
	1,
	{TEXTOID}};

/* The cast: a holder column a superuser retyped is never read as a name (leasebound.c's too). */
static FlStmt holder_select = {"SELECT CAST(l.holder AS pg_catalog.name) FROM fencelock.lease AS l "
							   "WHERE l.resource OPERATOR(pg_catalog.=) $1",
							   1,
							   {TEXTOID}};

static FlStmt fence_lock = {
	"SELECT l.fence FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	"FOR SHARE",
	1,
	{TEXTOID}};

/*
 * Purging.  $1 idle cutoff, $2 now.  A free lease's expires_at is the moment it was released, so
 * one condition covers free and expired rows alike; but a lease that expired without a release
 * stays until its lock_delay has passed too, or a new row for the resource would be granted to
 * another owner inside the delay.  A held lease (expires_at in the future) is never purged: the
 * cutoff is never later than now.  The floor remembers the highest fence purged, so a resource
 * that comes back later still gets a higher fence.  API 0.1.0 rows have no lock_delay.
 */
#define PURGEABLE_V1 "l.expires_at OPERATOR(pg_catalog.<=) $1"
#define PURGEABLE_V2                                                                               \
	"l.expires_at OPERATOR(pg_catalog.<=) $1 AND (l.owner IS NULL OR "                             \
	" l.expires_at OPERATOR(pg_catalog.+) COALESCE(l.lock_delay, '0') OPERATOR(pg_catalog.<=) $2)"

#define FLOOR_UP                                                                                   \
	"INSERT INTO fencelock.fence_floor AS f (id, floor) "                                          \
	" SELECT true, t.fence FROM top AS t WHERE t.fence IS NOT NULL "                               \
	" ON CONFLICT (id) DO UPDATE SET floor = GREATEST(f.floor, excluded.floor)"

/*
 * All purgeable rows in one statement; also returns how many rows were candidates.  When fewer
 * were deleted, one of them changed under the delete (a concurrent grant), and the delete may
 * hold that row's lock: the caller then rolls the statement back and purges row by row.
 */
#define PURGE_ALL(cond)                                                                            \
	"WITH cand AS MATERIALIZED (SELECT l.ctid AS t FROM fencelock.lease AS l WHERE " cond "), "    \
	" gone AS (DELETE FROM fencelock.lease AS l "                                                  \
	"  WHERE l.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.t FROM cand AS c)) AND " cond       \
	"  RETURNING l.fence), "                                                                       \
	" top AS (SELECT pg_catalog.count(*) AS n, pg_catalog.max(g.fence) AS fence FROM gone AS g), " \
	" up AS (" FLOOR_UP ") "                                                                       \
	"SELECT t.n, (SELECT pg_catalog.count(*) FROM cand AS c) FROM top AS t"

/* $3 resource: one row, for the row-by-row purge */
#define PURGE_ONE(cond)                                                                            \
	"WITH gone AS (DELETE FROM fencelock.lease AS l "                                              \
	"  WHERE l.resource OPERATOR(pg_catalog.=) $3 AND " cond " RETURNING l.fence), "               \
	" top AS (SELECT pg_catalog.max(g.fence) AS fence FROM gone AS g), "                           \
	" up AS (" FLOOR_UP ") "                                                                       \
	"SELECT true FROM gone"

#define PURGE_LIST(cond) "SELECT l.resource FROM fencelock.lease AS l WHERE " cond

/* Indexed by FlApi - 1. */
static FlStmt purge_all[2] = {{PURGE_ALL(PURGEABLE_V1), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}},
							  {PURGE_ALL(PURGEABLE_V2), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}}};
static FlStmt purge_one[2] = {
	{PURGE_ONE(PURGEABLE_V1), 3, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}},
	{PURGE_ONE(PURGEABLE_V2), 3, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}}};
static FlStmt purge_list[2] = {{PURGE_LIST(PURGEABLE_V1), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}},
							   {PURGE_LIST(PURGEABLE_V2), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}}};

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
 * A row this transaction has just inserted must still carry a fence above the purge floor.  The
 * floor is read with a snapshot taken now: the insert succeeded, so a purge that removed an
 * earlier row for this resource has committed, and with it the floor it raised.  No lock is
 * needed, and a busy resource never gets here.
 *
 * A floor at the largest bigint leaves no fence above it: the grant is refused with the error a
 * grant on a row at that fence raises (22003, as the statement's + 1 and leaserow.c do), and the
 * error rolls back the row just inserted with the transaction or subtransaction.
 */
static int64
fl_above_floor(Datum resource, int64 fence)
{
	Datum values[2];
	int64 floor;
	int64 raised;
	bool isnull;

	if (fl_run_latest(&floor_select, NULL, NULL) != 1)
		return fence;
	floor = fl_get_int64(0, 1, &isnull);
	if (isnull || floor < fence)
		return fence;
	if (pg_add_s64_overflow(floor, 1, &raised))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range"),
				 errdetail("Resource \"%s\" needs a fence above the purge floor " INT64_FORMAT
						   ", the largest bigint.",
						   TextDatumGetCString(resource), floor)));
	values[0] = resource;
	values[1] = Int64GetDatum(raised);
	fl_run(&fence_raise, values, NULL, false);
	return raised;
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

/*
 * The name of the calling role, for the holder column and notifications: a syscache lookup that
 * is made again only when the role or pg_authid changes.
 */
static Oid holder_role = InvalidOid;
static NameData holder_name;

static void
holder_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	holder_role = InvalidOid;
}

static Name
fl_holder_name(void)
{
	static bool registered = false;
	Oid role = GetUserId();

	if (role != holder_role)
	{
		if (!registered)
		{
			CacheRegisterSyscacheCallback(AUTHOID, holder_invalidate, (Datum) 0);
			registered = true;
		}
		namestrcpy(&holder_name, GetUserNameFromId(role, false));
		holder_role = role;
	}
	return &holder_name;
}

const char *
fl_granted_how_words(char how)
{
	switch ((FlGrantedHow) how)
	{
		case FL_GRANTED_NEW:
			return "new";
		case FL_GRANTED_AFTER_RELEASE:
			return "after release";
		case FL_GRANTED_AFTER_EXPIRY:
			return "after own expiry";
		case FL_GRANTED_TAKEOVER:
			return "taken over";
		case FL_GRANTED_REVOKED:
			return "revoked";
	}
	return "unknown";
}

/* The statements of a grant, per version of the lease table. */
static void
grant_statements(FlApi api, FlStmt **update, FlStmt **insert)
{
	if (api == FL_API_0_1)
	{
		*update = &acquire_update;
		*insert = &acquire_insert;
	}
	else if (fl_lease_has_sessions())
	{
		*update = &acquire_update_v3;
		*insert = &acquire_insert_v3;
	}
	else
	{
		*update = &acquire_update_v2;
		*insert = &acquire_insert_v2;
	}
}

/* A grant's result row: RETURNING fence [, granted_how, is_new] */
static void
grant_result(FlApi api, FlGrant *g)
{
	bool isnull;

	g->fence = fl_get_int64(0, 1, &isnull);
	g->how = FL_GRANTED_NEW;
	g->is_new = true;
	if (api == FL_API_0_1)
		return;
	g->how = DatumGetChar(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	g->is_new =
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
}

/*
 * One attempt at a grant, without waiting.  Fills *g; on a busy resource with want_expiry, also
 * the holder's deadline (0 when unknown).  Counts a busy attempt; the caller counts a grant with
 * fl_count_grant once it is kept.
 *
 * The row is changed directly where that is equivalent (leaserow.c); otherwise, and to insert a
 * resource's first row, by the statements above, as the extension's owner.
 */
void
fl_try_acquire(text *resource, text *owner, int64 ttl, FlApi api, bool want_expiry, FlGrant *g)
{
	int64 base = fl_timeline_base();
	TimestampTz now = GetCurrentTimestamp();
	Interval delay = {.time = (int64) fencelock_lock_delay_ms * 1000};
	FlRowChange c = {.op = FL_ROW_GRANT,
					 .resource = resource,
					 .owner = owner,
					 .now = now,
					 .expires = now + ttl,
					 .v2 = api != FL_API_0_1,
					 .base = base,
					 .holder = fl_holder_name(),
					 .lock_delay = &delay,
					 .session = fl_grant_session};
	FlRowResult direct = fl_lease_row_change(&c);
	Datum values[8];
	char nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	FlStmt *update;
	FlStmt *insert;
	FlSession session;
	bool isnull;
	bool inserted = false;

	memset(g, 0, sizeof(*g));
	g->granted_at = now;
	g->expires_at = now + ttl;
	if (direct == FL_ROW_CHANGED || direct == FL_ROW_REFUSED)
	{
		g->granted = direct == FL_ROW_CHANGED;
		g->fence = c.fence;
		g->how = c.how;
		g->is_new = c.is_new;
		g->holder_expires = want_expiry ? c.holder_expires : 0;
		if (g->granted && g->is_new && api != FL_API_0_1 && fencelock_history)
		{
			fl_begin(&session);
			fl_history_grant(resource, owner, g);
			fl_end(&session);
		}
		goto done;
	}

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(now);
	values[3] = TimestampTzGetDatum(now + ttl);
	values[4] = Int64GetDatum(base);
	values[5] = NameGetDatum(c.holder);
	values[6] = IntervalPGetDatum(&delay);
	values[7] = Int64GetDatum(fl_grant_session);
	nulls[7] = fl_grant_session != 0 ? ' ' : 'n';
	grant_statements(api, &update, &insert);

	/*
	 * The updates run through fl_run_or_undo: one that loses a race to a concurrent grant must not
	 * keep the row lock it took to re-check the row.  When no row exists yet, the first update
	 * changes nothing and writes nothing; the insert takes no row lock when it meets a row.
	 */
	fl_begin(&session);
	if (direct != FL_ROW_MISSING && fl_run_or_undo(update, values, nulls))
		g->granted = true;
	else
	{
		/* No grantable row: either none exists yet, or another owner holds the lease. */
		values[4] = Int64GetDatum(base + 1);
		g->granted = fl_run(insert, values, nulls, false) == 1;
		inserted = g->granted;

		/*
		 * The insert met an existing row.  Usually that is another owner's live lease, which the
		 * update saw; but it may be a first grant that committed while this insert waited for
		 * it, which the update could not see.  That one may be this same owner's (a retry after
		 * a lost response, on another connection), so look once more.
		 */
		if (!g->granted)
		{
			values[4] = Int64GetDatum(base);
			g->granted = fl_run_or_undo(update, values, nulls);
		}
	}
	if (g->granted)
	{
		grant_result(api, g);
		if (inserted)
			g->fence = fl_above_floor(values[0], g->fence);
		if (api != FL_API_0_1 && g->is_new && fencelock_history)
			fl_history_grant(resource, owner, g);
	}
	else if (want_expiry && fl_run(&holder_expiry, values, NULL, false) == 1)
		g->holder_expires = DatumGetTimestampTz(
			SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	fl_end(&session);

done:
	if (!g->granted)
	{
		fl_count(FL_BUSY, 1);
		return;
	}
	if (fl_grant_session != 0)
		fl_session_bound(resource);
	if (g->is_new && fencelock_notify)
		fl_notify(g->how == FL_GRANTED_TAKEOVER ? "taken_over" : "granted", resource, g->fence,
				  NameStr(*c.holder));
	fl_commit_durably();
}

/*
 * Count (and log) a grant made by fl_try_acquire, once it is kept: a caller that made it in a
 * subtransaction calls this only after the subtransaction committed.  The counts are made when
 * the transaction commits (count.c): the caller may still roll the grant back.
 */
void
fl_count_grant(text *resource, const FlGrant *g)
{
	fl_count_at_commit(g->is_new ? FL_GRANTS : FL_REACQUIRES, 1);
	if (g->is_new && g->how == FL_GRANTED_TAKEOVER)
	{
		fl_count_at_commit(FL_TAKEOVERS, 1);
		if (fencelock_log_level >= 0)
			ereport(fencelock_log_level,
					(errmsg("lease on resource \"%s\" taken over with fence " INT64_FORMAT
							" after the previous holder's lease expired",
							text_to_cstring(resource), g->fence)));
	}
}

static Datum
fl_acquire_sql(FunctionCallInfo fcinfo, FlApi api)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	FlGrant g;

	fl_try_acquire(resource, owner, ttl, api, false, &g);
	if (!g.granted)
		PG_RETURN_NULL();
	fl_count_grant(resource, &g);
	PG_RETURN_INT64(g.fence);
}

/* acquire(resource, owner, ttl) as installed by 0.1.0 */
Datum
fencelock_acquire(PG_FUNCTION_ARGS)
{
	return fl_acquire_sql(fcinfo, FL_API_0_1);
}

Datum
fencelock_acquire_0_2(PG_FUNCTION_ARGS)
{
	return fl_acquire_sql(fcinfo, FL_API_0_2);
}

/*
 * renew and release: the same owner-and-live check, a different change.  Returns the lease's
 * fence, or -1 when the caller did not hold a live lease.  Directly where that is equivalent
 * (leaserow.c), else by the statement.
 */
static int64
fl_owner_update(text *resource, text *owner, int64 ttl, FlRowOp op, FlApi api)
{
	TimestampTz now = GetCurrentTimestamp();
	FlRowChange c = {
		.op = op, .resource = resource, .owner = owner, .now = now, .expires = now + ttl};
	FlRowResult direct = fl_lease_row_change(&c);
	Datum values[4];
	FlSession session;
	int64 fence = -1;
	bool isnull;

	if (direct == FL_ROW_CHANGED)
		fence = c.fence;
	if (direct != FL_ROW_USE_SQL && (fence < 0 || api == FL_API_0_1 || !fencelock_history))
		return fence;

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(now);
	values[3] = TimestampTzGetDatum(now + ttl);

	/* A renew or release that loses a race to a takeover must not keep the row locked. */
	fl_begin(&session);
	if (direct == FL_ROW_USE_SQL &&
		fl_run_or_undo(op == FL_ROW_RENEW ? &renew_update : &release_update, values, NULL))
		fence = fl_get_int64(0, 1, &isnull);
	if (fence >= 0 && api != FL_API_0_1 && fencelock_history)
		fl_history_update(resource, fence, now, now + ttl, op == FL_ROW_RELEASE);
	fl_end(&session);
	return fence;
}

static Datum
fl_renew_sql(FunctionCallInfo fcinfo, FlApi api)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	bool done = fl_owner_update(resource, owner, ttl, FL_ROW_RENEW, api) >= 0;

	if (done)
		fl_count_at_commit(FL_RENEWALS, 1);
	else
		fl_count(FL_RENEWALS_REFUSED, 1);
	PG_RETURN_BOOL(done);
}

bool
fl_release(text *resource, text *owner, FlApi api)
{
	int64 fence = fl_owner_update(resource, owner, 0, FL_ROW_RELEASE, api);
	bool done = fence >= 0;

	if (!done)
	{
		fl_count(FL_RELEASES_REFUSED, 1);
		return false;
	}
	fl_count_at_commit(FL_RELEASES, 1);
	if (fencelock_notify)
		fl_notify("released", resource, fence, NameStr(*fl_holder_name()));
	/* The next waiter may try now; its grant waits for this transaction's row lock. */
	fl_queue_wake(resource);
	return true;
}

static Datum
fl_release_sql(FunctionCallInfo fcinfo, FlApi api)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);

	PG_RETURN_BOOL(fl_release(resource, owner, api));
}

Datum
fencelock_renew(PG_FUNCTION_ARGS)
{
	return fl_renew_sql(fcinfo, FL_API_0_1);
}

Datum
fencelock_renew_0_2(PG_FUNCTION_ARGS)
{
	return fl_renew_sql(fcinfo, FL_API_0_2);
}

Datum
fencelock_release(PG_FUNCTION_ARGS)
{
	return fl_release_sql(fcinfo, FL_API_0_1);
}

Datum
fencelock_release_0_2(PG_FUNCTION_ARGS)
{
	return fl_release_sql(fcinfo, FL_API_0_2);
}

/*
 * Only a member of the role that took the latest grant (or a superuser) may pin a lease row with
 * assert_fence: anyone else could hold the row lock and block the holder's renew and release.
 * Checked before locking; a takeover by another role in between changes the fence, and the
 * assertion then fails.
 */
static void
fl_check_may_assert(text *resource, Oid caller)
{
	Datum values[1];
	bool isnull = true;
	Datum holder = (Datum) 0;
	Oid role = InvalidOid;

	values[0] = PointerGetDatum(resource);
	if (fl_run(&holder_select, values, NULL, true) != 1)
		return; /* no row, nothing to pin: the assertion fails on its own */
	holder = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		role = get_role_oid(NameStr(*DatumGetName(holder)), true);
	if (superuser_arg(caller) || (OidIsValid(role) && has_privs_of_role(caller, role)))
		return;
	ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					errmsg("permission denied to assert the fence of resource \"%s\"",
						   text_to_cstring(resource)),
					errdetail("Only members of the role that took the lease may assert its fence."),
					errhint("Call assert_fence as the role that called acquire.")));
}

/* The latest fence of a resource, optionally row-locked; false when there is none. */
static bool
fl_read_fence(text *resource, bool lock, int64 *fence)
{
	Datum values[1];
	FlSession session;
	bool found;
	bool isnull;

	values[0] = PointerGetDatum(resource);
	fl_begin(&session);
	if (lock)
		fl_check_may_assert(resource, session.save_userid);
	found = fl_run(lock ? &fence_lock : &fence_select, values, NULL, !lock) == 1;
	if (found)
	{
		*fence = fl_get_int64(0, 1, &isnull);
		found = !isnull; /* a NULL fence (a superuser's doing) is none, as leasebound.c reads it */
	}
	fl_end(&session);
	return found;
}

Datum
fencelock_current_fence(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	int64 fence;

	if (!fl_read_fence(resource, false, &fence))
		PG_RETURN_NULL();
	PG_RETURN_INT64(fence);
}

Datum
fencelock_assert_fence(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	int64 fence = fl_arg_fence(fcinfo, 1, "Pass the fence that acquire returned.");
	int64 current;

	bool found = fl_read_fence(resource, true, &current);

	if (found && fence == current)
	{
		fl_note_shown_fence(resource, fence); /* leasebound.c: DELETE may follow */
		PG_RETURN_VOID();
	}
	fl_count(FL_STALE_REJECTED, 1);
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level,
				(errmsg("fence " INT64_FORMAT " for resource \"%s\" refused by assert_fence", fence,
						text_to_cstring(resource))));
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("no fence has been issued for resource \"%s\"", text_to_cstring(resource)),
				 errhint("Acquire the lease before writing under it.")));
	if (fence < current)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is older than the current fence " INT64_FORMAT
						" of resource \"%s\"",
						fence, current, text_to_cstring(resource)),
				 errdetail("The lease was granted again after this holder's lease."),
				 errhint("This holder has lost the lease: roll back and stop.")));
	if (fence > current)
		ereport(
			ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg("fence " INT64_FORMAT " was never issued for resource \"%s\"", fence,
					text_to_cstring(resource)),
			 errdetail("The current fence is " INT64_FORMAT ".", current),
			 errhint("Pass the fence that acquire returned, after its transaction committed.")));
	PG_RETURN_VOID();
}

/*
 * Delete the purgeable rows, keeping no lock on a row that is not deleted: all at once in a
 * subtransaction, kept when every candidate went; otherwise row by row, each in its own.
 */
static int64
fl_purge_rows(FlApi api, Datum *values)
{
	int v = api - FL_API_0_1;
	FlSubxact x;
	int64 deleted = 0;
	int64 candidates = 0;
	bool isnull;
	SPITupleTable *list;
	uint64 n;

	fl_subxact_begin(&x);
	PG_TRY();
	{
		fl_run(&purge_all[v], values, NULL, false);
		deleted = fl_get_int64(0, 1, &isnull);
		candidates = fl_get_int64(0, 2, &isnull);
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, deleted == candidates);
	if (deleted == candidates)
		return deleted;

	deleted = 0;
	n = fl_run(&purge_list[v], values, NULL, true);
	list = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		values[2] = SPI_getbinval(list->vals[i], list->tupdesc, 1, &isnull);
		if (fl_run_or_undo(&purge_one[v], values, NULL))
			deleted++;
	}
	return deleted;
}

static Datum
fl_purge_sql(FunctionCallInfo fcinfo, FlApi api)
{
	Interval *idle;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz cutoff;
	Datum values[3];
	FlSession session;
	int64 purged;

	(void) fl_arg_interval(fcinfo, 0, "idle", "Pass an interval such as '1 day'.");
	idle = PG_GETARG_INTERVAL_P(0);
	/*
	 * Subtracted in calendar terms ('1 month' is a month back), which for an interval of mixed
	 * signs may land after now: a held lease would then be purgeable.  The cutoff never is.
	 */
	cutoff = DatumGetTimestampTz(DirectFunctionCall2(
		timestamptz_mi_interval, TimestampTzGetDatum(now), IntervalPGetDatum(idle)));
	cutoff = Min(cutoff, now);
	values[0] = TimestampTzGetDatum(cutoff);
	values[1] = TimestampTzGetDatum(now);

	fl_begin(&session);
	if (api != FL_API_0_1)
		fl_history_purge(cutoff, now);
	purged = fl_purge_rows(api, values);
	fl_end(&session);
	PG_RETURN_INT64(purged);
}

Datum
fencelock_purge(PG_FUNCTION_ARGS)
{
	return fl_purge_sql(fcinfo, FL_API_0_1);
}

Datum
fencelock_purge_0_2(PG_FUNCTION_ARGS)
{
	return fl_purge_sql(fcinfo, FL_API_0_2);
}
