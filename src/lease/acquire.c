/*
 * lease/acquire.c — every SQL entry point of the acquire family, each turning its arguments into
 * one request (FlRequest, store/rule.h) and handing it down:
 *
 *   acquire(resource, owner, ttl)                      one try (0.1.0, 0.2.0)
 *   acquire(resource, owner, ttl, wait [, session])    waits up to `wait` (0.2.0, 0.3.0)
 *   acquire(resource, owner [, ttl] [, wait] [, session] [, value])   0.4.0: every form in one
 *   acquire_xact(resource, owner [, wait])             the lease for the rest of the transaction
 *   acquire_shared(resource, owner, ttl, wait, session, value)        a share of the lease
 *   acquire_permit(resource, owner, ttl, permits, wait, session, value)   one of its permits
 *   acquire_all(resources[], owner, ttl, wait)         all or none, in one canonical order
 *
 * A one-try request is a single attempt (lease/grant.c: fl_try_acquire); any other goes through
 * the waiting loop (lease/wait.c: fl_acquire_wait).  Either way the rule decides and writes
 * (store/), and the grant's side effects are made in one place (lease/grant.c).
 */
#include "postgres.h"

#include "base/args.h"
#include "catalog/pg_type.h"
#include "fencelock.h"
#include "lease/lease.h"
#include "lease/session.h"
#include "store/privilege.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_acquire);
PG_FUNCTION_INFO_V1(fencelock_acquire_0_2);
PG_FUNCTION_INFO_V1(fencelock_acquire_wait);
PG_FUNCTION_INFO_V1(fencelock_acquire_session);
PG_FUNCTION_INFO_V1(fencelock_acquire_0_4);
PG_FUNCTION_INFO_V1(fencelock_acquire_xact);
PG_FUNCTION_INFO_V1(fencelock_acquire_shared);
PG_FUNCTION_INFO_V1(fencelock_acquire_permit);
PG_FUNCTION_INFO_V1(fencelock_acquire_all);

#define FL_WAIT_HINT    "Pass an interval such as '5 seconds', or '0' not to wait."
#define FL_SESSION_HINT "Pass true to bind the lease to this session, false not to."

/* The fence of a granted request, or NULL. */
#define FL_RETURN_GRANT(granted, g)                                                                \
	do                                                                                             \
	{                                                                                              \
		if (!(granted))                                                                            \
			PG_RETURN_NULL();                                                                      \
		PG_RETURN_INT64((g).fence);                                                                \
	} while (0)

/*
 * One try: acquire(resource, owner, ttl), and 0.4.0's acquire with wait zero and no session,
 * whose sixth argument is the lease's value.  The answers, counts and rows are those of a waiting
 * acquire with wait => '0' (one round, no queue, any isolation level), without its
 * subtransaction.
 */
static Datum
fl_acquire_once_sql(FunctionCallInfo fcinfo, FlApi api)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	FlRequest req = {.api = api};
	FlGrant g;

	req.ttl = fl_arg_ttl(fcinfo, 2);
	req.value = fl_arg_value(fcinfo, 5);
	fl_check_resource(resource);
	fl_try_acquire(resource, owner, &req, false, true, &g);
	FL_RETURN_GRANT(g.granted, g);
}

/* acquire(resource, owner, ttl) as installed by 0.1.0 */
Datum
fencelock_acquire(PG_FUNCTION_ARGS)
{
	return fl_acquire_once_sql(fcinfo, FL_API_0_1);
}

Datum
fencelock_acquire_0_2(PG_FUNCTION_ARGS)
{
	return fl_acquire_once_sql(fcinfo, FL_API_0_2);
}

/* acquire(resource, owner, ttl, wait [, session] [, value]) */
static Datum
fl_acquire_wait_sql(FunctionCallInfo fcinfo, bool session)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	FlRequest req = {.api = FL_API_0_2};
	FlGrant g;

	/* One argument after the other (an initializer's order is unspecified): the first error. */
	req.ttl = fl_arg_ttl(fcinfo, 2);
	req.wait = fl_arg_wait(fcinfo, 3, FL_WAIT_HINT);
	req.value = fl_arg_value(fcinfo, 5); /* 0.4.0's acquire */

	/* A role the resource is not open to is refused before it queues (store/privilege.c). */
	fl_check_resource(resource);
	/* The grants of this call bind the lease to this session (lease/session.c), or unbind it. */
	req.session = session ? fl_session_id() : 0;
	FL_RETURN_GRANT(fl_acquire_wait(&resource, 1, owner, &req, &g), g);
}

Datum
fencelock_acquire_wait(PG_FUNCTION_ARGS)
{
	return fl_acquire_wait_sql(fcinfo, false);
}

Datum
fencelock_acquire_session(PG_FUNCTION_ARGS)
{
	fl_arg_not_null(fcinfo, 4, "session", FL_SESSION_HINT);
	return fl_acquire_wait_sql(fcinfo, PG_GETARG_BOOL(4));
}

/*
 * acquire(resource, owner [, ttl] [, wait] [, session]) as 0.4.0 installs it: one function for
 * every form, wait defaulting to '0' and session to false.  Separate overloads cannot offer
 * acquire(r, o, ttl, session => true): PostgreSQL could then not choose between a boolean and an
 * interval fourth parameter for acquire(r, o, ttl, '5 seconds').  An explicit NULL wait or
 * session is refused, as before.  With the defaults (wait zero, no session) it is the one-try
 * acquire.
 */
Datum
fencelock_acquire_0_4(PG_FUNCTION_ARGS)
{
	Interval *wait;

	fl_arg_not_null(fcinfo, 4, "session", FL_SESSION_HINT);
	if (!PG_ARGISNULL(3) && !PG_GETARG_BOOL(4))
	{
		wait = PG_GETARG_INTERVAL_P(3);
		if (wait->time == 0 && wait->day == 0 && wait->month == 0)
			return fl_acquire_once_sql(fcinfo, FL_API_0_2);
	}
	return fl_acquire_wait_sql(fcinfo, PG_GETARG_BOOL(4));
}

/*
 * acquire_xact(resource, owner [, wait]) (0.4.0): the lease for the rest of this transaction.  A
 * new fence, or NULL when another owner holds the lease (after WAIT, queued as a waiting acquire
 * is).  The grant is written released, its row locked until the transaction ends
 * (store/rule.c): the commit frees the lease, a rollback undoes the grant; nothing to release,
 * and nothing for the commit to flush, since no one holds the grant after it.  OWNER names the
 * grant in the history and the notifications, and its place in the queue.
 */
Datum
fencelock_acquire_xact(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	FlRequest req = {.api = FL_API_0_2, .xact = true};
	FlGrant g;

	req.wait = fl_arg_wait(fcinfo, 2, FL_WAIT_HINT);
	fl_check_resource(resource);
	/* One try, as acquire with wait => '0' makes it: no queue, no subtransaction. */
	if (req.wait == 0)
	{
		fl_try_acquire(resource, owner, &req, false, true, &g);
		FL_RETURN_GRANT(g.granted, g);
	}
	FL_RETURN_GRANT(fl_acquire_wait(&resource, 1, owner, &req, &g), g);
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
	FlRequest req = {.api = FL_API_0_2,
					 .mode = permits > 0 ? FL_MODE_PERMIT : FL_MODE_SHARED,
					 .permits = permits};
	bool session;
	FlGrant g;

	req.ttl = fl_arg_ttl(fcinfo, 2);
	req.wait = fl_arg_wait(fcinfo, arg, FL_WAIT_HINT);
	fl_arg_not_null(fcinfo, arg + 1, "session", FL_SESSION_HINT);
	session = PG_GETARG_BOOL(arg + 1);
	req.value = fl_arg_value(fcinfo, arg + 2);
	fl_check_resource(resource);
	req.session = session ? fl_session_id() : 0;
	FL_RETURN_GRANT(fl_acquire_wait(&resource, 1, owner, &req, &g), g);
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
	FlRequest req = {.api = FL_API_0_2};
	text ***order = palloc(sizeof(text **) * n);
	text **sorted = palloc(sizeof(text *) * n);
	FlGrant *grants = palloc(sizeof(FlGrant) * n);
	Datum *fences = palloc(sizeof(Datum) * n);

	req.ttl = fl_arg_ttl(fcinfo, 2);
	req.wait = fl_arg_wait(fcinfo, 3, FL_WAIT_HINT);
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

	/* All or none: a round that does not get every resource is rolled back (lease/wait.c). */
	if (!fl_acquire_wait(sorted, n, owner, &req, grants))
		PG_RETURN_NULL();
	for (int i = 0; i < n; i++)
		fences[order[i] - resources] = Int64GetDatum(grants[i].fence);
	PG_RETURN_ARRAYTYPE_P(construct_array(fences, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
