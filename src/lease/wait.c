/*
 * lease/wait.c — acquiring with a deadline, and several resources at once.
 *
 *   acquire(resource, owner, ttl, wait)           waits up to `wait` for the lease
 *   acquire_all(resources[], owner, ttl, wait)    all or none, in one canonical order
 *   release_all(resources[], owner)               releases what the caller holds
 *
 * Every call works in rounds: one attempt at each resource in canonical order, inside a
 * subtransaction that is rolled back unless every resource was granted, so a waiter sleeps
 * holding no grant and no row lock of its own.  With shared memory (wait/leasequeue.c), waiters
 * queue per resource and only the oldest one tries, woken by a release or by its own timer at the
 * holder's deadline; without it, each waiter polls with a jittered backoff capped by the holder's
 * remaining lease.  A sleeping waiter checks that its client is still connected.
 */
#include "postgres.h"

#include "access/xact.h"
#include "base/args.h"
#include "base/asowner.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "compat.h"
#include "fencelock.h"
#include "lease/lease.h"
#include "store/group.h"
#include "store/rule.h"
#include "miscadmin.h"
#include "store/privilege.h"
#include "observe/resstats.h"
#include "lease/session.h"
#include "settings.h"
#include "observe/stats.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

PG_FUNCTION_INFO_V1(fencelock_acquire_wait);
PG_FUNCTION_INFO_V1(fencelock_acquire_session);
PG_FUNCTION_INFO_V1(fencelock_acquire_0_4);
PG_FUNCTION_INFO_V1(fencelock_acquire_xact);
PG_FUNCTION_INFO_V1(fencelock_acquire_shared);
PG_FUNCTION_INFO_V1(fencelock_acquire_permit);
PG_FUNCTION_INFO_V1(fencelock_acquire_all);
PG_FUNCTION_INFO_V1(fencelock_release_all);

/*
 * The longest single sleep of a poller (without shared memory).  A queued waiter sleeps at most
 * fencelock.wait_recheck: a safety net for wake-ups that never come (COMMIT PREPARED of a release,
 * a lost signal), which the normal path does not need: a release wakes the head at its commit.
 */
#define FL_MAX_SLEEP_MS 1000
/* How often a sleeping waiter looks whether its client is still there. */
#define FL_CHECK_CLIENT_MS 200
#define FL_MAX_RESOURCES   1000

#define FL_WAIT_HINT "Pass an interval such as '5 seconds', or '0' not to wait."

static const FlTextArg resources_arg = {
	"resources", FENCELOCK_MAX_RESOURCE_LEN, "Pass an array of non-empty resource names.",
	"Use shorter resource names; fencelock.key() builds compact resource keys."};

/* How long until the next attempt, unless a wake-up comes first. */
static long
fl_sleep_ms(TimestampTz now, TimestampTz deadline, TimestampTz holder_expires, long *backoff_ms)
{
	int64 us = deadline - now;

	if (holder_expires > 0)
	{
		/* Rounded up to whole ms below: the attempt comes at the deadline, never before it. */
		int64 until_free = holder_expires - now;

		us = Min(us, Max(until_free, 1000));
	}
	if (!fl_queue_attached())
	{
		/* Polling: a jittered exponential backoff, 10 ms up to the cap. */
		int64 jitter = *backoff_ms * 500 +
					   (int64) pg_prng_uint64_range(&pg_global_prng_state, 0, *backoff_ms * 1000);

		us = Min(us, jitter);
		*backoff_ms = Min(*backoff_ms * 2, FL_MAX_SLEEP_MS);
	}
	return (long) Min((us + 999) / 1000,
					  fl_queue_attached() ? fencelock_wait_recheck_ms : FL_MAX_SLEEP_MS);
}

/*
 * A waiter whose client has gone must not stay queued: it would be granted the lease at the next
 * release and hold it, unused, for a whole ttl.  The kernel reports the closed socket at once
 * (pq_check_connection, as client_connection_check_interval uses it); the session then ends the
 * way the server ends one whose client is lost, and leaving the queue wakes the next waiter.
 * Also the place where a pending cancel is acted on between sleeps.
 */
static void
fl_check_client(void)
{
	if (MyProcPort != NULL && whereToSendOutput == DestRemote && WaitEventSetCanReportClosed() &&
		!pq_check_connection())
	{
		ClientConnectionLost = true;
		InterruptPending = true;
	}
	CHECK_FOR_INTERRUPTS();
}

/*
 * Sleep until a wake-up or until `ms` have passed, looking at the client at least every
 * FL_CHECK_CLIENT_MS.  The wake-up flag is read after the client check: the check may consume
 * the latch a wake-up set.
 */
static void
fl_wait_turn(long ms)
{
	TimestampTz until = GetCurrentTimestamp() + (int64) ms * 1000;

	fl_queue_prepare();
	for (;;)
	{
		TimestampTz now;

		fl_check_client();
		if (fl_queue_woken())
			break;
		now = GetCurrentTimestamp();
		if (now >= until)
			break;
		fl_queue_sleep(Min((long) ((until - now + 999) / 1000), FL_CHECK_CLIENT_MS));
	}
}

/*
 * With wait > 0 a resource is fair game only when nobody is queued for it ahead of us: we are
 * the head of its queue, its queue is empty, or we already hold it (a retry after a lost
 * response must not wait for itself).
 */
static bool
fl_queued_ahead(text *resource, text *owner)
{
	int64 fence;
	bool permit;
	int slot;

	if (fl_queue_is_mine(resource) && fl_queue_is_head())
		return false;
	return fl_queue_length(resource) > 0 && !fl_lease_holds(resource, owner, NULL) &&
		   !(fl_grant_permits >= 0 && fl_group_holds(resource, owner, &fence, &permit, &slot));
}

/*
 * One round: one attempt at each resource, in canonical order, in a subtransaction kept only when
 * every resource was granted.  Otherwise the subtransaction is rolled back, so nothing of the
 * round (no grant, no row lock) survives it.  Grants are counted once kept.  Returns -1 when all
 * were granted, else the index of the first resource not had; *holder_expires is then when its
 * holder's lease runs out (0 when unknown).  VALUE (NULL: none) is set on each grant (acquire's
 * value; acquire_all has none).
 *
 * A round before DEADLINE (a waiting acquire) may wait for another transaction's row lock on a
 * lease row (a release that has not committed yet), but no longer than until the deadline (issue
 * 22): its lock waits are bounded by lock_timeout, and a wait past it makes the resource busy.  A
 * round at the deadline (wait => '0') waits for no row lock at all (fl_try_acquire's NOWAIT).
 */
static int
fl_round(text **res, int n, text *owner, int64 ttl, Jsonb *value, bool fair, TimestampTz deadline,
		 FlGrant *grants, TimestampTz *holder_expires)
{
	FlSubxact x;
	int64 left_ms = (deadline - GetCurrentTimestamp()) / 1000;
	volatile int busy = -1;
	volatile int tried = 0;

	*holder_expires = 0;
	fl_subxact_begin(&x);
	PG_TRY();
	{
		if (left_ms > 0)
			fl_subxact_lock_timeout(left_ms);
		for (int i = 0; i < n && busy < 0; i++)
		{
			memset(&grants[i], 0, sizeof(FlGrant));
			tried = i;
			if (fair && fl_queued_ahead(res[i], owner))
				busy = i;
			else
			{
				fl_try_acquire(res[i], owner, ttl, FL_API_0_2, true, left_ms <= 0, value,
							   &grants[i]);
				if (!grants[i].granted)
				{
					busy = i;
					*holder_expires = grants[i].holder_expires;
				}
			}
		}
	}
	PG_CATCH();
	{
		/* A row lock held past the deadline: busy, with nothing of the round kept. */
		if (!fl_subxact_end_if_busy(&x))
		{
			fl_subxact_end(&x, false);
			PG_RE_THROW();
		}
		fl_count(FL_BUSY, 1);
		return tried;
	}
	PG_END_TRY();
	fl_subxact_end(&x, busy < 0);
	if (busy < 0)
		for (int i = 0; i < n; i++)
			fl_count_grant(res[i], &grants[i]);
	return busy;
}

pg_noreturn static void fl_refuse_snapshot_wait(void);

static void
fl_refuse_snapshot_wait(void)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					errmsg("a waiting acquire needs the READ COMMITTED isolation level"),
					errdetail("With a transaction snapshot, a release that commits while it waits "
							  "stays invisible."),
					errhint("Wait in a READ COMMITTED transaction, or pass wait => '0'.")));
}

/*
 * Acquire every resource of res[] (in canonical order, distinct), waiting until the deadline;
 * fills grants[] and returns true, or returns false with nothing granted.
 *
 * wait = 0 (deadline not after the start) is one round, exactly like a try-once acquire: it
 * never queues, never sleeps, and so works in any isolation level; like a try-once acquire it
 * may take a resource that is free at that instant although others are queued for it.
 *
 * Otherwise a round that does not get everything is rolled back before any sleep, so the caller
 * sleeps holding no grant and no row lock of this call: another session's acquire of a resource
 * granted in a failed round does not wait for it, and no wait cycle can hide from the deadlock
 * detector.  The caller then queues (one queue at a time, per backend) for the resource that
 * stopped the round, and when its turn comes (a release, the holder's deadline, or a predecessor
 * leaving) tries the whole set again.  A newcomer queues behind waiters already there.
 */
static bool
fl_acquire_set(text **res, int n, text *owner, int64 ttl, Jsonb *value, TimestampTz deadline,
			   FlGrant *grants)
{
	TimestampTz start = GetCurrentTimestamp();
	bool once = deadline <= start;
	volatile bool granted = false;
	bool waited = false;
	text *waited_for = NULL; /* the resource of the first queue joined (observe/resstats.c) */
	bool retried = false;    /* one round straight after joining a queue, then sleep */
	long backoff_ms = 10;

	PG_TRY();
	{
		for (;;)
		{
			TimestampTz holder_expires = 0;
			TimestampTz now;
			int busy;

			/*
			 * A wake-up that arrives from here on is kept in our slot (fl_queue_woken), so the
			 * sleep below is skipped rather than the wake-up lost.  A round's subtransaction
			 * cancels any prepared condition-variable sleep, so we prepare only afterwards.
			 */
			fl_queue_clear_woken();
			if (!fl_queue_queued() || fl_queue_is_head())
			{
				/* A waiter whose client is gone must not take the lease it was woken for. */
				if (waited)
					fl_check_client();
				busy =
					fl_round(res, n, owner, ttl, value, !once, deadline, grants, &holder_expires);
				if (busy < 0)
				{
					granted = true;
					break;
				}
				if (once)
					break;
				if (!fl_queue_is_mine(res[busy]))
				{
					/* Give up the place in the old queue: its next waiter may try. */
					fl_queue_leave(false);
					/* Before the deadline: the answer must not depend on how long the try took. */
					if (IsolationUsesXactSnapshot())
						fl_refuse_snapshot_wait();
					if (GetCurrentTimestamp() >= deadline)
						break;
					/* fencelock.max_waiters queued already: NULL at once, counted per resource */
					if (!fl_resstats_queued(
							res[busy],
							fl_queue_enter(res[busy], fencelock_max_waiters, fl_grant_permits < 0)))
						break;
					if (!waited)
					{
						fl_count(FL_WAITS, 1);
						waited = true;
						waited_for = res[busy];
					}
					/*
					 * A release between the round and joining the queue woke nobody: look again
					 * (once; without shared memory nothing wakes a poller, so it just sleeps).
					 */
					if (!retried && fl_queue_attached())
					{
						retried = true;
						continue;
					}
				}
			}
			retried = false;
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			fl_wait_turn(fl_sleep_ms(now, deadline, holder_expires, &backoff_ms));
		}
	}
	PG_FINALLY();
	{
		/*
		 * Without the lease, the next waiter gets its turn now; with it, the next waiter is woken
		 * at our transaction's end, to wait for our release or deadline with its timer set.
		 */
		fl_queue_leave(granted);
	}
	PG_END_TRY();
	if (waited)
	{
		fl_count(FL_WAIT_US, (uint64) (GetCurrentTimestamp() - start));
		if (!granted)
			fl_count(FL_WAIT_TIMEOUTS, 1);
		fl_resstats_wait(waited_for, GetCurrentTimestamp() - start, granted);
	}
	return granted;
}

/* acquire(resource, owner, ttl, wait [, session]) */
static Datum
fl_acquire_wait_sql(FunctionCallInfo fcinfo, bool session)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	int64 wait = fl_arg_wait(fcinfo, 3, FL_WAIT_HINT);
	Jsonb *value = fl_arg_value(fcinfo, 5); /* 0.4.0's acquire */
	FlGrant g;

	bool granted;

	/* A role the resource is not open to is refused before it queues (store/privilege.c). */
	fl_check_resource(resource);
	/* The grants of this call bind the lease to this session (lease/session.c), or unbind it. */
	fl_grant_session = session ? fl_session_id() : 0;
	PG_TRY();
	{
		granted = fl_acquire_set(&resource, 1, owner, ttl, value, GetCurrentTimestamp() + wait, &g);
	}
	PG_FINALLY();
	{
		fl_grant_session = 0;
	}
	PG_END_TRY();
	if (!granted)
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
	fl_arg_not_null(fcinfo, 4, "session",
					"Pass true to bind the lease to this session, false not to.");
	return fl_acquire_wait_sql(fcinfo, PG_GETARG_BOOL(4));
}

/*
 * acquire(resource, owner [, ttl] [, wait] [, session]) as 0.4.0 installs it: one function for
 * every form, wait defaulting to '0' and session to false.  Separate overloads cannot offer
 * acquire(r, o, ttl, session => true): PostgreSQL could then not choose between a boolean and an
 * interval fourth parameter for acquire(r, o, ttl, '5 seconds').  An explicit NULL wait or
 * session is refused, as before.  With the defaults (wait zero, no session) it is the one-try
 * acquire, on its own path: the answers, counts and rows are those of a waiting acquire with
 * wait => '0' (one round, no queue, any isolation level), without its subtransaction.
 */
Datum
fencelock_acquire_0_4(PG_FUNCTION_ARGS)
{
	Interval *wait;

	fl_arg_not_null(fcinfo, 4, "session",
					"Pass true to bind the lease to this session, false not to.");
	if (!PG_ARGISNULL(3) && !PG_GETARG_BOOL(4))
	{
		wait = PG_GETARG_INTERVAL_P(3);
		if (wait->time == 0 && wait->day == 0 && wait->month == 0)
			return fl_acquire_sql(fcinfo, FL_API_0_2);
	}
	return fl_acquire_wait_sql(fcinfo, PG_GETARG_BOOL(4));
}

/*
 * acquire_xact(resource, owner [, wait]) (0.4.0): the lease for the rest of this transaction.  A
 * new fence, or NULL when another owner holds the lease (after WAIT, queued as a waiting acquire
 * is).  The grant is written released, its row locked until the transaction ends (store/rule.c):
 * the commit frees the lease, a rollback undoes the grant; nothing to release, and nothing for
 * the commit to flush, since no one holds the grant after it.  OWNER names the grant in the
 * history and the notifications, and its place in the queue.
 */
Datum
fencelock_acquire_xact(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 wait = fl_arg_wait(fcinfo, 2, FL_WAIT_HINT);
	FlGrant g;
	bool granted;

	fl_check_resource(resource);
	fl_grant_xact = true;
	PG_TRY();
	{
		if (wait == 0)
		{
			/* One try, as acquire with wait => '0' makes it: no queue, no subtransaction. */
			fl_try_acquire(resource, owner, 0, FL_API_0_2, false, true, NULL, &g);
			granted = g.granted;
			if (granted)
				fl_count_grant(resource, &g);
		}
		else
			granted =
				fl_acquire_set(&resource, 1, owner, 0, NULL, GetCurrentTimestamp() + wait, &g);
	}
	PG_FINALLY();
	{
		fl_grant_xact = false;
	}
	PG_END_TRY();
	if (!granted)
		PG_RETURN_NULL();
	PG_RETURN_INT64(g.fence);
}

/*
 * acquire_shared(resource, owner, ttl, wait, session, value) (PERMITS 0) and
 * acquire_permit(resource, owner, ttl, permits, wait, session, value) (0.4.0): a share of the
 * lease, or one of its PERMITS slots, waiting up to WAIT as acquire does (store/group.c).  ARG is
 * the position of wait.
 */
static Datum
fl_acquire_group_sql(FunctionCallInfo fcinfo, int permits, int arg)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	int64 wait = fl_arg_wait(fcinfo, arg, FL_WAIT_HINT);
	Jsonb *value;
	bool session;
	FlGrant g;
	bool granted;

	fl_arg_not_null(fcinfo, arg + 1, "session",
					"Pass true to bind the lease to this session, false not to.");
	session = PG_GETARG_BOOL(arg + 1);
	value = fl_arg_value(fcinfo, arg + 2);
	fl_check_resource(resource);
	fl_grant_session = session ? fl_session_id() : 0;
	fl_grant_permits = permits;
	PG_TRY();
	{
		granted = fl_acquire_set(&resource, 1, owner, ttl, value, GetCurrentTimestamp() + wait, &g);
	}
	PG_FINALLY();
	{
		fl_grant_session = 0;
		fl_grant_permits = -1;
	}
	PG_END_TRY();
	if (!granted)
		PG_RETURN_NULL();
	PG_RETURN_INT64(g.fence);
}

Datum
fencelock_acquire_shared(PG_FUNCTION_ARGS)
{
	return fl_acquire_group_sql(fcinfo, 0, 3);
}

Datum
fencelock_acquire_permit(PG_FUNCTION_ARGS)
{
	int permits;

	fl_arg_not_null(fcinfo, 3, "permits", "Pass the count of permits, 1 or more.");
	permits = PG_GETARG_INT32(3);
	if (permits < 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("permits must be 1 or more, not %d", permits),
						errhint("Pass the count of permits, 1 or more.")));
	return fl_acquire_group_sql(fcinfo, permits, 4);
}

/* A checked list of distinct resources. */
static int
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
	TimestampTz deadline = GetCurrentTimestamp() + fl_arg_wait(fcinfo, 3, FL_WAIT_HINT);
	text ***order = palloc(sizeof(text **) * n);
	text **sorted = palloc(sizeof(text *) * n);
	FlGrant *grants = palloc(sizeof(FlGrant) * n);
	Datum *fences = palloc(sizeof(Datum) * n);

	for (int i = 0; i < n; i++)
		order[i] = &resources[i];
	qsort(order, n, sizeof(text **), fl_cmp_text);
	for (int i = 1; i < n; i++)
		if (fl_cmp_text(&order[i - 1], &order[i]) == 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("resource \"%s\" appears twice", text_to_cstring(*order[i])),
							errhint("Pass each resource once.")));
	/* All or nothing: every resource's privilege first, before anything is tried or queued. */
	for (int i = 0; i < n; i++)
	{
		sorted[i] = *order[i];
		fl_check_resource(sorted[i]);
	}

	/* All or none: a round that does not get every resource is rolled back (fl_acquire_set). */
	if (!fl_acquire_set(sorted, n, owner, ttl, NULL, deadline, grants))
		PG_RETURN_NULL();
	for (int i = 0; i < n; i++)
		fences[order[i] - resources] = Int64GetDatum(grants[i].fence);
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
		fl_check_resource(resources[i]);
	for (int i = 0; i < n; i++)
		if (fl_release(resources[i], owner, NULL, FL_API_0_2))
			released++;
	PG_RETURN_INT32(released);
}
