/*
 * store/rule.c — fencelock.lease and fencelock.fence_floor: the lease rule in both of its forms,
 * the statements that apply it (grants, renewals, releases, purge, revoke, a session's end,
 * raise_fences), and the choice between the two paths.  The reads and row locks of the writers'
 * checks and the purge floor a new row starts above are store/fence.c's.
 *
 * One row of fencelock.lease per resource holds its owner, deadline and the latest fence.  A
 * grant, its owner, deadline and fence change together in one row update (a HOT update: only the
 * primary key on resource is indexed).  fence_floor remembers the highest fence purge removed.
 *
 * The lease rule decides who may take, renew and release a lease, what fence and granted_how a
 * grant gets, when a lease row may be purged and what a session's end does to its leases.  It is
 * written here twice, side by side: as the SQL fragments of the statements (SQL_*) and, for the
 * direct path, in C (rule_grant, rule_owner_change).  The direct path (store/row.c) changes a row
 * without a statement where that is equivalent; fl_lease_grant and fl_lease_owner_change choose
 * it, or the statement (fencelock.direct_path = off forces the statement, for the tests).
 * test/sql/117_lease_rule_differential.sql replays a script of calls through both and compares
 * every answer and row: a change to one form of the rule is a change to the other.
 *
 * The statements run as the extension's owner (base/asowner.c), every name and operator qualified.
 * Lease times come from the clock at the moment of the call.
 */
#include "postgres.h"

#include "access/xact.h"
#include "base/asowner.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "fencelock.h"
#include "observe/history.h"
#include "store/fence.h"
#include "store/group.h"
#include "store/row.h"
#include "store/rulesql.h"
#include "store/rule.h"
#include "miscadmin.h"
#include "store/sessionslot.h"
#include "settings.h"
#include "store/timeline.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "store/clock.h"
#include "utils/timestamp.h"

/* ---------------------------------------------------------------------------------------------
 * The rule
 *
 * A grant's parameters, in every grant statement: $1 resource, $2 owner, $3 now, $4 new deadline,
 * $5 timeline base, $6 the caller's role (holder), $7 the caller's lock_delay, $8 the session
 * the lease binds to (NULL for an ordinary lease).
 * ---------------------------------------------------------------------------------------------
 */

/* How a lease was granted (FlGrantedHow's letters): kept by the same owner's live lease. */
#define SQL_HOW                                                                                    \
	"CASE WHEN " SQL_SAME_LIVE_OWNER " THEN l.granted_how "                                        \
	" WHEN l.owner IS NULL THEN 'r' WHEN l.owner OPERATOR(pg_catalog.=) $2 THEN 'e' ELSE 't' END"

#define SQL_GRANT_SET_V1                                                                           \
	" fence = CASE WHEN " SQL_SAME_LIVE_OWNER                                                      \
	" THEN l.fence ELSE " SQL_NEXT_FENCE("$5") " END, "                                            \
											   " acquired_at = CASE WHEN " SQL_SAME_LIVE_OWNER     \
											   " THEN l.acquired_at ELSE $3 END, "                 \
											   " owner = $2, expires_at = $4, holder = $6 "
#define SQL_GRANT_SET_V2 SQL_GRANT_SET_V1 ", granted_how = " SQL_HOW ", lock_delay = $7 "

/* A grant's result: the fence, how it was granted, whether it is a new grant. */
#define SQL_GRANT_RETURNING_V2                                                                     \
	"RETURNING l.fence, l.granted_how, l.acquired_at OPERATOR(pg_catalog.=) $3"

/*
 * The same in C, for the direct path: what a grant makes of the row, or false when the row is
 * not free for the owner.
 */
typedef struct FlGrantCall
{
	/* what to do */
	text *owner; /* NULL: the transaction's own grant (acquire_xact), written released */
	TimestampTz now;
	TimestampTz expires; /* the new deadline */
	bool v2;             /* the later APIs' rules: lock_delay, how, sessions */
	int64 base;          /* fl_timeline_base() */
	Name holder;         /* the caller's role */
	Interval *lock_delay;
	int64 session; /* 0: an ordinary lease */
	/* what happened */
	int64 fence;
	bool is_new;
	char how;
	TimestampTz holder_expires; /* refused: when the holder's lease runs out; 0 unknown */
	bool group;                 /* refused: a group of shares or permits holds the row */
} FlGrantCall;

static bool
rule_grant(FlLeaseRow *row, void *arg)
{
	FlGrantCall *c = arg;
	bool same_owner = c->owner != NULL && fl_lease_row_owner_is(row, c->owner);
	bool same_live = same_owner && !row->expires_null && row->expires > c->now;
	TimestampTz deadline = row->expires;

	c->fence = row->fence;
	c->is_new = false;
	c->holder_expires = 0;

	/*
	 * Free for this owner?  Only another owner's row needs its deadline with lock_delay added
	 * (SQL_HOLDER_DEADLINE), which may be out of range: the statement evaluates the sum only then.
	 */
	if (!row->owner_null && !same_owner)
	{
		if (c->v2 && !row->expires_null && !row->lock_delay_null)
			deadline = DatumGetTimestampTz(DirectFunctionCall2(
				timestamptz_pl_interval, TimestampTzGetDatum(row->expires), row->lock_delay));
		if (row->expires_null || deadline > c->now)
		{
			if (!c->v2 || row->session_null || fl_session_alive(row->session))
			{
				c->holder_expires = row->expires_null ? 0 : deadline;
				c->group = VARSIZE_ANY_EXHDR(DatumGetTextPP(row->owner)) == 0;
				return false;
			}
		}
	}

	if (same_live)
	{
		/* SQL_SAME_LIVE_OWNER: the lease keeps its fence, start and how it was granted. */
		c->how = row->how_null ? FL_GRANTED_NEW : row->how;
	}
	else
	{
		/* SQL_NEXT_FENCE, SQL_HOW */
		if (pg_add_s64_overflow(Max(row->fence, c->base), 1, &c->fence))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
		c->is_new = true;
		c->how = row->owner_null ? FL_GRANTED_AFTER_RELEASE
				 : same_owner    ? FL_GRANTED_AFTER_EXPIRY
								 : FL_GRANTED_TAKEOVER;
		row->fence = c->fence;
		row->acquired_at = c->now;
		row->set |= FL_SET_FENCE | FL_SET_ACQUIRED_AT;
	}
	row->owner = PointerGetDatum(c->owner);
	row->owner_null = c->owner == NULL;
	row->expires = c->expires;
	row->holder = c->holder;
	row->set |= FL_SET_OWNER | FL_SET_EXPIRES | FL_SET_HOLDER;
	if (c->v2)
	{
		row->how = c->how;
		row->how_null = false;
		row->lock_delay = IntervalPGetDatum(c->lock_delay);
		row->lock_delay_null = false;
		row->session = c->session;
		row->session_null = c->session == 0;
		row->set |= FL_SET_HOW | FL_SET_LOCK_DELAY | FL_SET_SESSION;
	}
	else
	{
		/* The 0.1.0 functions report every grant as new. */
		c->is_new = true;
		c->how = FL_GRANTED_NEW;
	}
	return true;
}

/*
 * Renew and release: only the same owner's live lease (SQL_SAME_LIVE_OWNER) and, when the call
 * names its grant ($5 not NULL: 0.4.0's release and renew with a fence), only the grant with that
 * fence, so that a retried release cannot free the same owner's newer lease (issue 22).  A
 * renewal moves the deadline; a release frees the row, with the moment of the release as its
 * deadline (a purge's idle time counts from it).  $1 resource, $2 owner, $3 now, $4 new deadline,
 * $5 the grant's fence or NULL.
 */
#define SQL_RENEW_SET   "expires_at = $4"
#define SQL_RELEASE_SET "owner = NULL, expires_at = $3"
#define SQL_NAMED_GRANT "($5 IS NULL OR l.fence OPERATOR(pg_catalog.=) $5)"

typedef struct FlOwnerCall
{
	text *owner;
	TimestampTz now;
	TimestampTz expires; /* the new deadline; now for a release */
	bool release;
	bool named; /* SQL_NAMED_GRANT: only the grant with fence `grant` */
	int64 grant;
	int64 fence; /* the lease's fence, when allowed */
} FlOwnerCall;

static bool
rule_owner_change(FlLeaseRow *row, void *arg)
{
	FlOwnerCall *c = arg;

	c->fence = row->fence;
	if (!fl_lease_row_owner_is(row, c->owner) || row->expires_null || row->expires <= c->now)
		return false;
	if (c->named && row->fence != c->grant)
		return false;
	row->expires = c->expires;
	row->set |= FL_SET_EXPIRES;
	if (c->release)
	{
		row->owner_null = true;
		row->set |= FL_SET_OWNER;
	}
	return true;
}

/*
 * Purging.  $1 idle cutoff, $2 now.  A free lease's expires_at is the moment it was released, so
 * one condition covers free and expired rows alike; but a lease that expired without a release
 * stays until its lock_delay has passed too, or a new row for the resource would be granted to
 * another owner inside the delay.  A held lease (expires_at in the future) is never purged: the
 * cutoff is never later than now.  API 0.1.0 rows have no lock_delay.  Only statements purge.
 */
#define SQL_PURGEABLE_V1 "l.expires_at OPERATOR(pg_catalog.<=) $1"
#define SQL_PURGEABLE_V2                                                                           \
	SQL_PURGEABLE_V1 " AND (l.owner IS NULL OR " SQL_HOLDER_DEADLINE " OPERATOR(pg_catalog.<=) "   \
					 "$2)"

/*
 * A session's end, for the leases it bound ($2 its id, $3 the session's end).  A lease granted
 * with a lock_delay keeps its owner and expires now, unbound, so that the grant's rule applies
 * the delay; any other is released.  Only statements end sessions (lease/session.c); until one has
 * run, SQL_FREE_V3 and rule_grant treat the lease of an ended session as free.
 */
#define SQL_SESSION_END_SET                                                                        \
	"session_id = NULL, expires_at = $3, "                                                         \
	"owner = CASE WHEN COALESCE(l.lock_delay, '0') OPERATOR(pg_catalog.>) '0' THEN l.owner END"

/*
 * A revoke ends the lease and issues a fence nobody holds ($2 timeline base, $3 now).  The holder
 * column keeps the role of the last grant, so that its members can still tell (assert_fence:
 * FL001) that their fence was revoked.
 */
#define SQL_REVOKE_SET                                                                             \
	"fence = " SQL_NEXT_FENCE("$2") ", owner = NULL, acquired_at = $3, expires_at = $3, "          \
									"granted_how = 'v', lock_delay = NULL, session_id = NULL"

/* ---------------------------------------------------------------------------------------------
 * The statements
 * ---------------------------------------------------------------------------------------------
 */

#define GRANT_ARGTYPES                                                                             \
	TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, NAMEOID, INTERVALOID, INT8OID

/*
 * The grant statements of each version of the lease table: 0.1.0 (no granted_how, no lock_delay),
 * 0.2.0 and, with session_id, 0.3.0 on.  Every one is given the eight parameters (a parameter a
 * statement does not use is allowed, its type being given).
 */
static FlStmt grant_update[3] = {
	{"UPDATE fencelock.lease AS l SET " SQL_GRANT_SET_V1
	 "WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SQL_FREE_V1 " RETURNING l.fence",
	 8,
	 {GRANT_ARGTYPES}},
	{"UPDATE fencelock.lease AS l SET " SQL_GRANT_SET_V2
	 "WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SQL_FREE_V2 " " SQL_GRANT_RETURNING_V2,
	 8,
	 {GRANT_ARGTYPES}},
	{"UPDATE fencelock.lease AS l SET " SQL_GRANT_SET_V2 ", session_id = $8 "
	 "WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SQL_FREE_V3 " " SQL_GRANT_RETURNING_V2,
	 8,
	 {GRANT_ARGTYPES}}};

/*
 * A try-once grant (issue 22) waits for no other transaction: its update locks the row first, as
 * UPDATE would, but NOWAIT (55P03, caught: busy), and only a row free by the snapshot.  A row a
 * grant committed after the snapshot is not seen by the update: busy, as a lost race is.
 */
#define GRANT_NOWAIT(set, free, returning)                                                         \
	"WITH t AS MATERIALIZED (SELECT l.ctid AS c FROM fencelock.lease AS l "                        \
	" WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " free " FOR NO KEY UPDATE OF l NOWAIT) "     \
	"UPDATE fencelock.lease AS l SET " set " WHERE l.ctid OPERATOR(pg_catalog.=) ANY "             \
	" (ARRAY(SELECT t.c FROM t AS t)) AND l.resource OPERATOR(pg_catalog.=) $1 AND " free          \
	" " returning

static FlStmt grant_nowait[3] = {
	{GRANT_NOWAIT(SQL_GRANT_SET_V1, SQL_FREE_V1, "RETURNING l.fence"), 8, {GRANT_ARGTYPES}},
	{GRANT_NOWAIT(SQL_GRANT_SET_V2, SQL_FREE_V2, SQL_GRANT_RETURNING_V2), 8, {GRANT_ARGTYPES}},
	{GRANT_NOWAIT(SQL_GRANT_SET_V2 ", session_id = $8 ", SQL_FREE_V3, SQL_GRANT_RETURNING_V2),
	 8,
	 {GRANT_ARGTYPES}}};

/* A resource's first row; $5 is the new row's fence here. */
static FlStmt grant_insert[3] = {
	{"INSERT INTO fencelock.lease AS l (resource, owner, fence, acquired_at, expires_at, holder) "
	 "VALUES ($1, $2, $5, $3, $4, $6) ON CONFLICT (resource) DO NOTHING RETURNING l.fence",
	 8,
	 {GRANT_ARGTYPES}},
	{"INSERT INTO fencelock.lease AS l "
	 " (resource, owner, fence, acquired_at, expires_at, holder, granted_how, lock_delay) "
	 "VALUES ($1, $2, $5, $3, $4, $6, 'n', $7) ON CONFLICT (resource) DO NOTHING RETURNING "
	 "l.fence, l.granted_how, true",
	 8,
	 {GRANT_ARGTYPES}},
	{"INSERT INTO fencelock.lease AS l (resource, owner, fence, acquired_at, expires_at, holder, "
	 " granted_how, lock_delay, session_id) "
	 "VALUES ($1, $2, $5, $3, $4, $6, 'n', $7, $8) "
	 "ON CONFLICT (resource) DO NOTHING RETURNING l.fence, l.granted_how, true",
	 8,
	 {GRANT_ARGTYPES}}};

/* For a waiter: when the current holder's lease runs out ($1 resource). */
static FlStmt holder_expiry = {"SELECT " SQL_HOLDER_DEADLINE " FROM fencelock.lease AS l "
							   "WHERE l.resource OPERATOR(pg_catalog.=) $1 AND l.owner IS NOT NULL",
							   1,
							   {TEXTOID}};

#define OWNER_UPDATE(set)                                                                          \
	{                                                                                              \
		"UPDATE fencelock.lease AS l SET " set                                                     \
		" WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SQL_SAME_LIVE_OWNER                     \
		" AND " SQL_NAMED_GRANT " RETURNING l.fence",                                              \
			5,                                                                                     \
		{                                                                                          \
			TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID                              \
		}                                                                                          \
	}

static FlStmt owner_update[2] = {OWNER_UPDATE(SQL_RENEW_SET), OWNER_UPDATE(SQL_RELEASE_SET)};

/* $1 resource, $2 owner, $3 now: the fence of the owner's live lease */
static FlStmt holds_select = {"SELECT l.fence FROM fencelock.lease AS l "
							  "WHERE l.resource OPERATOR(pg_catalog.=) $1 AND " SQL_SAME_LIVE_OWNER,
							  3,
							  {TEXTOID, TEXTOID, TIMESTAMPTZOID}};

static FlStmt fence_select = {
	"SELECT l.fence FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1",
	1,
	{TEXTOID}};

#define FLOOR_UP                                                                                   \
	"INSERT INTO fencelock.fence_floor AS f (id, floor) "                                          \
	" SELECT true, t.fence FROM top AS t WHERE t.fence IS NOT NULL "                               \
	" ON CONFLICT (id) DO UPDATE SET floor = GREATEST(f.floor, excluded.floor)"

/*
 * All purgeable rows in one statement; also returns how many rows were candidates, and the
 * resources deleted.  When fewer were deleted, one of them changed under the delete (a concurrent
 * grant), and the delete may hold that row's lock: the caller then rolls the statement back and
 * purges row by row.
 */
#define PURGE_ALL(cond)                                                                            \
	"WITH cand AS MATERIALIZED (SELECT l.ctid AS t FROM fencelock.lease AS l WHERE " cond "), "    \
	" gone AS (DELETE FROM fencelock.lease AS l "                                                  \
	"  WHERE l.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.t FROM cand AS c)) AND " cond       \
	"  RETURNING l.resource, l.fence), "                                                           \
	" top AS (SELECT pg_catalog.count(*) AS n, pg_catalog.max(g.fence) AS fence, "                 \
	"  pg_catalog.array_agg(CAST(g.resource AS pg_catalog.text)) AS gone FROM gone AS g), "        \
	" up AS (" FLOOR_UP ") "                                                                       \
	"SELECT t.n, (SELECT pg_catalog.count(*) FROM cand AS c), t.gone FROM top AS t"

/* $3 resource: one row, for the row-by-row purge */
#define PURGE_ONE(cond)                                                                            \
	"WITH gone AS (DELETE FROM fencelock.lease AS l "                                              \
	"  WHERE l.resource OPERATOR(pg_catalog.=) $3 AND " cond " RETURNING l.fence), "               \
	" top AS (SELECT pg_catalog.max(g.fence) AS fence FROM gone AS g), "                           \
	" up AS (" FLOOR_UP ") "                                                                       \
	"SELECT true FROM gone"

#define PURGE_LIST(cond) "SELECT l.resource FROM fencelock.lease AS l WHERE " cond

/* Indexed by FlApi - 1. */
static FlStmt purge_all[2] = {{PURGE_ALL(SQL_PURGEABLE_V1), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}},
							  {PURGE_ALL(SQL_PURGEABLE_V2), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}}};
static FlStmt purge_one[2] = {
	{PURGE_ONE(SQL_PURGEABLE_V1), 3, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}},
	{PURGE_ONE(SQL_PURGEABLE_V2), 3, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}}};
static FlStmt purge_list[2] = {{PURGE_LIST(SQL_PURGEABLE_V1), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}},
							   {PURGE_LIST(SQL_PURGEABLE_V2), 2, {TIMESTAMPTZOID, TIMESTAMPTZOID}}};

/*
 * $1 resources the session bound, $2 its id, $3 the session's end: what it still holds and no
 * other transaction has locked.  Returns each row's resource, fence, holder and whether it was
 * released.
 */
static FlStmt session_end = {
	"UPDATE fencelock.lease AS l SET " SQL_SESSION_END_SET " "
	"WHERE l.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	"  SELECT o.ctid FROM fencelock.lease AS o "
	"  WHERE o.resource OPERATOR(pg_catalog.=) ANY ($1) "
	"   AND o.session_id OPERATOR(pg_catalog.=) $2 AND o.owner IS NOT NULL "
	"   AND o.expires_at OPERATOR(pg_catalog.>) $3 FOR UPDATE OF o SKIP LOCKED)) "
	" AND l.session_id OPERATOR(pg_catalog.=) $2 "
	"RETURNING l.resource, l.fence, l.holder, l.owner IS NULL",
	3,
	{TEXTARRAYOID, INT8OID, TIMESTAMPTZOID}};

/* $1 resource, $2 timeline base, $3 now */
static FlStmt revoke_update = {"UPDATE fencelock.lease AS l SET " SQL_REVOKE_SET " "
							   "WHERE l.resource OPERATOR(pg_catalog.=) $1 RETURNING l.fence",
							   3,
							   {TEXTOID, INT8OID, TIMESTAMPTZOID}};

/* $1 above, $2 now: revoke every lease below the bound, at the bound */
static FlStmt raise_leases = {
	"UPDATE fencelock.lease AS l SET fence = $1, owner = NULL, acquired_at = $2, expires_at = $2, "
	" granted_how = 'v', lock_delay = NULL, session_id = NULL "
	"WHERE l.fence OPERATOR(pg_catalog.<) $1 RETURNING l.resource",
	2,
	{INT8OID, TIMESTAMPTZOID}};

/* $1 above: the floor a resource without a lease row starts above */
static FlStmt raise_floor = {
	"INSERT INTO fencelock.fence_floor AS f (id, floor) VALUES (true, $1) "
	"ON CONFLICT (id) DO UPDATE SET floor = GREATEST(f.floor, excluded.floor)",
	1,
	{INT8OID}};

/* ---------------------------------------------------------------------------------------------
 * Grants, renewals, releases: the direct path where it is equivalent, else the statement
 * ---------------------------------------------------------------------------------------------
 */

/* The grant statements of the lease table's version (FlApi, and 0.3.0's session_id). */
static int
grant_version(FlApi api)
{
	if (api == FL_API_0_1)
		return 0;
	return fl_lease_table_has_sessions() ? 2 : 1;
}

/* A grant statement's result row: RETURNING fence [, granted_how, is_new] */
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
 * The statement path's attempt: the update, or the insert of a resource's first row.  NOWAIT
 * (a try-once grant): the update locks NOWAIT; a row that exists but was not granted is busy
 * without an insert (whose ON CONFLICT would wait for a change in progress), and so is a first
 * row another transaction is inserting (fl_lease_row_in_progress); an insert that meets one begun
 * since that look waits 1 ms at most (INSERT has no NOWAIT).
 */
static bool
grant_by_statement(int v, bool update, bool nowait, Datum *values, const char *nulls, bool *busy,
				   bool *inserted)
{
	int64 base = DatumGetInt64(values[4]);
	bool granted;

	*busy = *inserted = false;
	if (update && (nowait ? fl_run_nowait(&grant_nowait[v], values, nulls, 0, busy)
						  : fl_run_or_undo(&grant_update[v], values, nulls)))
		return true;
	if (!*busy && nowait && update && fl_run(&fence_select, values, NULL, true) == 1)
		*busy = true;
	if (*busy)
		return false;

	/*
	 * No grantable row: either none exists yet, or another owner holds the lease.  A try-once
	 * grant does not insert behind another transaction's first row still in progress: busy.
	 */
	if (nowait && fl_lease_row_in_progress(DatumGetTextPP(values[0])))
	{
		*busy = true;
		return false;
	}
	values[4] = Int64GetDatum(base + 1);
	granted = nowait ? fl_run_nowait(&grant_insert[v], values, nulls, 1, busy)
					 : fl_run(&grant_insert[v], values, nulls, false) == 1;
	values[4] = Int64GetDatum(base);
	*inserted = granted;
	if (granted || *busy)
		return granted;

	/*
	 * The insert met an existing row.  Usually that is another owner's live lease, which the
	 * update saw; but it may be a first grant that committed while this insert waited for it,
	 * which the update could not see.  That one may be this same owner's (a retry after a lost
	 * response, on another connection), so look once more.
	 */
	return nowait ? fl_run_nowait(&grant_nowait[v], values, nulls, 0, busy)
				  : fl_run_or_undo(&grant_update[v], values, nulls);
}

/*
 * One attempt (A) at the exclusive grant REQ asks for, of RESOURCE to OWNER for REQ's ttl, without
 * waiting for the lease; fills *g (on a busy resource with want_expiry, also the holder's
 * deadline, 0 when unknown).  The rule decides and writes; the grant's side effects (history,
 * counts, value, notification, durability) are the caller's (lease/grant.c).  NOWAIT (a try-once
 * acquire): busy rather than wait for another transaction's change or row lock on the lease row.
 * The row is changed directly where that is equivalent; otherwise, and to insert a resource's first
 * row, by the statements.
 *
 * REQ's xact (acquire_xact): the transaction's own grant.  The rule is the same with nobody as the
 * owner and the grant's own moment as its deadline, so the row is written as a lease released at
 * once: a new fence, owner NULL.  The row stays locked by this transaction until it ends, which
 * is what holds the lease: no other owner is granted it before the commit (which frees it) or the
 * rollback (which undoes the grant).  OWNER then names the grant in the history only
 * (lease/grant.c).
 */
void
fl_lease_grant(text *resource, text *owner, const FlRequest *req, const FlAttempt *a, FlGrant *g)
{
	TimestampTz now = a->now;
	FlApi api = req->api;
	Name holder = a->holder;
	int64 session = req->session;
	bool want_expiry = a->want_expiry;
	bool nowait = a->nowait;
	Interval delay = {.time = (int64) fencelock_lock_delay_ms * 1000};
	FlGrantCall c = {.owner = req->xact ? NULL : owner,
					 .now = now,
					 .expires = req->xact ? now : now + req->ttl,
					 .v2 = api != FL_API_0_1,
					 .base = fl_timeline_base(),
					 .holder = holder,
					 .lock_delay = &delay,
					 .session = session};
	FlRowResult direct = fencelock_direct_path
							 ? fl_lease_row_change(resource, c.v2, nowait, rule_grant, &c)
							 : FL_ROW_USE_SQL;
	int v = grant_version(api);
	Datum values[8];
	char nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	FlSession s;
	bool isnull;
	bool inserted = false;
	bool busy = false;

	memset(g, 0, sizeof(*g));
	g->granted_at = now;
	g->expires_at = c.expires;
	if (direct == FL_ROW_BUSY)
		return;
	if (direct == FL_ROW_CHANGED || direct == FL_ROW_REFUSED)
	{
		g->granted = direct == FL_ROW_CHANGED;
		g->fence = c.fence;
		g->how = c.how;
		g->is_new = c.is_new;
		g->holder_expires = want_expiry ? c.holder_expires : 0;
		g->group = direct == FL_ROW_REFUSED && c.group;
		return;
	}

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(c.owner);
	nulls[1] = c.owner != NULL ? ' ' : 'n';
	values[2] = TimestampTzGetDatum(now);
	values[3] = TimestampTzGetDatum(c.expires);
	values[4] = Int64GetDatum(c.base);
	values[5] = NameGetDatum(holder);
	values[6] = IntervalPGetDatum(&delay);
	values[7] = Int64GetDatum(session);
	nulls[7] = session != 0 ? ' ' : 'n';

	/*
	 * The updates run through fl_run_or_undo: one that loses a race to a concurrent grant must not
	 * keep the row lock it took to re-check the row.  When no row exists yet, the first update
	 * changes nothing and writes nothing; the insert takes no row lock when it meets a row.
	 */
	fl_begin(&s);
	g->granted =
		grant_by_statement(v, direct != FL_ROW_MISSING, nowait, values, nulls, &busy, &inserted);
	if (g->granted)
	{
		grant_result(api, g);
		if (inserted)
			g->fence = fl_lease_above_floor(values[0], g->fence);
	}
	else
		g->group = true; /* perhaps (a try-once refusal is busy here): fl_group_end_dead looks */
	if (!g->granted && want_expiry && !busy && fl_run(&holder_expiry, values, NULL, false) == 1)
		g->holder_expires = DatumGetTimestampTz(
			SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	fl_end(&s);
}

/*
 * Renew (release false: until EXPIRES) or release the lease OWNER holds on RESOURCE (only the
 * grant with fence *GRANT, unless GRANT is NULL).  Returns the lease's fence, or -1 when OWNER did
 * not hold that live lease; records the change in the history.
 */
int64
fl_lease_owner_change(text *resource, text *owner, const int64 *grant, TimestampTz now,
					  TimestampTz expires, bool release, FlApi api)
{
	FlOwnerCall c = {.owner = owner,
					 .now = now,
					 .expires = expires,
					 .release = release,
					 .named = grant != NULL,
					 .grant = grant != NULL ? *grant : 0};
	FlRowResult direct = fencelock_direct_path
							 ? fl_lease_row_change(resource, false, false, rule_owner_change, &c)
							 : FL_ROW_USE_SQL;
	bool history = api != FL_API_0_1 && fencelock_history;
	Datum values[5];
	char nulls[5] = {' ', ' ', ' ', ' ', grant != NULL ? ' ' : 'n'};
	FlSession s;
	int64 fence = direct == FL_ROW_CHANGED ? c.fence : -1;
	bool isnull;

	if (direct != FL_ROW_USE_SQL && (fence < 0 || !history))
		return fence;

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(now);
	values[3] = TimestampTzGetDatum(expires);
	values[4] = Int64GetDatum(c.grant);

	/* A renew or release that loses a race to a takeover must not keep the row locked. */
	fl_begin(&s);
	if (direct == FL_ROW_USE_SQL && fl_run_or_undo(&owner_update[release], values, nulls))
		fence = fl_get_int64(0, 1, &isnull);
	if (fence >= 0 && history)
		fl_history_update(resource, fence, now, expires, release);
	fl_end(&s);
	return fence;
}

/*
 * Whether OWNER holds a live lease on RESOURCE now, and (FENCE not NULL) its fence (a statement:
 * the waiting acquire and set_value ask).
 */
bool
fl_lease_holds(text *resource, text *owner, int64 *fence)
{
	Datum values[3];
	FlSession s;
	bool holds;
	bool isnull;

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(fl_lease_now());
	fl_begin(&s);
	holds = fl_run(&holds_select, values, NULL, true) == 1;
	if (holds && fence != NULL)
		*fence = fl_get_int64(0, 1, &isnull);
	fl_end(&s);
	return holds;
}

/* RESOURCE's latest fence, without a lock; false when it has none. */
bool
fl_lease_fence(text *resource, int64 *fence)
{
	Datum values[1];
	FlSession s;
	bool found;
	bool isnull;

	values[0] = PointerGetDatum(resource);
	fl_begin(&s);
	found = fl_run(&fence_select, values, NULL, true) == 1;
	if (found)
	{
		*fence = fl_get_int64(0, 1, &isnull);
		found = !isnull; /* a NULL fence (a superuser's doing) is none */
	}
	fl_end(&s);
	return found;
}

/* ---------------------------------------------------------------------------------------------
 * Purge, revoke, a session's end, raise_fences
 * ---------------------------------------------------------------------------------------------
 */

/*
 * Delete the purgeable rows, keeping no lock on a row that is not deleted: all at once in a
 * subtransaction, kept when every candidate went; otherwise row by row, each in its own.  Returns
 * how many went; *gone, the resources deleted (a text[]), for the history.
 */
static int64
purge_rows(FlApi api, Datum *values, Datum *gone)
{
	int v = api - FL_API_0_1;
	FlSubxact x;
	int64 deleted = 0;
	int64 candidates = 0;
	bool isnull = true;
	SPITupleTable *list;
	ArrayBuildState *one_by_one;
	uint64 n;

	*gone = (Datum) 0;
	fl_subxact_begin(&x);
	PG_TRY();
	{
		fl_run(&purge_all[v], values, NULL, false);
		deleted = fl_get_int64(0, 1, &isnull);
		candidates = fl_get_int64(0, 2, &isnull);
		*gone = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		*gone = isnull ? (Datum) 0 : datumCopy(*gone, false, -1);
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
	*gone = (Datum) 0;
	one_by_one = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	n = fl_run(&purge_list[v], values, NULL, true);
	list = SPI_tuptable;
	for (uint64 i = 0; i < n; i++)
	{
		values[2] = SPI_getbinval(list->vals[i], list->tupdesc, 1, &isnull);
		if (fl_run_or_undo(&purge_one[v], values, NULL))
		{
			accumArrayResult(one_by_one, values[2], false, TEXTOID, CurrentMemoryContext);
			deleted++;
		}
	}
	if (deleted > 0)
		*gone = makeArrayResult(one_by_one, CurrentMemoryContext);
	return deleted;
}

/*
 * Delete the leases idle since CUTOFF (a free lease's expires_at is its release), and close their
 * grants in the history; returns how many went.  WAKE is called with each one's resource.
 */
int64
fl_lease_purge(FlApi api, TimestampTz cutoff, TimestampTz now, void (*wake)(text *resource))
{
	Datum values[3];
	Datum gone;
	FlSession s;
	int64 purged;

	values[0] = TimestampTzGetDatum(cutoff);
	values[1] = TimestampTzGetDatum(now);
	fl_begin(&s);
	purged = purge_rows(api, values, &gone);
	if (gone != (Datum) 0)
	{
		ArrayIterator it = array_create_iterator(DatumGetArrayTypeP(gone), 0, NULL);
		Datum resource;
		bool isnull;

		while (array_iterate(it, &resource, &isnull))
			if (!isnull)
				wake(DatumGetTextPP(resource));
		array_free_iterator(it);
	}
	if (api != FL_API_0_1)
	{
		fl_history_purge(gone, now);
		fl_group_forget_orphans(); /* holders of groups that ended or went */
	}
	fl_end(&s);
	return purged;
}

/*
 * Revoke RESOURCE's lease: a new fence nobody holds.  False when it has no row; *fence, the
 * revoke's fence.
 */
bool
fl_lease_revoke(text *resource, TimestampTz now, int64 *fence)
{
	Datum values[3];
	FlSession s;
	bool found;
	bool isnull;

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fl_timeline_base());
	values[2] = TimestampTzGetDatum(now);
	fl_begin(&s);
	found = fl_run(&revoke_update, values, NULL, false) == 1;
	if (found)
	{
		*fence = fl_get_int64(0, 1, &isnull);
		fl_group_forget(resource); /* a group's holders end with it */
		if (fencelock_history)
			fl_history_revoke(resource, *fence, now);
	}
	fl_end(&s);
	return found;
}

/*
 * The session SESSION has ended at NOW: end the leases it bound of RESOURCES (a text[]), those no
 * other transaction has locked.  Runs inside the caller's fl_begin; returns the number of rows,
 * which SPI_tuptable holds until fl_end (resource, fence, holder, released).
 */
uint64
fl_lease_end_session(Datum resources, int64 session, TimestampTz now)
{
	Datum values[3];

	values[0] = resources;
	values[1] = Int64GetDatum(session);
	values[2] = TimestampTzGetDatum(now);
	return fl_run(&session_end, values, NULL, false);
}

/*
 * Revoke every lease whose fence is below ABOVE, at ABOVE, and raise the floor to it.  Returns
 * how many leases were raised; WAKE is called with each one's resource.
 */
int64
fl_lease_raise(int64 above, void (*wake)(text *resource))
{
	Datum values[2];
	FlSession s;
	uint64 raised;

	values[0] = Int64GetDatum(above);
	values[1] = TimestampTzGetDatum(fl_lease_now());
	fl_begin(&s);
	raised = fl_run(&raise_leases, values, NULL, false);
	for (uint64 r = 0; r < raised; r++)
	{
		bool isnull;
		Datum resource = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);

		wake(DatumGetTextPP(resource));
	}
	fl_run(&raise_floor, values, NULL, false);
	fl_group_forget_orphans(); /* the holders of the groups it ended */
	fl_end(&s);
	return (int64) raised;
}
