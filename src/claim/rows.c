/*
 * claim/rows.c — the helpers, a worker's calls on the rows it claimed (claim/claim.h lists the
 * files):
 *
 *   SELECT fencelock.heartbeat('jobs', 42, 7, '30 s');
 *   SELECT fencelock.complete('jobs', 42, 7);
 *   SELECT fencelock.fail('jobs', 42, 7, 'timeout', '1 min');
 *   SELECT fencelock.complete_all('jobs', ARRAY[42, 43], ARRAY[7, 9]);
 *
 * Each changes a row only while it is running under exactly the fence its claim returned, and
 * finds the row by its primary key, which must be a single column.  Any other fence raises FL001
 * (wrong_fence) and changes nothing: the caller no longer holds the row, or never did.
 */
#include "postgres.h"

#include "base/args.h"
#include "base/asowner.h"
#include "catalog/pg_type.h"
#include "claim/claim.h"
#include "compat.h"
#include "fencelock.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "observe/stats.h"
#include "wait/taskqueue.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_heartbeat);
PG_FUNCTION_INFO_V1(fencelock_complete);
PG_FUNCTION_INFO_V1(fencelock_fail);
PG_FUNCTION_INFO_V1(fencelock_complete_all);

/*
 * heartbeat, complete and fail: $1 the primary key (typed as its column), $2 the fence; heartbeat
 * $3 the new deadline; fail $3 the new run_after (NULL: the policy's, or unchanged), $4 the error,
 * and the backoff policy: $5 now (NULL: no policy), $6 base and $7 cap in seconds, $8 jitter.
 */
#define ROW_MAX_NARGS 8

#define CLAIM_FENCE_HINT "Pass the fence of the row that claim returned."

/* The helpers find a row by its key: refuse a table whose primary key has several columns. */
static void
require_single_key(TaskTable *tt)
{
	if (tt->npk != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has a primary key of %d columns", tt->relname, tt->npk),
				 errhint("The helpers take a single-column key; write the UPDATE yourself, "
						 "setting the fence column to the claim's fence.")));
}

/*
 * The id argument as a value of the table's key type: assignment casts apply (an integer for a
 * bigint key), and text is read as the key type's input (a quoted literal for a uuid key).
 */
static Datum
arg_id(FunctionCallInfo fcinfo, int argno, TaskTable *tt)
{
	Oid argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	int16 typlen;
	bool typbyval;
	Node *expr;

	fl_arg_not_null(fcinfo, argno, "id", "Pass the primary key of the task's row.");
	require_single_key(tt);
	if (argtype == tt->pktype)
		return PG_GETARG_DATUM(argno);

	get_typlenbyval(argtype, &typlen, &typbyval);
	expr = (Node *) makeConst(argtype, -1, get_typcollation(argtype), typlen,
							  PG_GETARG_DATUM(argno), false, typbyval);
	expr = coerce_to_target_type(NULL, expr, argtype, tt->pktype, -1,
								 argtype == TEXTOID ? COERCION_EXPLICIT : COERCION_ASSIGNMENT,
								 COERCE_IMPLICIT_CAST, -1);
	if (expr == NULL)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("id of type %s does not match the primary key column \"%s\" of "
							   "type %s",
							   format_type_be(argtype), tt->pkname, format_type_be(tt->pktype)),
						errhint("Pass the id as a %s value.", format_type_be(tt->pktype))));
	expr = (Node *) evaluate_expr((Expr *) expr, tt->pktype, -1, InvalidOid);
	return ((Const *) expr)->constvalue;
}

/* The key as text, for messages. */
static char *
key_text(TaskTable *tt, Datum id)
{
	Oid typoutput;
	bool isvarlena;

	getTypeOutputInfo(tt->pktype, &typoutput, &isvarlena);
	return OidOutputFunctionCall(typoutput, id);
}

pg_noreturn static void wrong_fence(TaskTable *tt, Oid tableoid, Datum id, int64 fence,
									bool stored_null, int64 stored);

/*
 * A helper carried a fence other than the row's: an older one (its claim is over) or one never
 * issued for the row.  Either way the caller does not hold the row; the row is left as it is.
 */
static void
wrong_fence(TaskTable *tt, Oid tableoid, Datum id, int64 fence, bool stored_null, int64 stored)
{
	char *key = key_text(tt, id);

	fl_count_table(tableoid, true);
	if (!stored_null && fence < stored)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is older than the stored fence " INT64_FORMAT,
						fence, stored),
				 errdetail("Table \"%s\", task (%s)=(%s): the task was claimed again or declared "
						   "dead.",
						   tt->relname, tt->pkname, key),
				 errhint("This worker has lost its claim: roll back and stop; do not retry with "
						 "the same fence.")));
	if (stored_null)
		ereport(
			ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg("fence " INT64_FORMAT " was never issued for the task: it has no fence", fence),
			 errdetail("Table \"%s\", task (%s)=(%s): heartbeat, complete and fail carry "
					   "exactly the fence that claim returned.",
					   tt->relname, tt->pkname, key),
			 errhint("This worker does not hold the task: roll back and stop.")));
	ereport(
		ERROR,
		(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
		 errmsg("fence " INT64_FORMAT " was never issued for the task: its fence is " INT64_FORMAT,
				fence, stored),
		 errdetail("Table \"%s\", task (%s)=(%s): heartbeat, complete and fail carry exactly "
				   "the fence that claim returned.",
				   tt->relname, tt->pkname, key),
		 errhint("This worker does not hold the task: roll back and stop.")));
}

/*
 * heartbeat, complete and fail: update the row with key id if it is running under exactly the
 * caller's fence.  True when it was (SPI_tuptable holds what the UPDATE returned); otherwise
 * *state is the row's state (NULL without such a row), copied into the caller's memory context
 * (SPI_palloc): the caller reads it after SPI_finish, which frees everything SPI allocated.  Any
 * other fence raises FL001 and changes nothing.  The caller is connected to SPI.
 */
static bool
row_update(TaskTable *tt, TaskStmt stmt, Datum id, int64 fence, Datum *extra,
		   const char *extra_nulls, int nextra, char **state)
{
	Oid argtypes[ROW_MAX_NARGS] = {tt->pktype,     INT8OID,   TIMESTAMPTZOID, TEXTOID,
								   TIMESTAMPTZOID, FLOAT8OID, FLOAT8OID,      FLOAT8OID};
	Datum values[ROW_MAX_NARGS];
	char nulls[ROW_MAX_NARGS];
	TupleDesc rdesc;
	HeapTuple tuple;
	Oid tableoid;
	bool isnull;
	bool fence_null;
	int64 stored;
	Datum d;

	values[0] = id;
	values[1] = Int64GetDatum(fence);
	nulls[0] = nulls[1] = ' ';
	for (int i = 0; i < nextra; i++)
	{
		values[i + 2] = extra[i];
		nulls[i + 2] = extra_nulls[i];
	}
	if (fl_task_run(tt, stmt, 2 + nextra, argtypes, values, nulls) > 0)
	{
		if (stmt == STMT_FAIL)
			fl_task_check_result_column(tt, SPI_tuptable->tupdesc, 2, tt->state_type, -1);
		fl_task_check_result_relations(tt);
		return true;
	}

	/* Nothing updated: no such row, another fence, or not running. */
	*state = NULL;
	if (fl_task_run(tt, STMT_READ, 1, argtypes, values, nulls) == 0)
		return false;
	rdesc = SPI_tuptable->tupdesc;
	tuple = SPI_tuptable->vals[0];
	fl_task_check_result_column(tt, rdesc, 1, OIDOID, -1);
	fl_task_check_result_column(tt, rdesc, 2, tt->fence_type, -1);
	fl_task_check_result_column(tt, rdesc, 3, tt->state_type, -1);
	tableoid = DatumGetObjectId(SPI_getbinval(tuple, rdesc, 1, &isnull));
	fl_task_check_result_relation(tt, tableoid);
	d = SPI_getbinval(tuple, rdesc, 2, &fence_null);
	stored = fence_null ? 0 : DatumGetInt64(d);
	if (fence_null || stored != fence)
		wrong_fence(tt, tableoid, id, fence, fence_null, stored);
	d = SPI_getbinval(tuple, rdesc, 3, &isnull);
	if (!isnull)
	{
		char *s = TextDatumGetCString(d);
		size_t len = strlen(s) + 1;

		*state = memcpy(SPI_palloc(len), s, len);
	}
	return false;
}

Datum
fencelock_heartbeat(PG_FUNCTION_ARGS)
{
	TaskTable *tt = fl_task_arg_table(fcinfo, 0);
	Datum id = arg_id(fcinfo, 1, tt);
	int64 fence = fl_arg_fence(fcinfo, 2, CLAIM_FENCE_HINT);
	int64 ttl = fl_arg_ttl(fcinfo, 3);
	Datum extra[1];
	char *state;
	bool updated;

	extra[0] = TimestampTzGetDatum(GetCurrentTimestamp() + ttl);
	fl_spi_connect();
	updated = row_update(tt, STMT_HEARTBEAT, id, fence, extra, " ", 1, &state);
	fl_spi_finish();
	PG_RETURN_BOOL(updated);
}

Datum
fencelock_complete(PG_FUNCTION_ARGS)
{
	TaskTable *tt = fl_task_arg_table(fcinfo, 0);
	Datum id = arg_id(fcinfo, 1, tt);
	int64 fence = fl_arg_fence(fcinfo, 2, CLAIM_FENCE_HINT);
	char *state;
	bool updated;

	fl_spi_connect();
	updated = row_update(tt, STMT_COMPLETE, id, fence, NULL, NULL, 0, &state);
	fl_spi_finish();
	/* Already done under this very fence: a retry after a lost reply, answered the same. */
	PG_RETURN_BOOL(updated || (state != NULL && strcmp(state, "done") == 0));
}

Datum
fencelock_fail(PG_FUNCTION_ARGS)
{
	TaskTable *tt = fl_task_arg_table(fcinfo, 0);
	Datum id = arg_id(fcinfo, 1, tt);
	int64 fence = fl_arg_fence(fcinfo, 2, CLAIM_FENCE_HINT);
	Datum extra[6] = {0};
	char extra_nulls[6] = {'n', 'n', 'n', 'n', 'n', 'n'};
	Datum state = (Datum) 0;
	char *old_state;
	bool updated;
	bool ready_later; /* a backoff: claimable only after run_after */

	if (!PG_ARGISNULL(3))
	{
		if (!tt->has[COL_LAST_ERROR])
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
							errmsg("table \"%s\" has no column for the error", tt->relname),
							errhint("Add a last_error text column and run "
									"fencelock.enable_tasks again, or pass error => NULL.")));
		extra[1] = PG_GETARG_DATUM(3);
		extra_nulls[1] = ' ';
	}
	if (!PG_ARGISNULL(4))
	{
		Interval *backoff = PG_GETARG_INTERVAL_P(4);
		int64 backoff_us;

		if (!tt->has[COL_RUN_AFTER])
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("table \"%s\" has no run_after column for the backoff", tt->relname),
					 errhint("Add a run_after timestamptz column and run "
							 "fencelock.enable_tasks again, or pass backoff => NULL.")));
		backoff_us = fl_arg_interval(fcinfo, 4, "backoff", "Pass an interval such as '1 minute'.");
		extra[0] =
			DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(GetCurrentTimestamp()),
								IntervalPGetDatum(backoff));
		extra_nulls[0] = ' ';
		ready_later = backoff_us > 0;
	}
	else if (tt->map.backoff_max_s < 0)
		ready_later = false; /* no policy (0.2.0 objects): run_after stays */
	else
	{
		ready_later = tt->has[COL_RUN_AFTER] && tt->map.backoff_base_s > 0;
		/* No backoff given: the table's policy (enable_tasks' backoff_base, _max, _jitter). */
		extra[2] = TimestampTzGetDatum(GetCurrentTimestamp());
		extra[3] = Float8GetDatum(tt->map.backoff_base_s);
		extra[4] = Float8GetDatum(tt->map.backoff_max_s);
		extra[5] = Float8GetDatum(tt->map.backoff_jitter);
		memset(extra_nulls + 2, ' ', 4);
	}

	fl_spi_connect();
	updated = row_update(tt, STMT_FAIL, id, fence, extra, extra_nulls, 6, &old_state);
	if (updated)
	{
		bool isnull;

		/* The new state, copied out of SPI's memory before SPI_finish. */
		state = SPI_datumTransfer(
			SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull), false, -1);
		/* Ready again at once: its commit wakes a waiting claim. */
		if (!ready_later && strcmp(TextDatumGetCString(state), "ready") == 0)
			fl_task_wake_pending(DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
																SPI_tuptable->tupdesc, 1, &isnull)),
								 1, false);
	}
	fl_spi_finish();
	/* Not running under this fence (done, dead, ready again, or no such row): nothing changed. */
	if (!updated)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(state);
}

/* An array argument converted to an array of type elemtype (assignment casts), without nulls. */
static ArrayType *
arg_array(FunctionCallInfo fcinfo, int argno, const char *what, Oid elemtype)
{
	Oid argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Oid target = get_array_type(elemtype);
	Datum d;
	ArrayType *a;

	fl_arg_not_null(fcinfo, argno, what, "Pass an array with one element per task.");
	d = PG_GETARG_DATUM(argno);
	if (argtype != target)
	{
		Node *expr =
			(Node *) makeConst(argtype, -1, get_typcollation(argtype), -1, d, false, false);

		expr = coerce_to_target_type(NULL, expr, argtype, target, -1, COERCION_ASSIGNMENT,
									 COERCE_IMPLICIT_CAST, -1);
		if (expr == NULL || !OidIsValid(target))
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s of type %s do not match type %s", what,
								   format_type_be(argtype), format_type_be(elemtype)),
							errhint("Pass the %s as a %s array.", what, format_type_be(elemtype))));
		d = ((Const *) evaluate_expr((Expr *) expr, target, -1, InvalidOid))->constvalue;
	}
	a = DatumGetArrayTypeP(d);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be a one-dimensional array", what)));
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not contain nulls", what),
				 errhint("Pass one %s per task.", what)));
	return a;
}

static int64 complete_all_count(TaskTable *tt, ArrayType *ids, ArrayType *fences, int n,
								Oid *argtypes, Datum *values);

/*
 * complete_all(tbl, ids, fences): complete in one statement every row of ids that is running
 * under exactly the fence at the same place in fences; returns how many of the rows are done under
 * their fence now (also those that were already: a retry after a lost reply).  A row whose fence
 * is another raises FL001, and nothing is completed; rows that do not exist or are not running
 * are left as they are and not counted.
 */
Datum
fencelock_complete_all(PG_FUNCTION_ARGS)
{
	TaskTable *tt = fl_task_arg_table(fcinfo, 0);
	ArrayType *ids;
	ArrayType *fences;
	int n;
	Oid argtypes[2];
	Datum values[2];
	uint64 updated;
	int64 done;

	require_single_key(tt);
	ids = arg_array(fcinfo, 1, "ids", tt->pktype);
	fences = arg_array(fcinfo, 2, "fences", INT8OID);
	n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	if (n != ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences)))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("ids and fences differ in length (%d and %d)", n,
							   ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences))),
						errhint("Pass one fence per id, in the same order.")));
	if (n == 0)
		PG_RETURN_INT64(0);
	argtypes[0] = get_array_type(tt->pktype);
	argtypes[1] = INT8ARRAYOID;
	values[0] = PointerGetDatum(ids);
	values[1] = PointerGetDatum(fences);

	fl_spi_connect();
	updated = fl_task_run(tt, STMT_COMPLETE_ALL, 2, argtypes, values, NULL);
	if (updated > 0)
		fl_task_check_result_relations(tt);
	if (updated < (uint64) n)
		done = complete_all_count(tt, ids, fences, n, argtypes, values);
	else
		done = n;
	fl_spi_finish();
	PG_RETURN_INT64(done);
}

/*
 * After complete_all updated fewer rows than it was given: raise FL001 for a row under another
 * fence, else count the rows that are done (also those that were already: a retry).
 */
static int64
complete_all_count(TaskTable *tt, ArrayType *ids, ArrayType *fences, int n, Oid *argtypes,
				   Datum *values)
{
	int64 done = 0;
	int64 *fence_of;
	bool *seen;

	fence_of = palloc(n * sizeof(int64));
	seen = palloc0(n * sizeof(bool));
	{
		Datum *elems;
		bool *nulls;
		int nelems;

		deconstruct_array(fences, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls,
						  &nelems);
		for (int i = 0; i < n; i++)
			fence_of[i] = DatumGetInt64(elems[i]);
	}
	fl_task_run(tt, STMT_READ_ALL, 1, argtypes, values, NULL);
	{
		TupleDesc rdesc = SPI_tuptable->tupdesc;

		fl_task_check_result_column(tt, rdesc, 1, OIDOID, -1);
		fl_task_check_result_column(tt, rdesc, 2, INT8OID, -1);
		fl_task_check_result_column(tt, rdesc, 3, tt->fence_type, -1);
		fl_task_check_result_column(tt, rdesc, 4, tt->state_type, -1);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple tuple = SPI_tuptable->vals[r];
			bool isnull;
			bool fence_null;
			Oid tableoid = DatumGetObjectId(SPI_getbinval(tuple, rdesc, 1, &isnull));
			int64 i = DatumGetInt64(SPI_getbinval(tuple, rdesc, 2, &isnull)) - 1;
			Datum f = SPI_getbinval(tuple, rdesc, 3, &fence_null);
			Datum st;
			Datum id;

			fl_task_check_result_relation(tt, tableoid);
			if (i < 0 || i >= n)
				elog(ERROR, "complete_all: ordinality out of range");
			if (fence_null || DatumGetInt64(f) != fence_of[i])
			{
				bool idnull;
				int16 typlen;
				bool typbyval;
				char typalign;
				int index = (int) i + 1;

				get_typlenbyvalalign(tt->pktype, &typlen, &typbyval, &typalign);
				id = array_get_element(PointerGetDatum(ids), 1, &index, -1, typlen, typbyval,
									   typalign, &idnull);
				wrong_fence(tt, tableoid, id, fence_of[i], fence_null,
							fence_null ? 0 : DatumGetInt64(f));
			}
			st = SPI_getbinval(tuple, rdesc, 4, &isnull);
			if (!isnull && !seen[i] && strcmp(TextDatumGetCString(st), "done") == 0)
			{
				seen[i] = true;
				done++;
			}
		}
	}
	return done;
}
