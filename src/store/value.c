/*
 * store/value.c — a value on a lease: fencelock.lease_value, one row per resource (the leader's
 * address, a job's progress), stamped with the fence of the grant it belongs to.
 *
 * The value is kept beside the lease row rather than in it, so that the lease rule, its two forms
 * and the exclusive path's row stay as they are: an acquire without a value never touches this
 * table.  It fences itself: a value replaces only a value of the same or an older fence, so a
 * holder that paused past its lease cannot overwrite its successor's value, whichever commits
 * last.  fencelock.leases shows a value while the lease with its fence is held; a release, an
 * expiry, a session's end, a revoke and every new grant hide it, and purge deletes it then.
 *
 * The statements run as the extension's owner (base/asowner.c), every name and operator qualified.
 */
#include "postgres.h"

#include "base/asowner.h"
#include "catalog/pg_type.h"
#include "store/value.h"
#include "utils/lsyscache.h"
#include "store/clock.h"
#include "utils/timestamp.h"

/* $1 resource, $2 the grant's fence, $3 value, $4 now: only over a value of that fence or older */
static FlStmt value_upsert = {
	"INSERT INTO fencelock.lease_value AS v (resource, fence, value, set_at) "
	"VALUES ($1, $2, $3, $4) ON CONFLICT (resource) DO UPDATE "
	" SET fence = excluded.fence, value = excluded.value, set_at = excluded.set_at "
	" WHERE v.fence OPERATOR(pg_catalog.<=) excluded.fence",
	4,
	{TEXTOID, INT8OID, JSONBOID, TIMESTAMPTZOID}};

/* $1 resource, $2 the grant's fence: a value cleared, of that fence or older */
static FlStmt value_delete = {"DELETE FROM fencelock.lease_value AS v "
							  "WHERE v.resource OPERATOR(pg_catalog.=) $1 "
							  " AND v.fence OPERATOR(pg_catalog.<=) $2",
							  2,
							  {TEXTOID, INT8OID}};

/*
 * The values no lease shows any more: their lease row has a newer fence, was released at the
 * value's fence, or is gone (purge deletes lease rows first, in the same transaction).  A value
 * newer than the lease row this statement sees belongs to a grant in progress and stays; so does
 * one that a concurrent grant replaces, re-checked on its new version, whose fence is newer.
 */
static FlStmt value_purge = {
	"DELETE FROM fencelock.lease_value AS v WHERE NOT EXISTS ("
	" SELECT FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) v.resource "
	"  AND (l.fence OPERATOR(pg_catalog.<) v.fence "
	"   OR (l.fence OPERATOR(pg_catalog.=) v.fence AND l.owner IS NOT NULL)))",
	0,
	{InvalidOid}};

/*
 * Set (VALUE NULL: clear) the value of RESOURCE's grant with fence FENCE, unless a newer grant's
 * value is there; false when it was not changed.
 */
bool
fl_lease_value_set(text *resource, int64 fence, Jsonb *value)
{
	Datum values[4];
	FlSession s;
	bool done;

	values[0] = PointerGetDatum(resource);
	values[1] = Int64GetDatum(fence);
	values[2] = PointerGetDatum(value);
	values[3] = TimestampTzGetDatum(fl_lease_now());
	fl_begin(&s);
	/* An upsert refused keeps no lock on the newer holder's row (fl_run_or_undo). */
	done = fl_run_or_undo(value != NULL ? &value_upsert : &value_delete, values, NULL);
	fl_end(&s);
	return done;
}

/* Delete the values no lease shows; nothing before 0.4.0's update made the table. */
void
fl_lease_value_purge(void)
{
	FlSession s;

	if (!OidIsValid(get_relname_relid("lease_value", fl_extension_schema())))
		return;
	fl_begin(&s);
	fl_run(&value_purge, NULL, NULL, false);
	fl_end(&s);
}
