/*
 * exec.c — running fencelock's own statements.
 *
 * The lease table grants no privileges to anyone: the SQL functions are the only way in.  Their
 * statements therefore run as the extension's owner (the owner of fencelock.lease), which is what
 * SECURITY DEFINER would do, without a per-call GUC save and restore.  Every name in those
 * statements is schema-qualified, operators included, so the caller's search_path cannot redirect
 * them.  Each statement is prepared once per backend and kept.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#define FL_SCHEMA "fencelock"

/*
 * The role the statements run as: the owner of fencelock.lease, i.e. the role that created the
 * extension.  Not the schema's owner, which could be another role that created the schema first.
 */
static Oid
fl_extension_owner(void)
{
	Oid nspid = get_namespace_oid(FL_SCHEMA, false);
	Oid relid = get_relname_relid("lease", nspid);
	HeapTuple tuple;
	Oid owner;

	if (!OidIsValid(relid))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("table fencelock.lease does not exist"),
						errhint("Run CREATE EXTENSION fencelock in this database.")));
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* Connect to SPI and act as the extension's owner until fl_end. */
void
fl_begin(FlSession *session)
{
	Oid owner = fl_extension_owner();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	GetUserIdAndSecContext(&session->save_userid, &session->save_sec_context);
	SetUserIdAndSecContext(owner, session->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/*
 * Back to the caller's identity.  On error this is never reached; transaction (or
 * subtransaction) abort restores the identity saved at its start, as for SECURITY DEFINER.
 */
void
fl_end(FlSession *session)
{
	SetUserIdAndSecContext(session->save_userid, session->save_sec_context);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

static SPIPlanPtr
fl_plan(FlStmt *stmt)
{
	if (stmt->plan == NULL)
	{
		SPIPlanPtr plan = SPI_prepare(stmt->sql, stmt->nargs, stmt->argtypes);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s", stmt->sql,
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		stmt->plan = plan;
	}
	return stmt->plan;
}

static uint64
fl_check(FlStmt *stmt, int rc)
{
	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed for \"%s\": %s", stmt->sql,
			 SPI_result_code_string(rc));
	return SPI_processed;
}

/* Run a prepared statement; returns the number of rows processed. */
uint64
fl_run(FlStmt *stmt, Datum *values, const char *nulls, bool read_only)
{
	return fl_check(stmt, SPI_execute_plan(fl_plan(stmt), values, nulls, read_only, 0));
}

/*
 * Run a read-only statement with a snapshot taken now, whatever the caller's isolation level:
 * for reading state that must be current (the fence floor), taken after the lock that orders it.
 */
uint64
fl_run_latest(FlStmt *stmt, Datum *values, const char *nulls)
{
	SPIPlanPtr plan = fl_plan(stmt);

	return fl_check(stmt, SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
											   InvalidSnapshot, true, false, 0));
}

int64
fl_get_int64(uint64 row, int col, bool *isnull)
{
	Datum d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);

	return *isnull ? 0 : DatumGetInt64(d);
}
