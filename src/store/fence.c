/*
 * store/fence.c — a lease's fence as the writers check it: its row share-locked against grants,
 * the role of its latest grant, and the purge floor a resource's new row starts above.
 *
 * These statements on fencelock.lease and fencelock.fence_floor read what the lease rule
 * (store/rule.c) wrote, or lift a new row's fence; none of them decides who holds a lease.  They
 * run as the extension's owner (base/asowner.c), every name and operator qualified.
 */
#include "postgres.h"

#include "access/xact.h"
#include "base/asowner.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "store/fence.h"
#include "store/row.h"
#include "settings.h"
#include "utils/builtins.h"
#include "store/clock.h"
#include "utils/timestamp.h"

/*
 * $1 resource: its latest fence, the role of its latest grant, when that grant was made and
 * whether a group holds it (store/group.c), the row locked against grants (assert_fence, a
 * lease-bound write).  The casts keep the result's types whatever a superuser made of the columns;
 * the direct path reads them only where they have these types.
 */
static FlStmt fence_lock = {
	"SELECT CAST(l.fence AS pg_catalog.int8), "
	"CAST(l.holder AS pg_catalog.name), "
	"CAST(l.acquired_at AS pg_catalog.timestamptz), l.owner OPERATOR(pg_catalog.=) '' "
	"FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 FOR SHARE",
	1,
	{TEXTOID}};

/* The holder alone, without a lock (assert_fence checks it before it locks), and the group. */
static FlStmt holder_select = {"SELECT CAST(l.holder AS pg_catalog.name), "
							   "l.owner OPERATOR(pg_catalog.=) '' FROM fencelock.lease AS l "
							   "WHERE l.resource OPERATOR(pg_catalog.=) $1",
							   1,
							   {TEXTOID}};

static FlStmt floor_select = {"SELECT f.floor FROM fencelock.fence_floor AS f", 0, {InvalidOid}};

/* $1 resource, $2 fence: lifts a just-inserted row above the purge floor */
static FlStmt fence_raise = {
	"UPDATE fencelock.lease AS l SET fence = $2 WHERE l.resource OPERATOR(pg_catalog.=) $1",
	2,
	{TEXTOID, INT8OID}};

/* ---------------------------------------------------------------------------------------------
 * Fences read, and rows locked against grants
 * ---------------------------------------------------------------------------------------------
 */

/*
 * The role of RESOURCE's latest grant, or NULL; *found, whether the resource has a row; *group,
 * whether a group holds it (its holders have roles of their own).
 */
char *
fl_lease_holder(text *resource, bool *found, bool *group)
{
	Datum values[1];
	FlSession s;
	bool isnull = true;
	char *holder = NULL;

	values[0] = PointerGetDatum(resource);
	fl_begin(&s);
	*found = fl_run(&holder_select, values, NULL, true) == 1;
	*group = false;
	if (*found)
	{
		Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

		*group = !isnull && DatumGetBool(d);
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		/* In the caller's memory: SPI_finish frees the statement's. */
		if (!isnull)
			holder = strcpy(SPI_palloc(strlen(NameStr(*DatumGetName(d))) + 1),
							NameStr(*DatumGetName(d)));
	}
	fl_end(&s);
	return holder;
}

static TimestampTz locked_acquired_at = 0; /* of the row fl_lease_lock read last; 0: none */

/*
 * Share-lock RESOURCE's row against grants until the transaction ends, and read its latest fence,
 * holder and whether a group holds it: directly in READ COMMITTED where store/row.c can (a
 * transaction snapshot must see a grant committed after it as a serialization failure, which the
 * statement reports), else by the statement, which also sees all of this transaction's own changes.
 */
void
fl_lease_lock(text *resource, bool *found, int64 *fence, NameData *holder, bool *holder_null,
			  bool *group)
{
	FlSession s;
	Datum values[1];
	bool isnull = true;

	*holder_null = true;
	*group = false;
	locked_acquired_at = 0;
	if (fencelock_direct_path && !IsolationUsesXactSnapshot() &&
		fl_lease_row_lock_share(resource, found, fence, holder, holder_null, &locked_acquired_at,
								group))
		return;

	values[0] = PointerGetDatum(resource);
	fl_begin(&s);
	*found = false;
	if (fl_run(&fence_lock, values, NULL, false) == 1)
	{
		Datum d;

		*fence = fl_get_int64(0, 1, &isnull);
		*found = !isnull;
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, holder_null);
		if (!*holder_null)
			namestrcpy(holder, NameStr(*DatumGetName(d)));
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		if (!isnull)
			locked_acquired_at = DatumGetTimestampTz(d);
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull);
		*group = !isnull && DatumGetBool(d);
	}
	fl_end(&s);
}

/*
 * How long ago the latest grant of the row the latest fl_lease_lock read was made, in
 * microseconds: how late a fence it refuses comes after the grant that superseded it (-1 when
 * unknown).
 */
int64
fl_lease_locked_age(void)
{
	if (locked_acquired_at == 0)
		return -1;
	return Max(fl_lease_clock_read() - locked_acquired_at, 0);
}

/* ---------------------------------------------------------------------------------------------
 * The purge floor
 * ---------------------------------------------------------------------------------------------
 */

/*
 * A row this transaction has just inserted must still carry a fence above the purge floor.  The
 * floor is read with a snapshot taken now: the insert succeeded, so a purge that removed an
 * earlier row for this resource has committed, and with it the floor it raised.  No lock is
 * needed, and a busy resource never gets here.
 *
 * A floor at the largest bigint leaves no fence above it: the grant is refused with the error a
 * grant on a row at that fence raises (22003, as SQL_NEXT_FENCE and rule_grant do), and the
 * error rolls back the row just inserted with the transaction or subtransaction.
 */
int64
fl_lease_above_floor(Datum resource, int64 fence)
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
