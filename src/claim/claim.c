/*
 * claim/claim.c — claim: take ready rows of a task table (claim/claim.h lists the files).
 *
 *   SELECT * FROM fencelock.claim(NULL::jobs, worker => 'w-1', ttl => '30 s', max_rows => 10);
 *
 * claim takes ready rows (and running rows whose lease ran out) in one statement with FOR UPDATE
 * SKIP LOCKED, so concurrent workers never wait for each other and never get the same row; the
 * same UPDATE sets the lease and raises the row's fence above every fence it had before, so the
 * fence trigger refuses every later write from an earlier holder.  Rows claim cannot take (their
 * attempts used up, or a fence or attempt it cannot raise) are made dead by a second statement.
 * With wait, a claim that found nothing sleeps until a commit makes rows claimable
 * (wait/taskqueue.c).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "base/args.h"
#include "base/asowner.h"
#include "base/monotonic.h"
#include "catalog/pg_type.h"
#include "claim/claim.h"
#include "fencelock.h"
#include "funcapi.h"
#include "store/rule.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "settings.h"
#include "observe/stats.h"
#include "wait/taskqueue.h"
#include "store/timeline.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/sortsupport.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_claim);

/* $1 now, $2 worker, $3 lease deadline, $4 timeline base, $5 max rows */
static const Oid claim_argtypes[] = {TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID};
#define CLAIM_NARGS lengthof(claim_argtypes)

#define CLAIM_TASKS_HINT                                                                           \
	"Pass NULL cast to the task table's type, e.g. fencelock.claim(NULL::jobs, worker => 'w-1')."

static const FlTextArg worker_arg = {"worker", FENCELOCK_MAX_OWNER_LEN,
									 "Pass a non-empty text value that names the worker.",
									 "Use a shorter worker name."};

/*
 * Claim's result must have the columns the statement was built for, of the table's types: the
 * relation, the table's live columns, then (claim_dead's) whether the row was exhausted.
 */
static void
claim_check_result(TaskTable *tt, TupleDesc desc, TupleDesc rdesc, bool dead)
{
	int col = CLAIM_LEAD_COLS;

	fl_task_check_result_column(tt, rdesc, 1, OIDOID, -1);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped)
			fl_task_check_result_column(tt, rdesc, ++col, att->atttypid, att->atttypmod);
	}
	if (dead)
		fl_task_check_result_column(tt, rdesc, ++col, BOOLOID, -1);
	if (rdesc->natts != col)
		fl_task_check_result_column(tt, rdesc, col + 1, InvalidOid, -1);
	fl_task_check_result_relations(tt);
}

/* A row claim could not raise: a warning that names it. */
static void
claim_warn_exhausted(TaskTable *tt, HeapTuple tuple, TupleDesc rdesc)
{
	StringInfoData names;
	StringInfoData values;

	initStringInfo(&names);
	initStringInfo(&values);
	for (int i = 0; i < tt->npk; i++)
	{
		char *v = SPI_getvalue(tuple, rdesc, CLAIM_LEAD_COLS + tt->pkpos[i]);

		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(SPI_fname(rdesc, CLAIM_LEAD_COLS + tt->pkpos[i])));
		appendStringInfo(&values, "%s%s", i > 0 ? ", " : "", v != NULL ? v : "null");
	}
	ereport(WARNING,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("task (%s)=(%s) of table \"%s\" cannot be claimed: its fence or attempt is at "
					"its maximum",
					names.data, values.data, tt->relname),
			 errdetail("Its fence is %s, its attempt %s. The row was made dead, so that the other "
					   "rows stay claimable.",
					   SPI_getvalue(tuple, rdesc, CLAIM_LEAD_COLS + tt->pos_fence),
					   SPI_getvalue(tuple, rdesc, CLAIM_LEAD_COLS + tt->pos_attempt)),
			 errhint("To run it again, delete the row and insert it again with a fence above "
					 "every fence a worker may still hold and a lower attempt.")));
}

typedef struct ClaimSortArg
{
	TaskTable *tt;
	TupleDesc rdesc;
	SortSupportData *ssup;
} ClaimSortArg;

static int
claim_cmp(const void *a, const void *b, void *arg)
{
	ClaimSortArg *c = (ClaimSortArg *) arg;
	HeapTuple ta = *(const HeapTuple *) a;
	HeapTuple tb = *(const HeapTuple *) b;

	for (int i = 0; i < c->tt->nsort; i++)
	{
		bool na;
		bool nb;
		Datum da = heap_getattr(ta, c->tt->sortpos[i], c->rdesc, &na);
		Datum db = heap_getattr(tb, c->tt->sortpos[i], c->rdesc, &nb);
		int r = ApplySortComparator(da, na, db, nb, &c->ssup[i]);

		if (r != 0)
			return r;
	}
	return 0;
}

/* Put the last statement's rows into claim order (ORDER BY's: ascending, nulls last). */
static void
claim_sort(TaskTable *tt)
{
	ClaimSortArg arg;

	if (SPI_processed < 2)
		return;
	arg.tt = tt;
	arg.rdesc = SPI_tuptable->tupdesc;
	arg.ssup = palloc0(tt->nsort * sizeof(SortSupportData));
	for (int i = 0; i < tt->nsort; i++)
	{
		arg.ssup[i].ssup_cxt = CurrentMemoryContext;
		arg.ssup[i].ssup_collation = tt->sortcoll[i];
		arg.ssup[i].ssup_nulls_first = false;
		PrepareSortSupportFromOrderingOp(tt->sortop[i], &arg.ssup[i]);
	}
	qsort_arg(SPI_tuptable->vals, SPI_processed, sizeof(HeapTuple), claim_cmp, &arg);
}

/*
 * Put the rows claim took into the result, in claim order; returns how many.  Nothing is copied
 * before the result is known to be the table's rows.
 */
static int64
claim_collect(TaskTable *tt, ReturnSetInfo *rsinfo, Datum *row, bool *rownulls)
{
	TupleDesc desc = rsinfo->setDesc;
	TupleDesc rdesc = SPI_tuptable->tupdesc;

	claim_check_result(tt, desc, rdesc, false);
	claim_sort(tt);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple tuple = SPI_tuptable->vals[r];
		int col = CLAIM_LEAD_COLS;

		/* The table's live columns, in order; the row type's dropped columns are null. */
		for (int i = 0; i < desc->natts; i++)
		{
			if (TupleDescAttr(desc, i)->attisdropped)
			{
				row[i] = (Datum) 0;
				rownulls[i] = true;
				continue;
			}
			row[i] = heap_getattr(tuple, ++col, rdesc, &rownulls[i]);
		}
		tuplestore_putvalues(rsinfo->setResult, desc, row, rownulls);
	}
	return (int64) SPI_processed;
}

/* The rows claim_dead made dead: a warning for each that was exhausted; returns how many. */
static int64
claim_collect_dead(TaskTable *tt, ReturnSetInfo *rsinfo)
{
	TupleDesc rdesc = SPI_tuptable->tupdesc;

	claim_check_result(tt, rsinfo->setDesc, rdesc, true);
	claim_sort(tt);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool isnull;

		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[r], rdesc, rdesc->natts, &isnull)))
			claim_warn_exhausted(tt, SPI_tuptable->vals[r], rdesc);
	}
	return (int64) SPI_processed;
}

/*
 * One claim of up to max_rows rows into the result; the caller is connected to SPI.  Returns how
 * many rows it claimed; commits durably when it changed any row.
 */
static int64
claim_once(TaskTable *tt, ReturnSetInfo *rsinfo, text *worker, int64 ttl, int32 max_rows,
		   Datum *row, bool *rownulls, int64 *marked_out)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum values[CLAIM_NARGS];
	int64 claimed = 0;
	int64 dead = 0;
	int64 marked = 0;

	values[0] = TimestampTzGetDatum(now);
	values[1] = PointerGetDatum(worker);
	values[2] = TimestampTzGetDatum(now + ttl);
	values[3] = Int64GetDatum(fl_timeline_base());
	/*
	 * Rows claim cannot take are locked and left by the claim, taking places among max_rows:
	 * claim_dead makes them dead, then claim runs again for those places.  claim_dead runs only
	 * when a claim returned fewer rows than asked, and every round but the last makes a row dead,
	 * so this ends; usually there is a single statement.
	 */
	for (;;)
	{
		values[4] = Int64GetDatum((int64) max_rows - claimed);
		fl_task_run(tt, STMT_CLAIM, CLAIM_NARGS, claim_argtypes, values, NULL);
		claimed += claim_collect(tt, rsinfo, row, rownulls);
		if (claimed >= max_rows)
			break;
		values[4] = Int64GetDatum((int64) max_rows - claimed);
		fl_task_run(tt, STMT_CLAIM_DEAD, CLAIM_NARGS, claim_argtypes, values, NULL);
		dead = claim_collect_dead(tt, rsinfo);
		marked += dead;
		if (dead == 0)
			break;
	}

	/* As for acquire: a crash must not hand a claim's fence to a second worker. */
	if (claimed > 0 || marked > 0)
		fl_commit_durably();
	*marked_out = marked;
	return claimed;
}

/*
 * One attempt of a waiting claim, in a subtransaction rolled back when it changed nothing: a
 * claim whose UPDATE met a row being changed by another transaction may have locked the newest
 * version to re-check it, and a waiter must not sleep holding that lock.
 */
static int64
claim_attempt(Oid relid, ReturnSetInfo *rsinfo, text *worker, int64 ttl, int32 max_rows, Datum *row,
			  bool *rownulls, int64 *marked)
{
	FlSubxact x;
	int64 claimed = 0;

	*marked = 0;
	fl_subxact_begin(&x);
	PG_TRY();
	{
		TaskTable *tt = fl_task_table(relid);

		fl_spi_connect();
		claimed = claim_once(tt, rsinfo, worker, ttl, max_rows, row, rownulls, marked);
		fl_spi_finish();
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, claimed > 0 || *marked > 0);
	return claimed;
}

/*
 * claim(..., wait => ...): claim; when nothing is claimable, wait until a commit makes rows
 * claimable (wait/taskqueue.c) or the deadline passes, trying again at least every
 * fencelock.claim_recheck.  Returns, without waiting longer, once a claim changed any row (rows
 * claimed, or rows made dead, whose locks must not be held through a wait).
 */
static void
claim_waiting(Oid relid, ReturnSetInfo *rsinfo, text *worker, int64 ttl, int32 max_rows,
			  int64 wait_us, Datum *row, bool *rownulls)
{
	int64 deadline = fl_mono_us() + wait_us; /* the monotonic clock: the wall clock may step */
	TaskTable *tt = fl_task_table(relid);
	int64 marked;
	volatile int64 claimed = 0;

	if (!tt->has_wake)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no enabled wake triggers", tt->relname),
				 errdetail("A waiting claim is woken by triggers %s and %s, which enable_tasks "
						   "installs since fencelock 0.3.0.",
						   WAKE_INSERT_TRIGGER_NAME, WAKE_TRIGGER_NAME),
				 errhint("Run SELECT fencelock.enable_tasks('%s') again.",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													tt->relname))));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("a waiting claim needs the READ COMMITTED isolation level"),
						errdetail("With a transaction snapshot, rows committed while it waits stay "
								  "invisible."),
						errhint("Claim in a READ COMMITTED transaction, or leave out wait.")));

	/* Registered before the first look: a commit in between still wakes us. */
	fl_task_wait_enter(relid, max_rows);
	PG_TRY();
	{
		for (;;)
		{
			int64 now;

			claimed = claim_attempt(relid, rsinfo, worker, ttl, max_rows, row, rownulls, &marked);
			if (claimed > 0 || marked > 0)
				break;
			now = fl_mono_us();
			if (now >= deadline)
				break;
			fl_task_wait_sleep(
				(long) Min((deadline - now + 999) / 1000, (int64) fencelock_claim_recheck_ms));
		}
	}
	PG_FINALLY();
	{
		fl_task_wait_leave();
	}
	PG_END_TRY();
	/* A full batch: more rows may be there, for the next waiter (not this one: it has left). */
	if (claimed == max_rows)
		fl_task_wake_next(relid);
}

Datum
fencelock_claim(PG_FUNCTION_ARGS)
{
	Oid argtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid relid = OidIsValid(argtype) ? get_typ_typrelid(argtype) : InvalidOid;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text *worker;
	int64 ttl;
	int32 max_rows;
	TaskTable *tt;
	Datum *row;
	bool *rownulls;
	int64 marked;
	int64 wait_us = 0;
	bool waiting = false;

	if (!OidIsValid(argtype))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("fencelock.claim needs a table's row type, not a value of unknown "
							   "type"),
						errhint(CLAIM_TASKS_HINT)));
	if (!OidIsValid(relid))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("fencelock.claim needs a table's row type, not %s",
							   format_type_be(argtype)),
						errhint(CLAIM_TASKS_HINT)));
	fl_task_check_relation(relid);
	worker = fl_arg_text(fcinfo, 1, &worker_arg);
	ttl = fl_arg_ttl(fcinfo, 2);
	max_rows = fl_arg_count(fcinfo, 3, "max_rows", "Pass a positive number of rows.");

	/* wait: NULL (or the 0.2.0 signature without it) does not wait. */
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
	{
		wait_us = fl_arg_wait(
			fcinfo, 4, "Pass an interval such as '30 seconds', or leave wait out not to wait.");
		waiting = wait_us > 0;
	}

	tt = fl_task_table(relid);
	InitMaterializedSRF(fcinfo, 0);
	row = palloc(Max(rsinfo->setDesc->natts, 1) * sizeof(Datum));
	rownulls = palloc(Max(rsinfo->setDesc->natts, 1) * sizeof(bool));

	if (waiting)
	{
		claim_waiting(relid, rsinfo, worker, ttl, max_rows, wait_us, row, rownulls);
		return (Datum) 0;
	}
	fl_spi_connect();
	(void) claim_once(tt, rsinfo, worker, ttl, max_rows, row, rownulls, &marked);
	fl_spi_finish();
	return (Datum) 0;
}
