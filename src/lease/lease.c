/*
 * lease/lease.c — the lease API's SQL entry points after the grant: renew, release, release_all,
 * current_fence, assert_fence, purge, set_value (the acquire family is lease/acquire.c's).
 *
 * What each does to fencelock.lease, and the rule that decides it, is store/rule.c's; here are
 * the arguments, the counts, the notifications and the errors.
 */
#include "postgres.h"

#include "base/args.h"
#include "compat.h"
#include "observe/count.h"
#include "fencelock.h"
#include "lease/lease.h"
#include "fence/bound.h"
#include "store/fence.h"
#include "store/group.h"
#include "store/rule.h"
#include "store/value.h"
#include "miscadmin.h"
#include "observe/notify.h"
#include "store/privilege.h"
#include "observe/resstats.h"
#include "lease/session.h"
#include "settings.h"
#include "observe/stats.h"
#include "store/timeline.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "store/clock.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

PG_FUNCTION_INFO_V1(fencelock_renew_0_2);
PG_FUNCTION_INFO_V1(fencelock_release_0_2);
PG_FUNCTION_INFO_V1(fencelock_purge_0_2);
PG_FUNCTION_INFO_V1(fencelock_renew);
PG_FUNCTION_INFO_V1(fencelock_release);
PG_FUNCTION_INFO_V1(fencelock_renew_grant);
PG_FUNCTION_INFO_V1(fencelock_release_grant);
PG_FUNCTION_INFO_V1(fencelock_current_fence);
PG_FUNCTION_INFO_V1(fencelock_assert_fence);
PG_FUNCTION_INFO_V1(fencelock_purge);
PG_FUNCTION_INFO_V1(fencelock_set_value);
PG_FUNCTION_INFO_V1(fencelock_release_all);

/*
 * renew and release: the lease's fence, or -1 when the caller did not hold a live lease (the
 * grant with fence *GRANT, when GRANT is not NULL), of its own or a share or permit of its group
 * (*MODE then "shared" or "permit", *SLOT the permit's slot).
 */
static int64
fl_owner_update(text *resource, text *owner, const int64 *grant, int64 ttl, bool release, FlApi api,
				const char **mode, int *slot)
{
	TimestampTz now = fl_lease_now();
	int64 fence = fl_lease_owner_change(resource, owner, grant, now, now + ttl, release, api);

	*mode = NULL;
	*slot = 0;
	/* Not the lease's owner: a share or a permit of its group, perhaps (store/group.c). */
	if (fence < 0 && api != FL_API_0_1)
	{
		fence = fl_group_owner_change(resource, owner, grant, now, now + ttl, release, slot);
		if (fence >= 0)
			*mode = *slot > 0 ? "permit" : "shared";
	}
	return fence;
}

#define FL_GRANT_HINT "Pass the fence that acquire returned for this grant."

/* renew(resource, owner, ttl [, fence]) */
static Datum
fl_renew_sql(FunctionCallInfo fcinfo, FlApi api, bool named)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 ttl = fl_arg_ttl(fcinfo, 2);
	int64 grant = named ? fl_arg_fence(fcinfo, 3, FL_GRANT_HINT) : 0;
	int64 fence;
	bool done;
	const char *mode;
	int slot;

	fl_check_resource(resource);
	fence = fl_owner_update(resource, owner, named ? &grant : NULL, ttl, false, api, &mode, &slot);
	done = fence >= 0;

	if (done)
	{
		fl_count_at_commit(FL_RENEWALS, 1);
		fl_count_resource_at_commit(resource, FL_RES_RENEW, fence, 0, fl_lease_now() + ttl, false);
	}
	else
		fl_count(FL_RENEWALS_REFUSED, 1);
	PG_RETURN_BOOL(done);
}

static bool
fl_release(text *resource, text *owner, const int64 *grant, FlApi api)
{
	const char *mode;
	int slot;
	int64 fence = fl_owner_update(resource, owner, grant, 0, true, api, &mode, &slot);
	bool done = fence >= 0;

	if (!done)
	{
		fl_count(FL_RELEASES_REFUSED, 1);
		fl_resstats_count(resource, FL_RES_RELEASE_REFUSED);
		return false;
	}
	fl_grant_released(resource, fence);
	fl_count_at_commit(FL_RELEASES, 1);
	fl_count_resource_at_commit(resource, FL_RES_RELEASE, fence, fl_lease_now(), 0, false);
	if (fencelock_notify)
		fl_notify_holder("released", resource, fence, NameStr(*fl_holder_name()), NULL, mode, slot);
	/* The next waiter may try once this transaction commits. */
	fl_queue_wake_at_commit(resource);
	return true;
}

/* release(resource, owner [, fence]) */
static Datum
fl_release_sql(FunctionCallInfo fcinfo, FlApi api, bool named)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	int64 grant = named ? fl_arg_fence(fcinfo, 2, FL_GRANT_HINT) : 0;

	fl_check_resource(resource);
	PG_RETURN_BOOL(fl_release(resource, owner, named ? &grant : NULL, api));
}

Datum
fencelock_renew(PG_FUNCTION_ARGS)
{
	return fl_renew_sql(fcinfo, FL_API_0_1, false);
}

Datum
fencelock_renew_0_2(PG_FUNCTION_ARGS)
{
	return fl_renew_sql(fcinfo, FL_API_0_2, false);
}

/* renew(resource, owner, ttl, fence), 0.4.0: only the grant with that fence */
Datum
fencelock_renew_grant(PG_FUNCTION_ARGS)
{
	return fl_renew_sql(fcinfo, FL_API_0_2, true);
}

Datum
fencelock_release(PG_FUNCTION_ARGS)
{
	return fl_release_sql(fcinfo, FL_API_0_1, false);
}

Datum
fencelock_release_0_2(PG_FUNCTION_ARGS)
{
	return fl_release_sql(fcinfo, FL_API_0_2, false);
}

/* release(resource, owner, fence), 0.4.0: only the grant with that fence */
Datum
fencelock_release_grant(PG_FUNCTION_ARGS)
{
	return fl_release_sql(fcinfo, FL_API_0_2, true);
}

/* release_all(resources[], owner): releases what the caller holds of them */
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

/*
 * Only a member of the role that took the latest grant (or a superuser) may pin a lease row with
 * assert_fence (fl_lease_holder_member).  Checked before locking, and again on the row as locked
 * (fl_locked_fence): a takeover by another role that committed in between may carry the very fence
 * the caller passes.
 */
pg_noreturn static void fl_refuse_assert(text *resource);

static void
fl_refuse_assert(text *resource)
{
	ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					errmsg("permission denied to assert the fence of resource \"%s\"",
						   text_to_cstring(resource)),
					errdetail("Only members of the role that took the lease may assert its fence."),
					errhint("Call assert_fence as the role that called acquire.")));
}

/*
 * Share-lock RESOURCE's row and read its latest fence and the role of its latest grant (*holder,
 * *holder_null when unknown) as locked.  The role is checked twice: here, from the statement's
 * snapshot, so that no other role pins the row; and by the caller, from the row as locked, since a
 * grant that committed while this waited for the lock was taken by a role of its own.  A group's
 * holders have roles of their own: the role of the holder with the fence is checked once the row
 * is locked (store/group.c), and *group tells the caller so.
 */
static bool
fl_locked_fence(text *resource, int64 *fence, NameData *holder, bool *holder_null, bool *group)
{
	bool found;
	char *seen = fl_lease_holder(resource, &found, group);

	/* No row, nothing to pin: the assertion fails on its own. */
	if (found && !*group && !fl_lease_holder_member(GetUserId(), seen))
		fl_refuse_assert(resource);
	fl_lease_lock(resource, &found, fence, holder, holder_null, group);
	return found;
}

Datum
fencelock_current_fence(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	int64 fence;

	if (!fl_lease_fence(resource, &fence))
		PG_RETURN_NULL();
	PG_RETURN_INT64(fence);
}

Datum
fencelock_assert_fence(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	int64 fence = fl_arg_fence(fcinfo, 1, "Pass the fence that acquire returned.");
	int64 current;
	bool found;
	bool group;
	NameData holder;
	NameData latest_holder;
	bool latest_null;

	fl_check_resource(resource);
	found = fl_locked_fence(resource, &current, &latest_holder, &latest_null, &group);

	if (group && fl_group_fence_holder(resource, fence, &holder))
	{
		if (!fl_lease_holder_member(GetUserId(), NameStr(holder)))
			fl_refuse_assert(resource);
		fl_note_shown_fence(resource, fence);
		PG_RETURN_VOID();
	}
	if (found && fence == current && !group)
	{
		if (!fl_lease_holder_member(GetUserId(), latest_null ? NULL : NameStr(latest_holder)))
			fl_refuse_assert(resource);
		fl_note_shown_fence(resource, fence); /* fence/bound.c: DELETE may follow */
		PG_RETURN_VOID();
	}
	fl_count(FL_STALE_REJECTED, 1);
	fl_resstats_stale(resource, found && fence < current ? fl_lease_locked_age() : -1);
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level,
				(errmsg("fence " INT64_FORMAT " for resource \"%s\" refused by assert_fence", fence,
						text_to_cstring(resource))));
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("no fence has been issued for resource \"%s\"", text_to_cstring(resource)),
				 errhint("Acquire the lease before writing under it.")));
	if (group && fence <= current)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is not held by any holder of resource \"%s\"",
						fence, text_to_cstring(resource)),
				 errdetail("The share or permit granted with this fence was released, expired "
						   "and was replaced, or never existed."),
				 errhint("This holder has lost the lease: roll back and stop.")));
	if (fence < current)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is older than the current fence " INT64_FORMAT
						" of resource \"%s\"",
						fence, current, text_to_cstring(resource)),
				 errdetail("The lease was granted again after this holder's lease."),
				 errhint("This holder has lost the lease: roll back and stop.")));
	if (fence > current)
		ereport(
			ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg("fence " INT64_FORMAT " was never issued for resource \"%s\"", fence,
					text_to_cstring(resource)),
			 errdetail("The current fence is " INT64_FORMAT ".", current),
			 errhint("Pass the fence that acquire returned, after its transaction committed.")));
	PG_RETURN_VOID();
}

static Datum
fl_purge_sql(FunctionCallInfo fcinfo, FlApi api)
{
	Interval *idle;
	TimestampTz now = fl_lease_now();
	TimestampTz cutoff;
	int64 purged;

	(void) fl_arg_interval(fcinfo, 0, "idle", "Pass an interval such as '1 day'.");
	idle = PG_GETARG_INTERVAL_P(0);
	/*
	 * Subtracted in calendar terms ('1 month' is a month back), which for an interval of mixed
	 * signs may land after now: a held lease would then be purgeable.  The cutoff never is.
	 */
	cutoff = DatumGetTimestampTz(DirectFunctionCall2(
		timestamptz_mi_interval, TimestampTzGetDatum(now), IntervalPGetDatum(idle)));
	cutoff = Min(cutoff, now);
	purged = fl_lease_purge(api, cutoff, now, fl_queue_wake_at_commit);
	if (api != FL_API_0_1)
		fl_lease_value_purge();
	PG_RETURN_INT64(purged);
}

Datum
fencelock_purge(PG_FUNCTION_ARGS)
{
	return fl_purge_sql(fcinfo, FL_API_0_1);
}

Datum
fencelock_purge_0_2(PG_FUNCTION_ARGS)
{
	return fl_purge_sql(fcinfo, FL_API_0_2);
}

/*
 * set_value(resource, owner, value), 0.4.0: the value of OWNER's live lease (NULL clears it);
 * false when OWNER does not hold a live lease on RESOURCE, or a newer grant's value is there.
 */
Datum
fencelock_set_value(PG_FUNCTION_ARGS)
{
	text *resource = fl_arg_resource(fcinfo, 0);
	text *owner = fl_arg_owner(fcinfo, 1);
	Jsonb *value = fl_arg_value(fcinfo, 2);
	int64 fence;
	bool permit;
	int slot;

	fl_check_resource(resource);
	if (fl_lease_holds(resource, owner, &fence))
	{
		if (!fl_lease_value_set(resource, fence, value) && value != NULL)
			PG_RETURN_BOOL(false);
		if (fencelock_notify)
			fl_notify("value_set", resource, fence, NameStr(*fl_holder_name()), value);
		PG_RETURN_BOOL(true);
	}
	/* A share's or permit's value is its holder's own (store/group.c). */
	if (!fl_group_value_set(resource, owner, value, &fence, &permit, &slot))
		PG_RETURN_BOOL(false);
	if (fencelock_notify)
		fl_notify_holder("value_set", resource, fence, NameStr(*fl_holder_name()), value,
						 permit ? "permit" : "shared", slot);
	PG_RETURN_BOOL(true);
}
