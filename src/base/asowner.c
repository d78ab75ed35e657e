/*
 * base/asowner.c — fencelock's own statements, run as the extension's owner.
 *
 * The lease table grants no privileges to anyone: the SQL functions are the only way in.  Their
 * statements therefore run as the extension's owner (the owner of fencelock.lease), which is what
 * SECURITY DEFINER would do, without a per-call GUC save and restore.  Every name in those
 * statements is schema-qualified, operators included, so the caller's search_path cannot redirect
 * them.  Each statement is prepared once per backend and kept.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "base/asowner.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "jit/jit.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#define FL_SCHEMA "fencelock"

/*
 * The extension as this backend last found it: its schema (pg_extension.extnamespace), its owner
 * (pg_extension.extowner) and its table fencelock.lease, all by OID.  The statements name
 * fencelock.lease, and a name is resolved again whenever a kept plan is rebuilt, so they are run
 * only while the schema named fencelock is the extension's own schema and belongs to the
 * extension's owner: then no role below the owner can rename it, or plant a table or a trigger
 * in it.  Checking that takes two syscache lookups; they are repeated only after an invalidation
 * of pg_class or pg_namespace that may concern these objects, and pg_extension is read (a scan:
 * it has no syscache) only when a check fails.
 */
typedef struct FlExtension
{
	bool valid;           /* the checks below held since the last relevant invalidation */
	bool found;           /* the OIDs below are set, and passed fl_ext_check */
	uint64 invalidations; /* counted by the callback: a check that saw one is not kept */
	Oid extoid;
	Oid nspid; /* pg_extension.extnamespace */
	Oid owner; /* pg_extension.extowner: the role the statements run as */
	Oid lease_relid;
	uint32 rel_hash; /* syscache hash values of the two rows, to filter invalidations */
	uint32 nsp_hash;
} FlExtension;

static FlExtension fl_ext;
static bool fl_ext_callbacks;

static void
fl_ext_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	uint32 mine = cacheid == RELOID ? fl_ext.rel_hash : fl_ext.nsp_hash;

	if (hashvalue == 0 || !fl_ext.found || hashvalue == mine)
	{
		fl_ext.valid = false;
		fl_ext.invalidations++;
	}
}

/* The extension's owner and schema, read from pg_extension. */
static void
fl_ext_lookup(void)
{
	Relation rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple tuple;
	bool found = false;

	fl_ext.found = false;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("fencelock"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_extension ext = (Form_pg_extension) GETSTRUCT(tuple);

		fl_ext.extoid = ext->oid;
		fl_ext.nspid = ext->extnamespace;
		fl_ext.owner = ext->extowner;
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!found)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("extension \"fencelock\" is not installed in this database"),
						errhint("Run CREATE EXTENSION fencelock in this database.")));
	fl_ext.lease_relid = get_relname_relid("lease", fl_ext.nspid);
	if (!OidIsValid(fl_ext.lease_relid))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("table \"lease\" of extension \"fencelock\" does not exist"),
						errhint("Drop and create the extension again.")));
	fl_ext.rel_hash = GetSysCacheHashValue1(RELOID, ObjectIdGetDatum(fl_ext.lease_relid));
	fl_ext.nsp_hash = GetSysCacheHashValue1(NAMESPACEOID, ObjectIdGetDatum(fl_ext.nspid));
}

/*
 * Whether the cached OIDs still describe the extension: its table is still called lease and lives
 * in its schema, and that schema is still called fencelock and belongs to the extension's owner.
 * Any other answer sends us back to pg_extension.
 */
static bool
fl_ext_still_holds(void)
{
	HeapTuple tuple;
	bool ok;

	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(fl_ext.lease_relid));
	if (!HeapTupleIsValid(tuple))
		return false;
	ok = ((Form_pg_class) GETSTRUCT(tuple))->relnamespace == fl_ext.nspid &&
		 strcmp(NameStr(((Form_pg_class) GETSTRUCT(tuple))->relname), "lease") == 0 &&
		 ((Form_pg_class) GETSTRUCT(tuple))->relowner == fl_ext.owner;
	ReleaseSysCache(tuple);
	if (!ok)
		return false;
	tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(fl_ext.nspid));
	if (!HeapTupleIsValid(tuple))
		return false;
	ok = strcmp(NameStr(((Form_pg_namespace) GETSTRUCT(tuple))->nspname), FL_SCHEMA) == 0 &&
		 ((Form_pg_namespace) GETSTRUCT(tuple))->nspowner == fl_ext.owner;
	ReleaseSysCache(tuple);
	return ok;
}

static Oid
fl_namespace_owner(Oid nspid)
{
	HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspid));
	Oid owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for namespace %u", nspid);
	owner = ((Form_pg_namespace) GETSTRUCT(tuple))->nspowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* A relation's owner; InvalidOid when it no longer exists. */
Oid
fl_rel_owner(Oid relid)
{
	HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid owner;

	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* Refuse to run when the schema the statements name is not the extension's own, owned by it. */
static void
fl_ext_check(void)
{
	Oid named = get_namespace_oid(FL_SCHEMA, true);
	Oid nspowner;
	char *owner_name = GetUserNameFromId(fl_ext.owner, false);

	if (named != fl_ext.nspid)
		ereport(
			ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("schema \"%s\" is not the schema of extension \"fencelock\"", FL_SCHEMA),
			 errdetail("The extension was installed in schema \"%s\".",
					   get_namespace_name(fl_ext.nspid)),
			 errhint("Rename the extension's schema back to \"%s\" as a superuser.", FL_SCHEMA)));
	nspowner = fl_namespace_owner(fl_ext.nspid);
	if (nspowner != fl_ext.owner)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema \"%s\" is owned by role \"%s\", not by role \"%s\", the owner of "
						"extension \"fencelock\"",
						FL_SCHEMA, GetUserNameFromId(nspowner, false), owner_name),
				 errdetail("The owner of the schema could rename it or create objects in it, and "
						   "fencelock runs its statements as the extension's owner."),
				 errhint("Run ALTER SCHEMA %s OWNER TO %s as a superuser.", FL_SCHEMA,
						 quote_identifier(owner_name))));
	if (get_rel_relkind(fl_ext.lease_relid) != RELKIND_RELATION ||
		getExtensionOfObject(RelationRelationId, fl_ext.lease_relid) != fl_ext.extoid ||
		fl_rel_owner(fl_ext.lease_relid) != fl_ext.owner)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table fencelock.lease is not the extension's own table owned by role "
						"\"%s\"",
						owner_name),
				 errhint("Drop and create the extension again.")));
}

/*
 * The role the statements run as: the extension's owner, once the checks above hold.  Not the
 * schema's owner as such: the schema must belong to the extension's owner, or nothing runs.
 * found is set only once fl_ext_check has passed, and valid only when no invalidation came
 * while the checks ran (issue 35): before, a failed check left found set, and the next call
 * skipped fl_ext_check's tests of the table's kind and extension membership.
 */
static Oid
fl_extension_owner(void)
{
	uint64 invalidations = fl_ext.invalidations;

	if (fl_ext.valid)
		return fl_ext.owner;
	if (!fl_ext_callbacks)
	{
		CacheRegisterSyscacheCallback(RELOID, fl_ext_invalidate, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, fl_ext_invalidate, (Datum) 0);
		fl_ext_callbacks = true;
	}
	if (!fl_ext.found || !fl_ext_still_holds())
	{
		fl_ext_lookup();
		fl_ext_check();
		fl_ext.found = true;
	}
	fl_ext.valid = fl_ext.invalidations == invalidations;
	return fl_ext.owner;
}

/*
 * The extension's lease table, after the same checks as fl_begin: for code that reads it
 * directly, without a statement (fence/bound.c).
 */
Oid
fl_lease_relid(void)
{
	(void) fl_extension_owner();
	return fl_ext.lease_relid;
}

/*
 * The extension's schema, after the same checks as fl_begin: the schema named fencelock, owned
 * by the extension's owner (claim/claim.c names the trigger functions by it).
 */
Oid
fl_extension_schema(void)
{
	(void) fl_extension_owner();
	return fl_ext.nspid;
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

/*
 * Kept plans are generic plans (planned once, not per call: the statements look rows up by their
 * key) and are built with sequential scans disabled, so that they use the key's index whatever the
 * statistics said when they were built: a plan made while fencelock.lease had one page would
 * otherwise scan the table on every call for the rest of the session, however large it grew.  A
 * plan is built, and rebuilt after an invalidation, only inside SPI_execute_plan, so the setting is
 * switched off around each execution.  It is a plain variable; the planner reads it.  So is
 * jit: where a sequential scan is the only path (a one-row table, purge), its cost is raised to
 * disable_cost, which would otherwise make the planner compile the statement on every call.  These
 * statements touch a row or two; they never gain from JIT.
 */
static SPIPlanPtr
fl_plan(FlStmt *stmt)
{
	if (stmt->plan == NULL)
		stmt->plan = fl_keep_plan(stmt->sql, stmt->nargs, stmt->argtypes, CURSOR_OPT_GENERIC_PLAN);
	return stmt->plan;
}

static uint64
fl_check(FlStmt *stmt, int rc)
{
	return fl_spi_result(stmt->sql, rc);
}

/* Prepare a statement and keep its plan for the rest of the backend. */
SPIPlanPtr
fl_keep_plan(const char *sql, int nargs, Oid *argtypes, int cursor_options)
{
	SPIPlanPtr plan = SPI_prepare_cursor(sql, nargs, argtypes, cursor_options);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}

/* The rows an execution of sql processed, after a check of its result code. */
uint64
fl_spi_result(const char *sql, int rc)
{
	if (rc < 0)
		elog(ERROR, "SPI failed for \"%s\": %s", sql, SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * Connect to SPI keeping the caller's identity: for statements on the caller's own tables
 * (claim/claim.c), which must run with the caller's privileges, not the extension owner's.
 */
void
fl_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

void
fl_spi_finish(void)
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
}

static int
fl_execute(FlStmt *stmt, Datum *values, const char *nulls, bool read_only, Snapshot snapshot)
{
	SPIPlanPtr plan = fl_plan(stmt);
	bool save_seqscan = enable_seqscan;
	bool save_jit = jit_enabled;
	int rc;

	enable_seqscan = false;
	jit_enabled = false;
	PG_TRY();
	{
		if (snapshot != InvalidSnapshot)
			rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot, true, false,
									  0);
		else
			rc = SPI_execute_plan(plan, values, nulls, read_only, 0);
	}
	PG_FINALLY();
	{
		enable_seqscan = save_seqscan;
		jit_enabled = save_jit;
	}
	PG_END_TRY();
	return rc;
}

/* Run a prepared statement; returns the number of rows processed. */
uint64
fl_run(FlStmt *stmt, Datum *values, const char *nulls, bool read_only)
{
	return fl_check(stmt, fl_execute(stmt, values, nulls, read_only, InvalidSnapshot));
}

/*
 * Run a read-only statement with a snapshot taken now, whatever the caller's isolation level:
 * for reading state that must be current (the fence floor), taken after the lock that orders it.
 */
uint64
fl_run_latest(FlStmt *stmt, Datum *values, const char *nulls)
{
	return fl_check(stmt, fl_execute(stmt, values, nulls, true, GetLatestSnapshot()));
}

/*
 * Run a statement that changes at most one row, keeping nothing when it changes none.  An UPDATE
 * (or DELETE) in READ COMMITTED that meets a row changed by a concurrent transaction locks the
 * newest version to re-check it, and keeps that lock even when the re-check fails: a call that
 * lost such a race would pin the winner's row until its own transaction ended.  So the statement
 * runs in a subtransaction, rolled back when it changed nothing.  A subtransaction that wrote
 * nothing gets no transaction ID and costs little.
 */
bool
fl_run_or_undo(FlStmt *stmt, Datum *values, const char *nulls)
{
	FlSubxact x;
	bool done = false;

	fl_subxact_begin(&x);
	PG_TRY();
	{
		done = fl_run(stmt, values, nulls, false) > 0;
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, done);
	return done;
}

/*
 * Bound the lock waits of the current internal subtransaction by MS milliseconds (at least 1; the
 * session's lock_timeout when that is shorter).  Restored when the subtransaction ends, commit or
 * not (GUC_ACTION_SAVE at its nest level).
 */
void
fl_subxact_lock_timeout(int64 ms)
{
	char value[32];
	int64 ours = Max(ms, 1);

	if (LockTimeout > 0 && LockTimeout < ours)
		return;
	snprintf(value, sizeof(value), INT64_FORMAT, Min(ours, (int64) INT_MAX));
	(void) set_config_option("lock_timeout", value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

/*
 * In the PG_CATCH of an internal subtransaction: when the error is 55P03 (a NOWAIT lock or a lock
 * wait past lock_timeout), roll the subtransaction back, forget the error and return true: the
 * caller answers "busy".  Any other error is left to the caller to roll back and re-throw.
 */
bool
fl_subxact_end_if_busy(FlSubxact *x)
{
	ErrorData *e;

	MemoryContextSwitchTo(x->cxt);
	e = CopyErrorData();
	if (e->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
	{
		FreeErrorData(e);
		return false;
	}
	FreeErrorData(e);
	FlushErrorState();
	fl_subxact_end(x, false);
	return true;
}

/*
 * fl_run_or_undo for a call that must not wait: the statement's own NOWAIT, or (TIMEOUT_MS > 0)
 * lock waits bounded by it, raise 55P03, which is caught (with the subtransaction rolled back,
 * no lock kept): *busy, and false.
 */
bool
fl_run_nowait(FlStmt *stmt, Datum *values, const char *nulls, int64 timeout_ms, bool *busy)
{
	FlSubxact x;
	bool done = false;

	*busy = false;
	fl_subxact_begin(&x);
	PG_TRY();
	{
		if (timeout_ms > 0)
			fl_subxact_lock_timeout(timeout_ms);
		done = fl_run(stmt, values, nulls, false) > 0;
	}
	PG_CATCH();
	{
		if (fl_subxact_end_if_busy(&x))
		{
			*busy = true;
			return false;
		}
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, done);
	return done;
}

/* An internal subtransaction, as PL/pgSQL runs an EXCEPTION block. */
void
fl_subxact_begin(FlSubxact *x)
{
	x->cxt = CurrentMemoryContext;
	x->owner = CurrentResourceOwner;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(x->cxt);
}

/* Commit or roll back; also the cleanup of an error caught inside it. */
void
fl_subxact_end(FlSubxact *x, bool commit)
{
	MemoryContextSwitchTo(x->cxt);
	if (commit)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(x->cxt);
	CurrentResourceOwner = x->owner;
}

/*
 * A bigint of the last result.  A superuser may have given a column of fencelock's tables another
 * type (ALTER TABLE fencelock.lease ALTER COLUMN fence TYPE numeric): its value is then refused,
 * never read as a bigint.
 */
int64
fl_get_int64(uint64 row, int col, bool *isnull)
{
	Oid type = SPI_gettypeid(SPI_tuptable->tupdesc, col);
	Datum d;

	if (type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of a fencelock statement's result is of type %s, not bigint",
						SPI_fname(SPI_tuptable->tupdesc, col), format_type_be(type)),
				 errhint("A superuser changed the type of a column of fencelock's tables; change "
						 "it back to bigint.")));
	d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
	return *isnull ? 0 : DatumGetInt64(d);
}

/*
 * The first column of the rows of a statement without parameters, run as the caller: pointers (an
 * event trigger's commands live in its own memory) or OIDs, in a list made in the caller's memory
 * context.
 */
List *
fl_first_column(SPIPlanPtr *plan, const char *sql, bool oids)
{
	MemoryContext caller = CurrentMemoryContext;
	List *result = NIL;
	uint64 n;

	fl_spi_connect();
	if (*plan == NULL)
		*plan = fl_keep_plan(sql, 0, NULL, 0);
	n = fl_spi_result(sql, SPI_execute_plan(*plan, NULL, NULL, true, 0));
	for (uint64 i = 0; i < n; i++)
	{
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext spi = MemoryContextSwitchTo(caller);

		if (!isnull)
			result = oids ? lappend_oid(result, DatumGetObjectId(d))
						  : lappend(result, DatumGetPointer(d));
		MemoryContextSwitchTo(spi);
	}
	fl_spi_finish();
	return result;
}
