/*
 * wait.c — acquiring with a deadline, and several resources at once.
 *
 *   acquire(resource, owner, ttl, wait)           waits up to `wait` for the lease
 *   acquire_all(resources[], owner, ttl, wait)    all or none, in one canonical order
 *   release_all(resources[], owner)               releases what the caller holds
 *
 * A waiter holds no row lock while it sleeps: each attempt runs in a subtransaction that is rolled
 * back when it fails.  With
 * shared memory (shmem.c), waiters queue per resource and only the oldest one tries, woken by a
 * release or by its own timer at the holder's deadline; without it, each waiter polls with a
 * jittered backoff capped by the holder's remaining lease.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "common/pg_prng.h"
#include "fencelock.h"
#include "shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(fencelock_acquire_wait);
PG_FUNCTION_INFO_V1(fencelock_acquire_session);
PG_FUNCTION_INFO_V1(fencelock_acquire_all);
PG_FUNCTION_INFO_V1(fencelock_release_all);

/* The longest single sleep: a safety net for wake-ups that never come (e.g. a lost signal). */
#define FL_MAX_SLEEP_MS  1000
#define FL_MAX_RESOURCES 1000

/* $1 resource, $2 owner, $3 now */
static FlStmt holds_select = {
	"SELECT true FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) $1 "
	" AND l.owner OPERATOR(pg_catalog.=) $2 AND l.expires_at OPERATOR(pg_catalog.>) $3",
	3,
	{TEXTOID, TEXTOID, TIMESTAMPTZOID}};

static bool
fl_holds(text *resource, text *owner)
{
	Datum values[3];
	FlSession session;
	bool holds;

	values[0] = PointerGetDatum(resource);
	values[1] = PointerGetDatum(owner);
	values[2] = TimestampTzGetDatum(GetCurrentTimestamp());
	fl_begin(&session);
	holds = fl_run(&holds_select, values, NULL, true) == 1;
	fl_end(&session);
	return holds;
}

static int64
fl_arg_wait(FunctionCallInfo fcinfo, int argno)
{
	int64 us;

	if (PG_ARGISNULL(argno))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("wait must not be null"),
						errhint("Pass an interval such as '5 seconds', or '0' not to wait.")));
	if (!fl_interval_us(PG_GETARG_INTERVAL_P(argno), &us))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("wait is out of range"),
						errhint("Wait at most a few hours; statement_timeout also ends a wait.")));
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("wait must not be negative"),
				 errhint("Pass an interval such as '5 seconds', or '0' not to wait.")));
	/* A deadline beyond a century is no deadline; keep now + wait far from overflowing. */
	us = Min(us, (int64) 100 * 365 * USECS_PER_DAY);
	return us;
}

/* How long the next sleep may be. */
static long
fl_sleep_ms(TimestampTz now, TimestampTz deadline, FlGrant *g, long *backoff_ms)
{
	int64 us = deadline - now;

	if (g->holder_expires > 0)
	{
		int64 until_free = g->holder_expires - now + 1000;

		us = Min(us, Max(until_free, 1000));
	}
	if (!fl_shmem_ready())
	{
		/* Polling: a jittered exponential backoff, 10 ms up to the cap. */
		int64 jitter = *backoff_ms * 500 +
					   (int64) pg_prng_uint64_range(&pg_global_prng_state, 0, *backoff_ms * 1000);

		us = Min(us, jitter);
		*backoff_ms = Min(*backoff_ms * 2, FL_MAX_SLEEP_MS);
	}
	return (long) Min((us + 999) / 1000, FL_MAX_SLEEP_MS);
}

/*
 * One attempt of a waiting acquire, in a subtransaction that is rolled back when it fails.  An
 * UPDATE that meets a row changed by a concurrent transaction locks the newest version to
 * re-check it (READ COMMITTED), and keeps that lock even when the re-check fails; a waiter must
 * not sleep holding it, or the holder's release and renew would wait for the waiter.
 */
static void
fl_attempt(text *resource, text *owner, int64 ttl, FlGrant *g)
{
	FlSubxact x;

	fl_subxact_begin(&x);
	PG_TRY();
	{
		fl_try_acquire(resource, owner, ttl, 2, true, g);
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, g->granted);
}

/*
 * Acquire, waiting until the deadline.  A newcomer queues behind waiters already there, unless
 * it already holds the lease (a retry after a lost response must not wait for itself).
 */
static void
fl_acquire_waiting(text *resource, text *owner, int64 ttl, TimestampTz deadline, FlGrant *g)
{
	uint64 key = fl_resource_key(resource);
	TimestampTz start;
	long backoff_ms = 10;

	memset(g, 0, sizeof(*g));
	if (fl_queue_length(key) == 0 || fl_holds(resource, owner))
	{
		fl_attempt(resource, owner, ttl, g);
		if (g->granted || GetCurrentTimestamp() >= deadline)
			return;
	}
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a waiting acquire needs the READ COMMITTED isolation level"),
				 errdetail("With a transaction snapshot, a release that commits while it waits "
						   "stays invisible."),
				 errhint("Wait in a READ COMMITTED transaction, or pass wait => '0'.")));

	start = GetCurrentTimestamp();
	fl_count(FL_WAITS, 1);
	fl_queue_enter(key);
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;

			/*
			 * A wake-up that arrives while we look is kept in our slot (fl_queue_woken), so the
			 * sleep below is skipped rather than the wake-up lost.  The attempt's subtransaction
			 * cancels any prepared condition-variable sleep, so we prepare only afterwards.
			 */
			fl_queue_clear_woken();
			g->holder_expires = 0;
			if (fl_queue_is_head())
			{
				fl_attempt(resource, owner, ttl, g);
				if (g->granted)
					break;
			}
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			fl_queue_prepare();
			if (!fl_queue_woken())
				fl_queue_sleep(fl_sleep_ms(now, deadline, g, &backoff_ms));
		}
	}
	PG_FINALLY();
	{
		fl_queue_leave(!g->granted);
	}
	PG_END_TRY();
	fl_count(FL_WAIT_US, (uint64) (GetCurrentTimestamp() - start));
	if (!g->granted)
		fl_count(FL_WAIT_TIMEOUTS, 1);
}

/* acquire(resource, owner, ttl, wait [, session]) */
static Datum
fl_acquire_wait_sql(FunctionCallInfo fcinfo, bool session)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	int64 wait = fl_arg_wait(fcinfo, 3);
	FlGrant g;

	/* The grants of this call bind the lease to this session (session.c), or unbind it. */
	fl_grant_session = session ? fl_session_id() : 0;
	PG_TRY();
	{
		fl_acquire_waiting(resource, owner, ttl, GetCurrentTimestamp() + wait, &g);
	}
	PG_FINALLY();
	{
		fl_grant_session = 0;
	}
	PG_END_TRY();
	if (!g.granted)
		PG_RETURN_NULL();
	PG_RETURN_INT64(g.fence);
}

Datum
fencelock_acquire_wait(PG_FUNCTION_ARGS)
{
	return fl_acquire_wait_sql(fcinfo, false);
}

Datum
fencelock_acquire_session(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(4))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("session must not be null"),
						errhint("Pass true to bind the lease to this session, false not to.")));
	return fl_acquire_wait_sql(fcinfo, PG_GETARG_BOOL(4));
}

/* A checked list of distinct resources. */
static int
fl_arg_resources(FunctionCallInfo fcinfo, int argno, text ***resources)
{
	ArrayType *arr;
	Datum *elems;
	bool *nulls;
	int n;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("resources must not be null"),
				 errhint("Pass an array of resource names.")));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("resources must be a one-dimensional array"),
						errhint("Pass an array of resource names.")));
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
	{
		text *t;

		if (nulls[i])
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							errmsg("resource %d of the array is null", i + 1),
							errhint("Pass non-empty resource names.")));
		t = DatumGetTextPP(elems[i]);
		if (VARSIZE_ANY_EXHDR(t) == 0 || VARSIZE_ANY_EXHDR(t) > FENCELOCK_MAX_RESOURCE_LEN)
			ereport(ERROR, (errcode(VARSIZE_ANY_EXHDR(t) == 0 ? ERRCODE_INVALID_PARAMETER_VALUE
															  : ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							errmsg("resource %d of the array is empty or longer than %d bytes",
								   i + 1, FENCELOCK_MAX_RESOURCE_LEN),
							errhint("Pass non-empty resource names within the limit.")));
		(*resources)[i] = t;
	}
	return n;
}

/* Byte order of resource names: the canonical order in which acquire_all takes them. */
static int
fl_cmp_text(const void *a, const void *b)
{
	text *x = **(text ***) a;
	text *y = **(text ***) b;
	int lx = VARSIZE_ANY_EXHDR(x);
	int ly = VARSIZE_ANY_EXHDR(y);
	int c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));

	return c != 0 ? c : (lx > ly) - (lx < ly);
}

Datum
fencelock_acquire_all(PG_FUNCTION_ARGS)
{
	text **resources;
	int n = fl_arg_resources(fcinfo, 0, &resources);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	TimestampTz deadline = GetCurrentTimestamp() + fl_arg_wait(fcinfo, 3);
	text ***order = palloc(sizeof(text **) * n);
	Datum *fences = palloc(sizeof(Datum) * n);
	FlSubxact x;
	bool all = true;

	for (int i = 0; i < n; i++)
		order[i] = &resources[i];
	qsort(order, n, sizeof(text **), fl_cmp_text);
	for (int i = 1; i < n; i++)
		if (fl_cmp_text(&order[i - 1], &order[i]) == 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("resource \"%s\" appears twice", text_to_cstring(*order[i])),
							errhint("Pass each resource once.")));

	/*
	 * All or none: the grants are made in a subtransaction that is rolled back when one of them
	 * cannot be had in time, so no fence of a partial grant is ever issued.
	 */
	fl_subxact_begin(&x);
	PG_TRY();
	{
		for (int i = 0; i < n && all; i++)
		{
			FlGrant g;

			fl_acquire_waiting(*order[i], owner, ttl, deadline, &g);
			all = g.granted;
			fences[order[i] - resources] = Int64GetDatum(g.fence);
		}
	}
	PG_CATCH();
	{
		/* A cancel or timeout while waiting: undo the partial grants, then report it. */
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, all);

	if (!all)
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(construct_array(fences, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

Datum
fencelock_release_all(PG_FUNCTION_ARGS)
{
	text **resources;
	int n = fl_arg_resources(fcinfo, 0, &resources);
	text *owner = fl_arg_owner(fcinfo, 1);
	int released = 0;

	for (int i = 0; i < n; i++)
		if (fl_release(resources[i], owner, 2))
			released++;
	PG_RETURN_INT32(released);
}
