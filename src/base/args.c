/*
 * base/args.c — argument checks shared by the SQL functions (the rules and their messages:
 * base/args.h).
 */
#include "postgres.h"

#include "base/args.h"
#include "common/int.h"
#include "compat.h"
#include "fencelock.h"
#include "settings.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

const FlTextArg fl_resource_arg = {
	"resource", FENCELOCK_MAX_RESOURCE_LEN, "Pass a non-empty text value.",
	"Use a shorter value; fencelock.key() builds compact resource keys."};

const FlTextArg fl_owner_arg = {"owner", FENCELOCK_MAX_OWNER_LEN, "Pass a non-empty text value.",
								"Use a shorter owner token."};

void
fl_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name, const char *hint)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("%s must not be null", name), errhint("%s", hint)));
}

/* The length rules of a text value that is not null. */
static text *
fl_check_text(text *t, const FlTextArg *arg)
{
	int len = VARSIZE_ANY_EXHDR(t);

	if (len == 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must not be empty", arg->name), errhint("%s", arg->hint)));
	if (len > arg->maxlen)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("%s is %d bytes long, longer than the limit of %d bytes", arg->name,
							   len, arg->maxlen),
						errhint("%s", arg->long_hint)));
	return t;
}

text *
fl_arg_text(FunctionCallInfo fcinfo, int argno, const FlTextArg *arg)
{
	fl_arg_not_null(fcinfo, argno, arg->name, arg->hint);
	return fl_check_text(PG_GETARG_TEXT_PP(argno), arg);
}

/* An element of a text array argument (position counted from 1), by the same rules. */
static text *
fl_check_text_element(Datum value, bool isnull, int position, const FlTextArg *arg)
{
	text *t;
	int len;

	if (isnull)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("element %d of %s is null", position, arg->name),
						errhint("%s", arg->hint)));
	t = DatumGetTextPP(value);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("element %d of %s is empty", position, arg->name),
						errhint("%s", arg->hint)));
	if (len > arg->maxlen)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("element %d of %s is %d bytes long, longer than the limit of %d bytes",
						position, arg->name, len, arg->maxlen),
				 errhint("%s", arg->long_hint)));
	return t;
}

text *
fl_arg_resource(FunctionCallInfo fcinfo, int argno)
{
	return fl_arg_text(fcinfo, argno, &fl_resource_arg);
}

text *
fl_arg_owner(FunctionCallInfo fcinfo, int argno)
{
	return fl_arg_text(fcinfo, argno, &fl_owner_arg);
}

/* A fence argument: any bigint, but not null. */
int64
fl_arg_fence(FunctionCallInfo fcinfo, int argno, const char *hint)
{
	fl_arg_not_null(fcinfo, argno, "fence", hint);
	return PG_GETARG_INT64(argno);
}

/* A number of rows: not null, positive. */
int32
fl_arg_count(FunctionCallInfo fcinfo, int argno, const char *name, const char *hint)
{
	int32 n;

	fl_arg_not_null(fcinfo, argno, name, hint);
	n = PG_GETARG_INT32(argno);
	if (n < 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must be positive, not %d", name, n), errhint("%s", hint)));
	return n;
}

/*
 * An interval in microseconds, a month counting as 30 days as in EXTRACT(EPOCH FROM interval);
 * false when it is infinite or does not fit.
 */
static bool
fl_interval_us(const Interval *iv, int64 *us)
{
	int64 days_us;
	int64 months_us;

	return FL_INTERVAL_IS_FINITE(iv) &&
		   !pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &days_us) &&
		   !pg_mul_s64_overflow((int64) iv->month, DAYS_PER_MONTH * USECS_PER_DAY, &months_us) &&
		   !pg_add_s64_overflow(iv->time, days_us, us) && !pg_add_s64_overflow(*us, months_us, us);
}

/*
 * A duration argument in microseconds: not null, finite, within int64 microseconds, and not
 * negative as a whole (a month counting as 30 days: '1 day -1 hour' is 23 hours).
 */
int64
fl_arg_interval(FunctionCallInfo fcinfo, int argno, const char *name, const char *hint)
{
	int64 us;

	fl_arg_not_null(fcinfo, argno, name, hint);
	if (!fl_interval_us(PG_GETARG_INTERVAL_P(argno), &us))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s is out of range", name), errhint("%s", hint)));
	if (us < 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("%s must not be negative", name), errhint("%s", hint)));
	return us;
}

/* A wait: a duration, capped at a century, so that now + wait never overflows. */
int64
fl_arg_wait(FunctionCallInfo fcinfo, int argno, const char *hint)
{
	return Min(fl_arg_interval(fcinfo, argno, "wait", hint), FL_MAX_WAIT_US);
}

/* A ttl in microseconds: positive and at most fencelock.max_ttl. */
int64
fl_arg_ttl(FunctionCallInfo fcinfo, int argno)
{
	Interval *iv;
	int64 us;

	fl_arg_not_null(fcinfo, argno, "ttl", "Pass a positive interval such as '30 seconds'.");
	iv = PG_GETARG_INTERVAL_P(argno);
	/* The sign of an interval too large for microseconds: from a floating-point sum. */
	if (!fl_interval_us(iv, &us))
		us = ((double) iv->time + (double) iv->day * USECS_PER_DAY +
			  (double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY) < 0
				 ? PG_INT64_MIN
				 : PG_INT64_MAX;
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl %s is not positive",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv)))),
				 errhint("Pass a positive interval such as '30 seconds'.")));
	if (us > (int64) fencelock_max_ttl_s * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl %s is longer than fencelock.max_ttl (%d s)",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv))),
						fencelock_max_ttl_s),
				 errhint("Renew a shorter lease instead, or raise fencelock.max_ttl.")));
	return us;
}

/*
 * A lease's value (acquire's, acquire_shared's, acquire_permit's value, set_value's): jsonb, or
 * NULL when it is NULL or the function, as an older version installed it, has no such argument.
 * Every value stored comes through here, before anything is granted or written: at most
 * fencelock.max_value_bytes as jsonb, uncompressed, or 54000 (issue 35: every reader of leases
 * and lease_holders fetches the values, and an ordinary role stored 16 MB per lease and share).
 */
Jsonb *
fl_arg_value(FunctionCallInfo fcinfo, int argno)
{
	Jsonb *value;
	Size size;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_JSONB_P(argno);
	size = VARSIZE(value);
	if (size > (Size) fencelock_max_value_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("lease value is longer than fencelock.max_value_bytes"),
				 errdetail("The value takes %zu bytes as jsonb, uncompressed; the limit is %d "
						   "bytes.  Nothing was granted or changed.",
						   size, fencelock_max_value_bytes),
				 errhint("Keep a small value, such as an address or a progress mark, and the rest "
						 "in a table of your own; a superuser may raise "
						 "fencelock.max_value_bytes.")));
	return value;
}

static const FlTextArg resources_arg = {
	"resources", FENCELOCK_MAX_RESOURCE_LEN, "Pass an array of non-empty resource names.",
	"Use shorter resource names; fencelock.key() builds compact resource keys."};

/* A checked list of resource names, at most FL_MAX_RESOURCES (acquire_all, release_all). */
int
fl_arg_resources(FunctionCallInfo fcinfo, int argno, text ***resources)
{
	ArrayType *arr;
	Datum *elems;
	bool *nulls;
	int n;

	fl_arg_not_null(fcinfo, argno, resources_arg.name, resources_arg.hint);
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("resources must be a one-dimensional array"),
						errhint("%s", resources_arg.hint)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("resources must not be empty"),
				 errhint("Pass at least one resource name.")));
	if (n > FL_MAX_RESOURCES)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("%d resources are more than the limit of %d", n, FL_MAX_RESOURCES),
						errhint("Take fewer leases at once, or one lease for the group.")));
	*resources = palloc(sizeof(text *) * n);
	for (int i = 0; i < n; i++)
		(*resources)[i] = fl_check_text_element(elems[i], nulls[i], i + 1, &resources_arg);
	return n;
}
