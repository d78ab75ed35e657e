/*
 * observe/history.c — the optional record of grants and how they ended (fencelock.history = on).
 *
 * One row per grant: resource, fence, owner, how it was granted, when, its last deadline, and
 * when and how it ended (released, taken over after expiry, expired).  Rows older than
 * fencelock.history_retention are deleted by purge() and, now and then, by a grant.  These
 * statements run inside the lease functions' own SPI session, as the extension's owner.
 */
#include "postgres.h"

#include "base/asowner.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "fencelock.h"
#include "observe/history.h"
#include "miscadmin.h"
#include "settings.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* $1 resource, $2 new fence, $3 now, $4 how the earlier grant ended */
static FlStmt history_close = {
	"UPDATE fencelock.history AS h SET ended_at = LEAST(h.expires_at, $3), ended_how = $4 "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.ended_at IS NULL "
	" AND h.fence OPERATOR(pg_catalog.<) $2",
	4,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID}};

/* $1 resource, $2 fence, $3 owner, $4 how it was granted (granted_how_words), $5, $6 */
static FlStmt history_insert = {
	"INSERT INTO fencelock.history AS h "
	" (resource, fence, owner, granted_how, granted_at, expires_at) "
	"VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
	6,
	{TEXTOID, INT8OID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}};

/* $1 resource, $2 fence, $3 now, $4 new deadline */
static FlStmt history_renew = {
	"UPDATE fencelock.history AS h SET expires_at = $4 "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.fence OPERATOR(pg_catalog.=) $2",
	4,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID}};

static FlStmt history_release = {
	"UPDATE fencelock.history AS h SET ended_at = $3, ended_how = 'released' "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.fence OPERATOR(pg_catalog.=) $2",
	4,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID}};

/* $1 the resources whose lease rows purge deleted: their open grants ended by expiring. */
static FlStmt history_purged = {
	"UPDATE fencelock.history AS h SET ended_at = h.expires_at, ended_how = 'expired' "
	"WHERE h.ended_at IS NULL AND h.resource OPERATOR(pg_catalog.=) ANY ($1)",
	1,
	{TEXTARRAYOID}};

/* $1 resource, $2 the revoke's fence, $3 now: the grants it ended, and the fence it issued */
static FlStmt history_revoke = {
	"WITH ended AS (UPDATE fencelock.history AS h SET ended_at = LEAST(h.expires_at, $3), "
	"  ended_how = 'revoked' "
	"  WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.ended_at IS NULL "
	"   AND h.fence OPERATOR(pg_catalog.<) $2) "
	"INSERT INTO fencelock.history AS h (resource, fence, owner, granted_how, granted_at, "
	" expires_at, ended_at, ended_how) VALUES ($1, $2, '', 'revoked', $3, $3, $3, 'revoked') "
	"ON CONFLICT DO NOTHING",
	3,
	{TEXTOID, INT8OID, TIMESTAMPTZOID}};

/* $1 resource, $2 fence, $3 mode, $4 slot: a share's or permit's grant (store/group.c) */
static FlStmt history_mode = {
	"UPDATE fencelock.history AS h SET mode = $3, slot = $4 "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.fence OPERATOR(pg_catalog.=) $2",
	4,
	{TEXTOID, INT8OID, TEXTOID, INT4OID}};

/*
 * $1 resource, $2 fence, $3 the session's end, $4 released: the grant's history row, unless
 * another transaction has it locked.  A released grant ended then; an expired one has its
 * deadline moved there and is closed by whatever comes next, as any expired grant.
 */
static FlStmt history_session_end = {
	"UPDATE fencelock.history AS h SET "
	" expires_at = CASE WHEN $4 THEN h.expires_at ELSE LEAST(h.expires_at, $3) END, "
	" ended_at = CASE WHEN $4 THEN $3 ELSE h.ended_at END, "
	" ended_how = CASE WHEN $4 THEN 'released' ELSE h.ended_how END "
	"WHERE h.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	"  SELECT o.ctid FROM fencelock.history AS o WHERE o.resource OPERATOR(pg_catalog.=) $1 "
	"   AND o.fence OPERATOR(pg_catalog.=) $2 FOR UPDATE OF o SKIP LOCKED))",
	4,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, BOOLOID}};

/*
 * $1 oldest granted_at to keep, $2 the most rows to delete: the oldest first, by the index on
 * granted_at.  Rows another transaction is changing (a renewal of a long-held lease) are skipped,
 * not waited for; a later prune gets them.
 */
static FlStmt history_prune = {
	"DELETE FROM fencelock.history AS h WHERE h.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
	" SELECT o.ctid FROM fencelock.history AS o WHERE o.granted_at OPERATOR(pg_catalog.<) $1 "
	" ORDER BY o.granted_at LIMIT $2 FOR UPDATE SKIP LOCKED))",
	2,
	{TIMESTAMPTZOID, INT8OID}};

/*
 * Delete at most `batch` rows older than fencelock.history_retention; returns how many went.  A
 * grant prunes one batch now and then, so that no grant is slow however much history there is.
 */
static int64
history_prune_batch(TimestampTz now, int64 batch)
{
	Datum values[2];

	values[0] = TimestampTzGetDatum(now - (int64) fencelock_history_retention_s * USECS_PER_SEC);
	values[1] = Int64GetDatum(batch);
	return (int64) fl_run(&history_prune, values, NULL, false);
}

/* How a lease was granted, in history's words (FlGrantedHow). */
static const char *
granted_how_words(char how)
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
		case FL_GRANTED_JOINED:
			return "joined";
	}
	return "unknown";
}

/* The grant of FENCE just recorded is a share or a permit (MODE), in SLOT (0: none). */
static void
record_mode(text *resource, int64 fence, const char *mode, int slot)
{
	Datum values[4];
	char nulls[4] = {' ', ' ', ' ', slot > 0 ? ' ' : 'n'};

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fence);
	values[2] = CStringGetTextDatum(mode);
	values[3] = Int32GetDatum(slot);
	fl_run(&history_mode, values, nulls, false);
}

/*
 * A new grant of RESOURCE to OWNER: it ends the expired grant it took over (or that expired for
 * its owner), and is recorded, with its mode and slot for a share or permit, and, for the
 * transaction's own grant, as released where it starts.  Runs as the extension's owner in a
 * session of its own.
 */
void
fl_history_grant(text *resource, text *owner, const FlHistoryGrant *h)
{
	FlSession s;
	Datum values[6];

	fl_begin(&s);
	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(h->fence);
	values[2] = TimestampTzGetDatum(h->granted_at);
	/* A grant after an expiry ends the expired grant: taken over, or expired for its owner. */
	values[3] = CStringGetTextDatum(h->how == FL_GRANTED_TAKEOVER ? "taken over" : "expired");
	if (h->how == FL_GRANTED_TAKEOVER || h->how == FL_GRANTED_AFTER_EXPIRY)
		fl_run(&history_close, values, NULL, false);

	values[2] = PointerGetDatum(owner);
	values[3] = CStringGetTextDatum(granted_how_words(h->how));
	values[4] = TimestampTzGetDatum(h->granted_at);
	values[5] = TimestampTzGetDatum(h->expires_at);
	fl_run(&history_insert, values, NULL, false);
	if (h->mode != NULL)
		record_mode(resource, h->fence, h->mode, h->slot);
	if (h->released)
		fl_history_update(resource, h->fence, h->granted_at, h->granted_at, true);

	/*
	 * Keep the table bounded without a scheduler: one grant in 256 prunes a batch, several times
	 * as many rows as grants add in between, so the history drains however large it had grown.
	 */
	if ((pg_prng_uint32(&pg_global_prng_state) & 255) == 0)
		history_prune_batch(h->granted_at, FL_HISTORY_PRUNE_BATCH);
	fl_end(&s);
}

/* $1 resource, $2 fence, $3 now, $4 how it ended: one grant, if still open */
static FlStmt history_ended = {
	"UPDATE fencelock.history AS h SET ended_at = LEAST(h.expires_at, $3), ended_how = $4 "
	"WHERE h.resource OPERATOR(pg_catalog.=) $1 AND h.fence OPERATOR(pg_catalog.=) $2 "
	" AND h.ended_at IS NULL",
	4,
	{TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID}};

/* The grant of FENCE ended at NOW (or its deadline, when earlier), HOW ("taken over"). */
void
fl_history_ended(text *resource, int64 fence, TimestampTz now, const char *how)
{
	Datum values[4];

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fence);
	values[2] = TimestampTzGetDatum(now);
	values[3] = CStringGetTextDatum(how);
	fl_run(&history_ended, values, NULL, false);
}

void
fl_history_update(text *resource, int64 fence, TimestampTz now, TimestampTz expires, bool released)
{
	Datum values[4];

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fence);
	values[2] = TimestampTzGetDatum(now);
	values[3] = TimestampTzGetDatum(expires);
	fl_run(released ? &history_release : &history_renew, values, NULL, false);
}

/*
 * After purge deleted the lease rows of GONE (a text[], or 0 for none): close their grants, and
 * prune all old history, in batches.
 */
void
fl_history_purge(Datum gone, TimestampTz now)
{
	Datum values[1];

	values[0] = gone;
	if (gone != (Datum) 0)
		fl_run(&history_purged, values, NULL, false);
	while (history_prune_batch(now, FL_HISTORY_PURGE_BATCH) == FL_HISTORY_PURGE_BATCH)
		CHECK_FOR_INTERRUPTS();
}

/* A revoke issued FENCE for RESOURCE at NOW: it ended the open grants, and is recorded. */
void
fl_history_revoke(text *resource, int64 fence, TimestampTz now)
{
	Datum values[3];

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fence);
	values[2] = TimestampTzGetDatum(now);
	fl_run(&history_revoke, values, NULL, false);
}

/* The grant of FENCE on RESOURCE ended with its session at NOW (RELEASED, or left to expire). */
void
fl_history_session_end(Datum resource, Datum fence, TimestampTz now, bool released)
{
	Datum values[4];

	values[0] = resource;
	values[1] = fence;
	values[2] = TimestampTzGetDatum(now);
	values[3] = BoolGetDatum(released);
	fl_run(&history_session_end, values, NULL, false);
}
