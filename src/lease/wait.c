/*
 * lease/wait.c — the waiting loop: acquiring one resource or several with a deadline.  Its SQL
 * entry points (acquire with wait, acquire_xact, acquire_shared, acquire_permit, acquire_all)
 * are lease/acquire.c's; each hands its request (FlRequest) here.
 *
 * Every call works in rounds: one attempt at each resource in canonical order, inside a
 * subtransaction that is rolled back unless every resource was granted, so a waiter sleeps
 * holding no grant and no row lock of its own.  With shared memory (wait/leasequeue.c), waiters
 * queue per resource and only the oldest one tries, woken by a release or by its own timer at the
 * holder's deadline; without it, each waiter polls with a jittered backoff capped by the holder's
 * remaining lease.  A sleeping waiter checks that its client is still connected.
 *
 * Time: a wait's deadline and its sleeps are measured on the monotonic clock (base/monotonic.h),
 * so that `wait => '5 s'` waits 5 s whatever the wall clock does; a holder's deadline, read from
 * its row, is a moment of the lease clock (store/clock.c) and is compared with that clock.
 */
#include "postgres.h"

#include "access/xact.h"
#include "base/asowner.h"
#include "base/monotonic.h"
#include "common/pg_prng.h"
#include "compat.h"
#include "fencelock.h"
#include "lease/lease.h"
#include "store/group.h"
#include "miscadmin.h"
#include "observe/resstats.h"
#include "settings.h"
#include "observe/stats.h"
#include "storage/latch.h"
#include "store/clock.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

/*
 * The longest single sleep of a poller (without shared memory).  A queued waiter sleeps at most
 * fencelock.wait_recheck: a safety net for wake-ups that never come (COMMIT PREPARED of a release,
 * a lost signal), which the normal path does not need: a release wakes the head at its commit.
 */
#define FL_MAX_SLEEP_MS 1000
/* How often a sleeping waiter looks whether its client is still there. */
#define FL_CHECK_CLIENT_MS 200

/*
 * How long until the next attempt, unless a wake-up comes first: LEFT_US until the wait's
 * deadline, and the holder's deadline HOLDER_EXPIRES (on the lease clock; 0: unknown).
 */
static long
fl_sleep_ms(int64 left_us, TimestampTz holder_expires, long *backoff_ms)
{
	int64 us = left_us;

	if (holder_expires > 0)
	{
		/* Rounded up to whole ms below: the attempt comes at the deadline, never before it. */
		int64 until_free = holder_expires - fl_lease_now();

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
	int64 until = fl_mono_us() + (int64) ms * 1000;

	fl_queue_prepare();
	for (;;)
	{
		int64 now;

		fl_check_client();
		if (fl_queue_woken())
			break;
		now = fl_mono_us();
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
fl_queued_ahead(text *resource, text *owner, const FlRequest *req)
{
	int64 fence;
	bool permit;
	int slot;

	if (fl_queue_is_mine(resource) && fl_queue_is_head())
		return false;
	return fl_queue_length(resource) > 0 && !fl_lease_holds(resource, owner, NULL) &&
		   !(req->mode != FL_MODE_EXCLUSIVE &&
			 fl_group_holds(resource, owner, &fence, &permit, &slot));
}

/*
 * One round: one attempt at each resource, in canonical order, in a subtransaction kept only when
 * every resource was granted.  Otherwise the subtransaction is rolled back, so nothing of the
 * round (no grant, no row lock) survives it.  Grants are counted once kept.  Returns -1 when all
 * were granted, else the index of the first resource not had; *holder_expires is then when its
 * holder's lease runs out (0 when unknown).  Each grant makes its side effects in the round
 * (lease/grant.c), so a rolled-back round undoes them with it.
 *
 * A round before DEADLINE (a waiting acquire) may wait for another transaction's row lock on a
 * lease row (a release that has not committed yet), but no longer than until the deadline (issue
 * 22): its lock waits are bounded by lock_timeout, and a wait past it makes the resource busy.  A
 * round at the deadline (wait => '0') waits for no row lock at all (fl_try_acquire's NOWAIT).
 * DEADLINE is on the monotonic clock.
 */
static int
fl_round(text **res, int n, text *owner, const FlRequest *req, bool fair, int64 deadline,
		 FlGrant *grants, TimestampTz *holder_expires)
{
	FlSubxact x;
	int64 left_ms = (deadline - fl_mono_us()) / 1000;
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
			if (fair && fl_queued_ahead(res[i], owner, req))
				busy = i;
			else
			{
				fl_try_acquire(res[i], owner, req, true, left_ms <= 0, &grants[i]);
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
 * Acquire every resource of res[] (in canonical order, distinct) as REQ asks, waiting up to REQ's
 * wait; fills grants[] and returns true, or returns false with nothing granted.
 *
 * wait = 0 is one round, exactly like a try-once acquire: it never queues, never sleeps, and so
 * works in any isolation level; like a try-once acquire it may take a resource that is free at
 * that instant although others are queued for it.
 *
 * Otherwise a round that does not get everything is rolled back before any sleep, so the caller
 * sleeps holding no grant and no row lock of this call: another session's acquire of a resource
 * granted in a failed round does not wait for it, and no wait cycle can hide from the deadlock
 * detector.  The caller then queues (one queue at a time, per backend) for the resource that
 * stopped the round, and when its turn comes (a release, the holder's deadline, or a predecessor
 * leaving) tries the whole set again.  A newcomer queues behind waiters already there.
 */
bool
fl_acquire_wait(text **res, int n, text *owner, const FlRequest *req, FlGrant *grants)
{
	int64 start = fl_mono_us(); /* the monotonic clock: the wall clock may step meanwhile */
	int64 deadline = start + req->wait;
	bool once = req->wait <= 0;
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
			int64 now;
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
				busy = fl_round(res, n, owner, req, !once, deadline, grants, &holder_expires);
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
					if (fl_mono_us() >= deadline)
						break;
					/* fencelock.max_waiters queued already: NULL at once, counted per resource */
					if (!fl_resstats_queued(res[busy],
											fl_queue_enter(res[busy], fencelock_max_waiters,
														   req->mode == FL_MODE_EXCLUSIVE)))
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
			now = fl_mono_us();
			if (now >= deadline)
				break;
			fl_wait_turn(fl_sleep_ms(deadline - now, holder_expires, &backoff_ms));
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
		int64 waited_us = fl_mono_us() - start;

		fl_count(FL_WAIT_US, (uint64) waited_us);
		if (!granted)
			fl_count(FL_WAIT_TIMEOUTS, 1);
		fl_resstats_wait(waited_for, waited_us, granted);
	}
	return granted;
}
