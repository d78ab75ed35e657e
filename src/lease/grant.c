/*
 * lease/grant.c — one attempt at a grant, and the grant's side effects, called from one place.
 *
 * fl_try_acquire asks the rule (store/rule.c for the lease alone, store/group.c for a share or a
 * permit) to decide and write; the rule records nothing else.  A kept grant's side effects are
 * then made by fl_grant_effects, in this order:
 *
 *   1. history          the grant's row in fencelock.history (fencelock.history = on)
 *   2. counts           the counters and the resource's row of resource_stats, made when the
 *                       transaction commits (observe/count.c; a rolled-back round drops them),
 *                       and the log line of a takeover
 *   3. session binding  a session-bound grant is remembered for the session's end (session.c)
 *   4. value            the lease's value (store/value.c; a share's or permit's is in its row)
 *   5. notification     NOTIFY fencelock (fencelock.notify = on)
 *   6. durability       the commit that makes the fence valid is forced to flush
 *                       (store/timeline.c); the transaction's own grant (acquire_xact), released
 *                       by its commit, instead wakes the next waiter at that commit
 *
 * Every step is transactional or waits for the commit, so the order only matters within a
 * grant: the history row precedes the value and notification that readers may match it with,
 * and durability comes last, once nothing more can fail before the commit.  Renewals and
 * releases make their own, fewer, side effects in lease/lease.c.
 */
#include "postgres.h"

#include "lease/lease.h"
#include "lease/session.h"
#include "miscadmin.h"
#include "observe/count.h"
#include "observe/history.h"
#include "observe/notify.h"
#include "observe/resstats.h"
#include "observe/stats.h"
#include "settings.h"
#include "store/group.h"
#include "store/timeline.h"
#include "store/value.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "store/clock.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

/*
 * The name of the calling role, for the holder column and notifications: a syscache lookup that
 * is made again only when the role or pg_authid changes.
 */
static Oid holder_role = InvalidOid;
static NameData holder_name;

static void
holder_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	holder_role = InvalidOid;
}

Name
fl_holder_name(void)
{
	static bool registered = false;
	Oid role = GetUserId();

	if (role != holder_role)
	{
		if (!registered)
		{
			CacheRegisterSyscacheCallback(AUTHOID, holder_invalidate, (Datum) 0);
			registered = true;
		}
		namestrcpy(&holder_name, GetUserNameFromId(role, false));
		holder_role = role;
	}
	return &holder_name;
}

static const char *
mode_word(FlMode mode)
{
	return mode == FL_MODE_PERMIT ? "permit" : mode == FL_MODE_SHARED ? "shared" : NULL;
}

/*
 * Step 2: the counts follow the transaction's outcome (observe/count.c); the per-resource
 * statistics count one lease at a time, so a share's or permit's retry, whose fence is not the
 * resource's latest, is no grant there.
 */
static void
grant_counts(text *resource, const FlGrant *g)
{
	bool takeover = g->is_new && g->how == FL_GRANTED_TAKEOVER;

	if (g->xact)
	{
		fl_count_at_commit(FL_RELEASES, 1);
		fl_count_resource_at_commit(resource, FL_RES_RELEASE, g->fence, g->granted_at, 0, false);
	}
	fl_count_at_commit(g->is_new ? FL_GRANTS : FL_REACQUIRES, 1);
	if (g->is_new && g->mode != FL_MODE_EXCLUSIVE)
		fl_count_at_commit(g->mode == FL_MODE_SHARED ? FL_SHARED_GRANTS : FL_PERMIT_GRANTS, 1);
	if (g->is_new || g->mode == FL_MODE_EXCLUSIVE)
		fl_count_resource_at_commit(resource, FL_RES_GRANT, g->fence, g->granted_at, g->expires_at,
									takeover);
	if (takeover)
	{
		fl_count_at_commit(FL_TAKEOVERS, 1);
		if (fencelock_log_level >= 0)
			ereport(fencelock_log_level,
					(errmsg("lease on resource \"%s\" taken over with fence " INT64_FORMAT
							" after the previous holder's lease expired",
							text_to_cstring(resource), g->fence)));
	}
}

/* A kept grant's side effects, in the order of the header comment. */
static void
fl_grant_effects(text *resource, text *owner, const FlRequest *req, Name holder, FlGrant *g)
{
	const char *mode = mode_word(g->mode);

	g->xact = req->xact;
	if (g->is_new && req->api != FL_API_0_1 && fencelock_history)
	{
		FlHistoryGrant h = {.fence = g->fence,
							.how = g->how,
							.granted_at = g->granted_at,
							.expires_at = g->expires_at,
							.mode = mode,
							.slot = g->slot,
							.released = req->xact};

		fl_history_grant(resource, owner, &h);
	}
	grant_counts(resource, g);
	if (req->session != 0)
		fl_session_bound(resource, mode != NULL);
	/* A new grant's value replaces its predecessor's; a retry's replaces its own. */
	if (req->value != NULL && mode == NULL)
		(void) fl_lease_value_set(resource, g->fence, req->value);
	if (fencelock_notify)
	{
		if (g->is_new)
			fl_notify_holder(g->how == FL_GRANTED_TAKEOVER ? "taken_over" : "granted", resource,
							 g->fence, NameStr(*holder), req->value, mode, g->slot);
		else if (req->value != NULL)
			fl_notify_holder("value_set", resource, g->fence, NameStr(*holder), req->value, mode,
							 g->slot);
		/* The transaction's own grant (always new, never session-bound, without a value). */
		if (req->xact)
			fl_notify("released", resource, g->fence, NameStr(*holder), NULL);
	}
	if (req->xact)
	{
		/* Written released (store/rule.c): its commit frees the lease; nothing to flush. */
		fl_queue_wake_at_commit(resource);
		return;
	}
	fl_grant_durably(resource, g->fence);
}

/*
 * One attempt at the grant REQ asks for, without waiting for the lease (NOWAIT, a try-once
 * acquire: nor for another transaction's change or row lock on its row).  Fills *g; on a busy
 * resource with want_expiry, also the holder's deadline (0 when unknown).  A busy attempt is
 * counted at once; a grant's side effects follow the rule's decision (fl_grant_effects).  A
 * caller that made the attempt in a subtransaction that it rolls back undoes them all.
 */
void
fl_try_acquire(text *resource, text *owner, const FlRequest *req, bool want_expiry, bool nowait,
			   FlGrant *g)
{
	FlAttempt a = {.now = fl_lease_now(),
				   .holder = fl_holder_name(),
				   .nowait = nowait,
				   .want_expiry = want_expiry};

	if (req->mode == FL_MODE_EXCLUSIVE)
	{
		fl_lease_grant(resource, owner, req, &a, g);
		/* A group whose sessions have ended holds the lease no longer (store/group.c). */
		if (!g->granted && g->group && fl_group_end_dead(resource, a.now, nowait))
			fl_lease_grant(resource, owner, req, &a, g);
	}
	else
	{
		/* Writer preference: no new share or permit past a queued exclusive waiter. */
		a.writer_queued = fl_queue_exclusive_ahead(resource);
		fl_group_grant(resource, owner, req, &a, g);
	}
	if (!g->granted)
	{
		fl_count(FL_BUSY, 1);
		fl_resstats_count(resource, FL_RES_BUSY);
		return;
	}
	fl_grant_effects(resource, owner, req, a.holder, g);
}
