/*
 * store/group.c — shared and permit holders: fencelock.lease_holder, and a resource's lease row
 * while a group holds it (doc/design.md, "Shared leases, permits and values").
 *
 * One row of fencelock.lease stays the one arbiter between exclusive and group use.  While shared
 * or permit holders exist, the row is held by the group: owner '' (a token no caller can pass),
 * expires_at the latest deadline of its holders plus that holder's lock_delay, no lock_delay or
 * session of its own.  The exclusive rule (store/rule.c) is untouched by this: it sees another
 * owner's lease, busy until the group ends or its deadline passes (then a takeover).  A group
 * grant finds the row free for the group exactly when that rule finds it free for owner ''
 * (SQL_FREE_V3, store/rulesql.h); every grant takes the row's next fence (SQL_NEXT_FENCE), so an
 * exclusive grant's fence is above every fence issued before it, shared or not.
 *
 * The holders are rows of fencelock.lease_holder, one per owner, belonging to the current group:
 * the grant that starts a group deletes the resource's old ones.  Every change to a current
 * group's holder rows is made while its lease row is locked (which operation takes which lock,
 * in which order: the row-lock protocol, store/README.md).  So a grant, which counts the live
 * holders, sees every committed change, and the exit sweep never meets a locked holder row.  A
 * holder occupies its share or slot while its deadline plus its lock_delay has not passed and its
 * session (if bound) lives; it may renew and release while it is in the current group and its
 * deadline has not passed, and write (a lease-bound write with its fence, assert_fence) while it is
 * in the current group: as an exclusive holder's fence stays valid past its deadline until a new
 * grant supersedes it, an expired holder's does until its release, its slot's reuse or the group's
 * end.  Each attempt runs in a subtransaction that is rolled back unless it changed something, so a
 * busy or refused call keeps no row lock.
 *
 * The statements run as the extension's owner (base/asowner.c), every name and operator qualified.
 */
#include "postgres.h"

#include "access/xact.h"
#include "base/asowner.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "observe/count.h"
#include "fencelock.h"
#include "observe/history.h"
#include "store/fence.h"
#include "store/group.h"
#include "store/row.h"
#include "store/rulesql.h"
#include "observe/notify.h"
#include "settings.h"
#include "store/timeline.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "store/clock.h"
#include "utils/timestamp.h"

/* The most permits a resource may have: the slots of one grant are counted in a bitmap. */
#define FL_MAX_PERMITS 1024

/* A holder row's session, as SQL_FREE_V3 asks it of a lease row. */
#define SQL_H_SESSION_LIVE "(h.session_id IS NULL OR fencelock.session_alive(h.session_id))"
/* A holder may renew, release and write: its deadline has not passed, its session lives. */
#define SQL_H_LIVE "h.expires_at OPERATOR(pg_catalog.>) $3 AND " SQL_H_SESSION_LIVE
/* A holder's deadline with its lock_delay: until then its share or slot is taken. */
#define SQL_H_UNTIL    "h.expires_at OPERATOR(pg_catalog.+) COALESCE(h.lock_delay, '0')"
#define SQL_H_OCCUPIES SQL_H_UNTIL " OPERATOR(pg_catalog.>) $3 AND " SQL_H_SESSION_LIVE

/*
 * $1 resource, $2 '' (the group's token), $3 now: the row locked, and whether the group holding
 * it goes on (its owner '' and its deadline not passed), whether it is free for the group, when
 * its holder's lease runs out, whether nobody held it, and its latest fence.
 */
#define GROUP_LOCK(wait)                                                                           \
	"SELECT l.owner OPERATOR(pg_catalog.=) '' AND l.expires_at OPERATOR(pg_catalog.>) $3, "        \
	" " SQL_FREE_V3 ", " SQL_HOLDER_DEADLINE ", l.owner IS NULL, l.fence "                         \
	"FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "                        \
	"FOR NO KEY UPDATE OF l " wait

static FlStmt group_lock[2] = {{GROUP_LOCK(""), 3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}},
							   {GROUP_LOCK("NOWAIT"), 3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}}};

/* $1 resource, $2 its first fence, $3 now, $4 holder: a resource's first row, free */
static FlStmt group_insert = {
	"INSERT INTO fencelock.lease AS l (resource, owner, fence, acquired_at, expires_at, holder, "
	" granted_how, lock_delay, session_id) VALUES ($1, NULL, $2, $3, $3, $4, 'n', NULL, NULL) "
	"ON CONFLICT (resource) DO NOTHING",
	4,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, NAMEOID}};

/* $1 resource, $2 owner, $3 now: the group's holders, as a grant counts them */
static FlStmt holders_select = {"SELECT h.owner OPERATOR(pg_catalog.=) $2, h.fence, h.slot, "
								" h.permits, " SQL_H_LIVE ", " SQL_H_OCCUPIES ", " SQL_H_UNTIL " "
								"FROM fencelock.lease_holder AS h "
								"WHERE h.resource OPERATOR(pg_catalog.=) $1",
								3,
								{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

/* $1 resource: a new group starts without the old one's holders */
static FlStmt holders_clear = {
	"DELETE FROM fencelock.lease_holder AS h WHERE h.resource OPERATOR(pg_catalog.=) $1",
	1,
	{TEXTOID}};

/* $1 resource, $2 owner, ... $11 value: a new holder (or the same owner's expired one, replaced) */
static FlStmt holder_put = {
	"INSERT INTO fencelock.lease_holder AS h (resource, owner, fence, acquired_at, expires_at, "
	" holder, lock_delay, session_id, slot, permits, value) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
	"ON CONFLICT (resource, owner) DO UPDATE SET fence = excluded.fence, "
	" acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, "
	" holder = excluded.holder, lock_delay = excluded.lock_delay, "
	" session_id = excluded.session_id, slot = excluded.slot, permits = excluded.permits, "
	" value = excluded.value",
	11,
	{TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, NAMEOID, INTERVALOID, INT8OID,
	 INT4OID, INT4OID, JSONBOID}};

/*
 * $1 resource, $2 owner, $3 slot: the holder whose slot a new permit takes (it occupies it no
 * longer: expired past its lock_delay, or its session ended) leaves the group.
 */
static FlStmt holder_evict = {
	"DELETE FROM fencelock.lease_holder AS h WHERE h.resource OPERATOR(pg_catalog.=) $1 "
	" AND h.owner OPERATOR(pg_catalog.<>) $2 AND h.slot OPERATOR(pg_catalog.=) $3 "
	"RETURNING h.fence",
	3,
	{TEXTOID, TEXTOID, INT4OID}};

/* $1 resource, $2 owner, $3 new deadline, $4 session, $5 value: the same owner's retry */
static FlStmt holder_retry = {
	"UPDATE fencelock.lease_holder AS h SET expires_at = $3, session_id = $4, "
	" value = COALESCE($5, h.value) "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.owner OPERATOR(pg_catalog.=) $2",
	5,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID, JSONBOID}};

/*
 * $1 resource, $2 fence, $3 now, $4 the holder's deadline with its lock_delay, $5 holder,
 * $6 how the group was granted, $7 a new group: the row held by the group.  A retry's fence (the
 * same owner's live share) is not the latest: the row keeps the latest.
 */
static FlStmt group_set = {
	"UPDATE fencelock.lease AS l SET owner = '', fence = GREATEST(l.fence, $2), "
	" acquired_at = CASE WHEN $7 THEN $3 ELSE l.acquired_at END, "
	" expires_at = CASE WHEN $7 THEN $4 ELSE GREATEST(l.expires_at, $4) END, holder = $5, "
	" granted_how = CASE WHEN $7 THEN $6 ELSE l.granted_how END, lock_delay = NULL, "
	" session_id = NULL WHERE l.resource OPERATOR(pg_catalog.=) $1",
	7,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, NAMEOID, CHAROID, BOOLOID}};

/*
 * $1 resource, $2 (unused), $3 now: after a holder left or renewed, the group's deadline is its
 * latest holder's; when no holder occupies a share or slot any more the group has ended: the row
 * is released at $3 (as release writes it) and its holder rows deleted.  Returns whether it ended.
 */
static FlStmt group_recompute = {
	"WITH m AS (SELECT pg_catalog.max(" SQL_H_UNTIL ") AS until FROM fencelock.lease_holder AS h "
	"  WHERE h.resource OPERATOR(pg_catalog.=) $1 AND " SQL_H_OCCUPIES "), "
	" up AS (UPDATE fencelock.lease AS l SET "
	"  owner = CASE WHEN m.until IS NULL THEN NULL ELSE '' END, expires_at = COALESCE(m.until, $3) "
	"  FROM m WHERE l.resource OPERATOR(pg_catalog.=) $1 AND l.owner OPERATOR(pg_catalog.=) '' "
	"  RETURNING m.until IS NULL AS ended), "
	" gone AS (DELETE FROM fencelock.lease_holder AS h WHERE h.resource OPERATOR(pg_catalog.=) $1 "
	"  AND EXISTS (SELECT FROM up AS u WHERE u.ended)) "
	"SELECT u.ended FROM up AS u",
	3,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

/* $1 resource: the row locked, if a group holds it (renew, release) */
static FlStmt group_lock_held = {
	"SELECT FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	" AND l.owner OPERATOR(pg_catalog.=) '' FOR NO KEY UPDATE OF l",
	1,
	{TEXTOID}};

/* $1 resource: the row share-locked, if a group holds it (set_value: as a lease-bound write) */
static FlStmt group_share_held = {
	"SELECT FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	" AND l.owner OPERATOR(pg_catalog.=) '' FOR SHARE OF l",
	1,
	{TEXTOID}};

/*
 * Renew and release of a holder: $1 resource, $2 owner, $3 now, $4 new deadline, $5 the grant's
 * fence or NULL (as store/rule.c's SQL_NAMED_GRANT).
 */
#define HOLDER_CHANGE_WHERE                                                                        \
	" WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.owner OPERATOR(pg_catalog.=) $2 "           \
	" AND " SQL_H_LIVE " AND ($5 IS NULL OR h.fence OPERATOR(pg_catalog.=) $5) "                   \
	"RETURNING h.fence, h.slot"

static FlStmt holder_change[2] = {
	{"UPDATE fencelock.lease_holder AS h SET expires_at = $4" HOLDER_CHANGE_WHERE,
	 5,
	 {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}},
	{"DELETE FROM fencelock.lease_holder AS h" HOLDER_CHANGE_WHERE,
	 5,
	 {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}}};

/* $1 resource, $2 owner, $3 now: the fence of the owner's live share or permit */
static FlStmt holder_holds = {
	"SELECT h.fence, h.permits IS NOT NULL, h.slot FROM fencelock.lease_holder AS h, "
	" fencelock.lease AS l "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.owner OPERATOR(pg_catalog.=) $2 "
	" AND l.resource OPERATOR(pg_catalog.=) h.resource AND l.owner OPERATOR(pg_catalog.=) '' "
	" AND " SQL_H_LIVE,
	3,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

/* $1 resource, $2 fence, $3 value */
static FlStmt holder_value = {
	"UPDATE fencelock.lease_holder AS h SET value = $3 "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.fence OPERATOR(pg_catalog.=) $2",
	3,
	{TEXTOID, INT8OID, JSONBOID}};

/* $1 resource, $2 fence: the role of the current group's holder with that fence */
static FlStmt holder_of_fence = {
	"SELECT CAST(h.holder AS pg_catalog.name) FROM fencelock.lease_holder AS h "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.fence OPERATOR(pg_catalog.=) $2",
	2,
	{TEXTOID, INT8OID}};

static FlStmt forget_one = {
	"DELETE FROM fencelock.lease_holder AS h WHERE h.resource OPERATOR(pg_catalog.=) $1",
	1,
	{TEXTOID}};

/* Holder rows whose group has ended (raise_fences, purge) */
static FlStmt forget_orphans = {
	"DELETE FROM fencelock.lease_holder AS h WHERE NOT EXISTS (SELECT FROM fencelock.lease AS l "
	" WHERE l.resource OPERATOR(pg_catalog.=) h.resource AND l.owner OPERATOR(pg_catalog.=) '')",
	0,
	{InvalidOid}};

/*
 * A session's end, in two statements.  First ($1 the resources it bound): the rows of the groups
 * among them that no other transaction has locked, locked, as a text[] (NULL: none).  Then, with a
 * snapshot taken after that lock ($1 those resources, $2 the session's id, $3 its end): its holders
 * in them released; each group's deadline recomputed without them, and a group left without
 * holders released.  Returns each holder's resource, fence, holder.  (Read with the first
 * statement's snapshot, a share granted and committed between that snapshot and the lock would be
 * missed, and its group released under it.)
 */
static FlStmt session_groups = {
	"SELECT pg_catalog.array_agg(g.resource) FROM (SELECT l.resource FROM fencelock.lease AS l "
	"  WHERE l.resource OPERATOR(pg_catalog.=) ANY ($1) AND l.owner OPERATOR(pg_catalog.=) '' "
	"  FOR NO KEY UPDATE OF l SKIP LOCKED) AS g",
	1,
	{TEXTARRAYOID}};

static FlStmt session_end = {
	"WITH gone AS (DELETE FROM fencelock.lease_holder AS h "
	"  WHERE h.resource OPERATOR(pg_catalog.=) ANY ($1) "
	"   AND h.session_id OPERATOR(pg_catalog.=) $2 RETURNING h.resource, h.fence, h.holder), "
	" m AS (SELECT g.resource, (SELECT pg_catalog.max(" SQL_H_UNTIL ") "
	"   FROM fencelock.lease_holder AS h WHERE h.resource OPERATOR(pg_catalog.=) g.resource "
	"    AND h.session_id IS DISTINCT FROM $2 AND " SQL_H_OCCUPIES ") AS until "
	"   FROM pg_catalog.unnest($1) AS g(resource)), "
	" up AS (UPDATE fencelock.lease AS l SET "
	"  owner = CASE WHEN m.until IS NULL THEN NULL ELSE '' END, expires_at = COALESCE(m.until, $3) "
	"  FROM m WHERE l.resource OPERATOR(pg_catalog.=) m.resource "
	"   AND l.owner OPERATOR(pg_catalog.=) '' "
	"   AND EXISTS (SELECT FROM gone AS x WHERE x.resource OPERATOR(pg_catalog.=) m.resource)) "
	"SELECT x.resource, x.fence, x.holder FROM gone AS x",
	3,
	{TEXTARRAYOID, INT8OID, TIMESTAMPTZOID}};

/*
 * A group of ended sessions (fl_group_end_dead).  $1 resource, $2 (unused), $3 now: the group
 * holds the row by its deadline, one of its holders' sessions has ended, and no holder occupies a
 * share or slot any more.  Then, with the row locked and a snapshot taken after that lock, the
 * holders whose sessions have ended leave (their fence and role returned), as the exit sweeps
 * that skipped the locked row would have released them; group_recompute follows.
 */
static FlStmt group_dead = {
	"SELECT FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	" AND l.owner OPERATOR(pg_catalog.=) '' AND l.expires_at OPERATOR(pg_catalog.>) $3 "
	" AND EXISTS (SELECT FROM fencelock.lease_holder AS h "
	"  WHERE h.resource OPERATOR(pg_catalog.=) $1 AND NOT " SQL_H_SESSION_LIVE ") "
	" AND NOT EXISTS (SELECT FROM fencelock.lease_holder AS h "
	"  WHERE h.resource OPERATOR(pg_catalog.=) $1 AND " SQL_H_OCCUPIES ")",
	3,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

static FlStmt group_lock_held_nowait = {
	"SELECT FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	" AND l.owner OPERATOR(pg_catalog.=) '' FOR NO KEY UPDATE OF l NOWAIT",
	1,
	{TEXTOID}};

static FlStmt holders_dead = {
	"DELETE FROM fencelock.lease_holder AS h WHERE h.resource OPERATOR(pg_catalog.=) $1 "
	" AND NOT " SQL_H_SESSION_LIVE " RETURNING h.fence, h.holder",
	3,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

/* ---------------------------------------------------------------------------------------------
 * Grants
 * ---------------------------------------------------------------------------------------------
 */

/* The group's holders as a grant sees them (holders_select). */
typedef struct FlGroupView
{
	int others;        /* holders of other owners occupying a share or slot */
	int mode_permits;  /* their permits: 0 shared, N permits; -1 none */
	bool mine_live;    /* this owner's live holder row */
	int64 mine_fence;  /* its fence */
	int mine_slot;     /* its slot, 0 for a share */
	TimestampTz first; /* the earliest deadline (with lock_delay) of the others; 0 none */
	bits8 used[FL_MAX_PERMITS / 8];
} FlGroupView;

static void
group_view(Datum *values, FlGroupView *v)
{
	uint64 rows = fl_run(&holders_select, values, NULL, false);

	memset(v, 0, sizeof(*v));
	v->mode_permits = -1;
	for (uint64 r = 0; r < rows; r++)
	{
		HeapTuple t = SPI_tuptable->vals[r];
		TupleDesc d = SPI_tuptable->tupdesc;
		bool isnull;
		bool mine = DatumGetBool(SPI_getbinval(t, d, 1, &isnull));
		int64 fence = DatumGetInt64(SPI_getbinval(t, d, 2, &isnull));
		Datum slot = SPI_getbinval(t, d, 3, &isnull);
		int nslot = isnull ? 0 : DatumGetInt32(slot);
		Datum permits = SPI_getbinval(t, d, 4, &isnull);
		int npermits = isnull ? 0 : DatumGetInt32(permits);
		bool live = DatumGetBool(SPI_getbinval(t, d, 5, &isnull));
		bool occupies = DatumGetBool(SPI_getbinval(t, d, 6, &isnull));
		TimestampTz until = DatumGetTimestampTz(SPI_getbinval(t, d, 7, &isnull));

		if (mine)
		{
			/* This owner's row, live: a retry.  Expired: replaced by the grant. */
			if (live)
			{
				v->mine_live = true;
				v->mine_fence = fence;
				v->mine_slot = nslot;
				v->mode_permits = npermits;
			}
			continue;
		}
		if (!occupies)
			continue;
		v->others++;
		v->mode_permits = npermits;
		if (v->first == 0 || until < v->first)
			v->first = until;
		if (nslot > 0 && nslot <= FL_MAX_PERMITS)
			v->used[(nslot - 1) / 8] |= 1 << ((nslot - 1) % 8);
	}
}

static const char *
mode_name(int permits)
{
	return permits > 0 ? "permit" : "shared";
}

/* The group goes on: a grant of another mode or count than its holders' is refused. */
static void
check_mode(text *resource, int want, int have)
{
	if ((want > 0) != (have > 0))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
						errmsg("resource \"%s\" is held by %s holders", text_to_cstring(resource),
							   have > 0 ? "permit" : "shared"),
						errdetail("A %s lease cannot join them: one resource has shared or permit "
								  "holders, not both.",
								  mode_name(want)),
						errhint("Use another resource name for the %s lease.", mode_name(want))));
	if (want > 0 && want != have)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("resource \"%s\" has %d permits, not %d", text_to_cstring(resource),
							   have, want),
						errdetail("The first grant of a group fixes its count of permits."),
						errhint("Pass permits => %d, or release every permit to change the count.",
								have)));
}

/* A group grant as group_try makes it: the request and the attempt, with the deadline. */
typedef struct FlGroupCall
{
	int permits; /* 0: shared; else the count of slots */
	TimestampTz now;
	TimestampTz expires;
	Name holder;   /* the caller's role */
	int64 session; /* 0: not session-bound */
	Jsonb *value;  /* NULL: none (a retry keeps its value) */
	bool nowait;
	bool want_expiry;
	bool writer_queued; /* an exclusive waiter is queued ahead: only a retry is granted */
} FlGroupCall;

/* The attempt, inside the caller's subtransaction and fl_begin; true when granted. */
static bool
group_try(text *resource, text *owner, const FlGroupCall *c, FlGrant *g)
{
	Interval delay = {.time = (int64) fencelock_lock_delay_ms * 1000};
	int64 base = fl_timeline_base();
	Datum values[11];
	char nulls[11] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool busy = false;
	bool inserted = false;
	bool cont;
	bool free;
	bool was_released;
	int64 fence;
	bool isnull;
	TimestampTz deadline;
	FlGroupView v;
	int slot = 0;
	bool new_group;

	values[0] = PointerGetDatum(resource);
	values[1] = CStringGetTextDatum("");
	values[2] = TimestampTzGetDatum(c->now);
	for (int attempt = 0;; attempt++)
	{
		bool locked = c->nowait ? fl_run_nowait(&group_lock[1], values, NULL, 0, &busy)
								: fl_run(&group_lock[0], values, NULL, false) == 1;

		if (busy)
			return false;
		if (locked)
			break;
		/* No row yet: insert one, free, above the purge floor; then lock it. */
		if (attempt > 0 || (c->nowait && fl_lease_row_in_progress(resource)))
			return false;
		{
			Datum ins[4];

			ins[0] = values[0];
			ins[1] = Int64GetDatum(base);
			ins[2] = values[2];
			ins[3] = NameGetDatum(c->holder);
			if (c->nowait ? fl_run_nowait(&group_insert, ins, NULL, 1, &busy)
						  : fl_run(&group_insert, ins, NULL, false) == 1)
			{
				inserted = true;
				(void) fl_lease_above_floor(values[0], base);
			}
			if (busy)
				return false;
		}
	}
	cont = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	free = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	deadline = DatumGetTimestampTz(
		SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	was_released =
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	fence = fl_get_int64(0, 5, &isnull);
	if (!free)
	{
		/* An exclusive holder's live lease (or its lock_delay). */
		g->holder_expires = c->want_expiry ? deadline : 0;
		return false;
	}

	values[1] = PointerGetDatum(owner);
	if (cont)
		group_view(values, &v);
	else
		memset(&v, 0, sizeof(v));
	new_group = !cont || (v.others == 0 && !v.mine_live);
	/*
	 * Writer preference keeps new holders out, not the same owner's live share or permit: its
	 * retry after a lost reply gets its fence back (issue 35, defect 8).
	 */
	if (c->writer_queued && (new_group || !v.mine_live))
		return false;
	if (!new_group)
		check_mode(resource, c->permits, v.mode_permits);

	g->mode = c->permits > 0 ? FL_MODE_PERMIT : FL_MODE_SHARED;
	g->granted_at = c->now;
	g->expires_at = c->expires;
	if (v.mine_live && !new_group)
	{
		/* The same owner's live share or permit: a retry keeps its fence and slot. */
		values[2] = TimestampTzGetDatum(c->expires);
		values[3] = Int64GetDatum(c->session);
		nulls[3] = c->session != 0 ? ' ' : 'n';
		values[4] = PointerGetDatum(c->value);
		nulls[4] = c->value != NULL ? ' ' : 'n';
		fl_run(&holder_retry, values, nulls, false);
		g->fence = v.mine_fence;
		g->slot = v.mine_slot;
		g->is_new = false;
		g->how = FL_GRANTED_JOINED;
	}
	else
	{
		if (c->permits > 0)
		{
			if (!new_group && v.others >= c->permits)
			{
				g->holder_expires = c->want_expiry ? v.first : 0;
				return false;
			}
			for (slot = 1; slot <= c->permits; slot++)
				if (new_group || !(v.used[(slot - 1) / 8] & (1 << ((slot - 1) % 8))))
					break;
		}
		/* SQL_NEXT_FENCE, of the row locked above. */
		if (pg_add_s64_overflow(Max(fence, base), 1, &g->fence))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
		g->is_new = true;
		g->slot = slot;
		g->how = inserted    ? FL_GRANTED_NEW
				 : new_group ? (was_released ? FL_GRANTED_AFTER_RELEASE : FL_GRANTED_TAKEOVER)
							 : FL_GRANTED_JOINED;
		if (new_group)
			fl_run(&holders_clear, values, NULL, false);
		else if (slot > 0)
		{
			Datum evict[3];
			uint64 n;

			evict[0] = values[0];
			evict[1] = values[1];
			evict[2] = Int32GetDatum(slot);
			n = fl_run(&holder_evict, evict, NULL, false);
			for (uint64 r = 0; r < n && fencelock_history; r++)
				fl_history_ended(resource, fl_get_int64(r, 1, &isnull), c->now, "taken over");
		}
		values[2] = Int64GetDatum(g->fence);
		values[3] = TimestampTzGetDatum(c->now);
		values[4] = TimestampTzGetDatum(c->expires);
		values[5] = NameGetDatum(c->holder);
		values[6] = IntervalPGetDatum(&delay);
		values[7] = Int64GetDatum(c->session);
		nulls[7] = c->session != 0 ? ' ' : 'n';
		values[8] = Int32GetDatum(slot);
		nulls[8] = slot > 0 ? ' ' : 'n';
		values[9] = Int32GetDatum(c->permits);
		nulls[9] = c->permits > 0 ? ' ' : 'n';
		values[10] = PointerGetDatum(c->value);
		nulls[10] = c->value != NULL ? ' ' : 'n';
		fl_run(&holder_put, values, nulls, false);
	}

	/* The group row: the new fence, the deadline at least this holder's. */
	{
		Datum set[7];
		TimestampTz until = DatumGetTimestampTz(DirectFunctionCall2(
			timestamptz_pl_interval, TimestampTzGetDatum(c->expires), IntervalPGetDatum(&delay)));

		set[0] = PointerGetDatum(resource);
		set[1] = Int64GetDatum(g->fence);
		set[2] = TimestampTzGetDatum(c->now);
		set[3] = TimestampTzGetDatum(until);
		set[4] = NameGetDatum(c->holder);
		set[5] = CharGetDatum(g->how == FL_GRANTED_JOINED ? FL_GRANTED_NEW : g->how);
		set[6] = BoolGetDatum(new_group);
		fl_run(&group_set, set, NULL, false);
	}
	g->granted = true;
	return true;
}

/*
 * One attempt (A) at the share or permit REQ asks for, of RESOURCE for OWNER; fills *g as
 * fl_lease_grant does (the grant's side effects are the caller's, lease/grant.c).  Busy (not
 * granted) while an exclusive holder holds the lease or, for a permit, every slot is taken; a
 * refused call keeps nothing (no row lock, no row).  NOWAIT: busy rather than wait for another
 * transaction's change or row lock on the lease row.
 */
void
fl_group_grant(text *resource, text *owner, const FlRequest *req, const FlAttempt *a, FlGrant *g)
{
	FlGroupCall call = {.permits = req->mode == FL_MODE_PERMIT ? req->permits : 0,
						.now = a->now,
						.expires = a->now + req->ttl,
						.holder = a->holder,
						.session = req->session,
						.value = req->value,
						.nowait = a->nowait,
						.want_expiry = a->want_expiry,
						.writer_queued = a->writer_queued};
	const FlGroupCall *c = &call;
	FlSubxact x;
	FlSession s;
	volatile bool granted = false;

	if (c->permits > FL_MAX_PERMITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%d permits are more than the limit of %d", c->permits, FL_MAX_PERMITS),
				 errhint("Pass a count of permits from 1 to %d.", FL_MAX_PERMITS)));
	memset(g, 0, sizeof(*g));
	fl_begin(&s);
	fl_subxact_begin(&x);
	PG_TRY();
	{
		granted = group_try(resource, owner, c, g);
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, granted);
	fl_end(&s);
}

/* ---------------------------------------------------------------------------------------------
 * Renewals, releases, values, fences
 * ---------------------------------------------------------------------------------------------
 */

/*
 * Renew (until EXPIRES) or release OWNER's share or permit of RESOURCE (only the grant with fence
 * *GRANT, unless GRANT is NULL).  Returns its fence (*slot its slot, 0 for a share), or -1 when
 * OWNER holds none that is live; records the change in the history.  The group's deadline
 * follows; its last holder's release frees the lease.
 */
int64
fl_group_owner_change(text *resource, text *owner, const int64 *grant, TimestampTz now,
					  TimestampTz expires, bool release, int *slot)
{
	FlSubxact x;
	FlSession s;
	Datum values[5];
	char nulls[5] = {' ', ' ', ' ', ' ', grant != NULL ? ' ' : 'n'};
	volatile int64 fence = -1;

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(now);
	values[3] = TimestampTzGetDatum(expires);
	values[4] = Int64GetDatum(grant != NULL ? *grant : 0);
	*slot = 0;
	fl_begin(&s);
	fl_subxact_begin(&x);
	PG_TRY();
	{
		if (fl_run(&group_lock_held, values, NULL, false) == 1 &&
			fl_run(&holder_change[release], values, nulls, false) == 1)
		{
			bool isnull;
			Datum d;

			fence = fl_get_int64(0, 1, &isnull);
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
			*slot = isnull ? 0 : DatumGetInt32(d);
			fl_run(&group_recompute, values, NULL, false);
			if (fencelock_history)
				fl_history_update(resource, fence, now, expires, release);
		}
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, fence >= 0);
	fl_end(&s);
	return fence;
}

/*
 * Whether OWNER holds a live share or permit of RESOURCE, and its fence, whether it is a permit,
 * and its slot, as the statement's snapshot shows it (lease/wait.c: whether OWNER waits for
 * itself).
 */
bool
fl_group_holds(text *resource, text *owner, int64 *fence, bool *permit, int *slot)
{
	Datum values[3];
	FlSession s;
	bool holds;
	bool isnull;

	if (!OidIsValid(get_relname_relid("lease_holder", fl_extension_schema())))
		return false; /* a database before 0.4.0: no groups */
	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(fl_lease_now());
	fl_begin(&s);
	holds = fl_run(&holder_holds, values, NULL, true) == 1;
	if (holds)
	{
		Datum d;

		*fence = fl_get_int64(0, 1, &isnull);
		*permit =
			DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		*slot = isnull ? 0 : DatumGetInt32(d);
	}
	fl_end(&s);
	return holds;
}

/*
 * Set the value of OWNER's live share or permit of RESOURCE (NULL clears it), with its fence,
 * whether it is a permit, and its slot; false when OWNER holds none.  The holder row changes under
 * a lock on the lease row, as every holder row of a current group does: a share lock, which
 * conflicts with grants, renewals, releases and the exit sweep (which skips a locked group, so it
 * never waits for the holder row), but not with the other holders' writes and values.  Looked up
 * first without a lock, so that a caller that holds nothing waits for nobody; a refused call keeps
 * no lock.
 */
bool
fl_group_value_set(text *resource, text *owner, Jsonb *value, int64 *fence, bool *permit, int *slot)
{
	Datum values[3];
	char nulls[3] = {' ', ' ', value != NULL ? ' ' : 'n'};
	FlSubxact x;
	FlSession s;
	volatile bool done = false;

	if (!fl_group_holds(resource, owner, fence, permit, slot))
		return false;
	fl_begin(&s);
	fl_subxact_begin(&x);
	PG_TRY();
	{
		values[0] = PointerGetDatum(resource);
		values[1] = PointerGetDatum(owner);
		values[2] = TimestampTzGetDatum(fl_lease_now());
		if (fl_run(&group_share_held, values, NULL, false) == 1 &&
			fl_run(&holder_holds, values, NULL, false) == 1)
		{
			bool isnull;
			Datum d;

			*fence = fl_get_int64(0, 1, &isnull);
			*permit = DatumGetBool(
				SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
			*slot = isnull ? 0 : DatumGetInt32(d);
			values[1] = Int64GetDatum(*fence);
			values[2] = PointerGetDatum(value);
			done = fl_run(&holder_value, values, nulls, false) == 1;
		}
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, done);
	fl_end(&s);
	return done;
}

/*
 * Whether FENCE is a holder's of the group that holds RESOURCE's row, which the caller has
 * share-locked (store/fence.c's fl_lease_lock said it is a group's), and that holder's role.
 * Read with a snapshot taken after that lock: the statement's own may predate a grant that
 * started a new group or took the holder's slot and committed while the lock waited for it.
 */
bool
fl_group_fence_holder(text *resource, int64 fence, NameData *holder)
{
	Datum values[2];
	FlSession s;
	bool found;

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fence);
	fl_begin(&s);
	found = fl_run_latest(&holder_of_fence, values, NULL) == 1;
	if (found)
	{
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull)
			found = false;
		else
			namestrcpy(holder, NameStr(*DatumGetName(d)));
	}
	fl_end(&s);
	return found;
}

/* ---------------------------------------------------------------------------------------------
 * The ends of groups
 * ---------------------------------------------------------------------------------------------
 */

/* Whether this database has groups (0.4.0 on): the statements below need the table. */
static bool
groups_exist(void)
{
	return OidIsValid(get_relname_relid("lease_holder", fl_extension_schema()));
}

/* RESOURCE's group ended (revoke): its holders go.  Runs inside the caller's fl_begin. */
void
fl_group_forget(text *resource)
{
	Datum values[1];

	if (!groups_exist())
		return;
	values[0] = PointerGetDatum(resource);
	fl_run(&forget_one, values, NULL, false);
}

/* Groups ended by raise_fences or deleted by purge: their holders go.  Inside fl_begin. */
void
fl_group_forget_orphans(void)
{
	if (groups_exist())
		fl_run(&forget_orphans, NULL, NULL, false);
}

/*
 * The session SESSION ended at NOW: release its holders of RESOURCES (a text[]) in groups no other
 * transaction has locked.  Runs inside the caller's fl_begin, in READ COMMITTED (lease/session.c's
 * exit transaction); returns the number of holders, which SPI_tuptable holds until fl_end
 * (resource, fence, holder).
 */
uint64
fl_group_end_session(Datum resources, int64 session, TimestampTz now)
{
	Datum values[3];
	bool isnull;

	/* The second statement's snapshot must be taken after the first's lock. */
	Assert(!IsolationUsesXactSnapshot());
	if (!groups_exist())
		return 0;
	values[0] = resources;
	if (fl_run(&session_groups, values, NULL, false) != 1)
		return 0;
	values[0] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return 0;
	values[1] = Int64GetDatum(session);
	values[2] = TimestampTzGetDatum(now);
	return fl_run(&session_end, values, NULL, false);
}

/*
 * An exclusive grant found RESOURCE's row held by a group (defect 3 of issue 35): when none of
 * the group's holders occupies a share or slot any more and one of them is of a session that has
 * ended, the group ends now, as the last exit sweep would have ended it had it not found the row
 * locked (a session's end skips a locked row rather than wait, lease/session.c).  Liveness, not
 * that sweep, frees a dead session's share, as it frees a dead session's exclusive lease: the
 * holders of ended sessions are released (history, a session_ended notification, a release counted)
 * and the group's row with them.  NOWAIT: busy rather than wait for the row's lock.  Returns
 * whether the group ended; otherwise nothing is kept (no row lock, no change).
 */
bool
fl_group_end_dead(text *resource, TimestampTz now, bool nowait)
{
	Datum values[3];
	FlSubxact x;
	FlSession s;
	volatile bool ended = false;

	if (!groups_exist())
		return false;
	values[0] = PointerGetDatum(resource);
	values[1] = CStringGetTextDatum("");
	values[2] = TimestampTzGetDatum(now);
	fl_begin(&s);
	/* Without a lock first, with a snapshot taken now: a group that goes on costs no wait. */
	if (fl_run(&group_dead, values, NULL, false) != 1)
	{
		fl_end(&s);
		return false;
	}
	fl_subxact_begin(&x);
	PG_TRY();
	{
		bool busy = false;
		bool locked = nowait ? fl_run_nowait(&group_lock_held_nowait, values, NULL, 0, &busy)
							 : fl_run(&group_lock_held, values, NULL, false) == 1;
		uint64 n = locked ? fl_run(&holders_dead, values, NULL, false) : 0;
		SPITupleTable *dead = SPI_tuptable;
		bool isnull;

		/* Read after the lock: a holder that joined meanwhile keeps the group. */
		if (n > 0 && fl_run(&group_recompute, values, NULL, false) == 1 &&
			DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		{
			ended = true;
			for (uint64 r = 0; r < n; r++)
			{
				HeapTuple t = dead->vals[r];
				Datum fence = SPI_getbinval(t, dead->tupdesc, 1, &isnull);
				Datum holder = SPI_getbinval(t, dead->tupdesc, 2, &isnull);

				fl_count_at_commit(FL_RELEASES, 1);
				if (fencelock_history)
					fl_history_session_end(values[0], fence, now, true);
				if (fencelock_notify)
					fl_notify("session_ended", resource, DatumGetInt64(fence),
							  isnull ? NULL : NameStr(*DatumGetName(holder)), NULL);
			}
		}
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, ended);
	fl_end(&s);
	return ended;
}
