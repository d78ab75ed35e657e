/*
 * store/sessionslot.c — the registry of sessions in shared memory: one slot per PGPROC, the id of
 * the session in it, and the record of sessions that ended holding leases with a lock_delay.
 *
 * An id is the slot number in its low bits and a serial above it; the serial starts from the
 * clock at every start of the server, so an id of a session from before a restart (or from a
 * dumped cluster) matches no live session.  fl_session_alive is the one rule of liveness, which
 * the grant's statement (through fencelock.session_alive), the direct path (store/rule.c) and the
 * leases view share; lease/session.c takes a slot for a session and clears it at the session's end.
 */
#include "postgres.h"

#include "compat.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "store/sessionslot.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "store/clock.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_session_alive);

/* Slot numbers fit in the low bits of an id: MaxBackends is at most 2^18 - 1. */
#define FL_SESSION_SLOT_BITS 18
#define FL_SESSION_SLOT_MASK ((UINT64CONST(1) << FL_SESSION_SLOT_BITS) - 1)

/*
 * One slot per PGPROC, written by its own backend only, read by anyone (locking: shmem.c's
 * header).  The record of ended sessions, written by the slot's backend at exit and read by
 * grants: the ended sessions of this slot with ids from ended_first to ended_last (ids of one
 * slot grow with time) still count as alive until held_until, their lock_delay.  When a session
 * ends while the record of an earlier one is still running, the record is widened to cover both,
 * till the later of the two ends: that may hold the earlier one's leases longer, never shorter.
 */
typedef struct FlSessionSlot
{
	pg_atomic_uint64 live; /* the id of the session in this slot; 0 when none */
	slock_t mutex;
	uint64 ended_first;
	uint64 ended_last;
	TimestampTz held_until; /* 0: no record */
} FlSessionSlot;

typedef struct FlSessions
{
	pg_atomic_uint64 next_serial;
	int nslots;
	FlSessionSlot slots[FLEXIBLE_ARRAY_MEMBER];
} FlSessions;

static FlSessions *fl_sessions = NULL;

/* nslots: one per PGPROC (shmem.c) */
Size
fl_session_shmem_size(int nslots)
{
	return add_size(offsetof(FlSessions, slots), mul_size(nslots, sizeof(FlSessionSlot)));
}

/* Attach, and initialise when created; the caller holds AddinShmemInitLock.  No LWLock. */
void
fl_session_shmem_attach(int nslots)
{
	bool found;

	fl_sessions = ShmemInitStruct("fencelock sessions", fl_session_shmem_size(nslots), &found);
	if (!found)
	{
		/* Milliseconds since 2000: above every serial handed out before this start. */
		pg_atomic_init_u64(&fl_sessions->next_serial, (uint64) (GetCurrentTimestamp() / 1000) + 1);
		fl_sessions->nslots = nslots;
		for (int i = 0; i < fl_sessions->nslots; i++)
		{
			FlSessionSlot *s = &fl_sessions->slots[i];

			pg_atomic_init_u64(&s->live, 0);
			SpinLockInit(&s->mutex);
			s->ended_first = 0;
			s->ended_last = 0;
			s->held_until = 0;
		}
	}
}

/*
 * Whether the leases of the session with this id still count as its: the session is connected,
 * or it ended less than the lock_delay of its grants ago (false without preload).  The one rule
 * of liveness, for the grant's statement (through fencelock.session_alive), the direct path and
 * the leases view alike.
 */
bool
fl_session_alive(int64 id)
{
	uint64 slot = (uint64) id & FL_SESSION_SLOT_MASK;
	FlSessionSlot *s;
	bool alive;
	TimestampTz until = 0;

	if (fl_sessions == NULL || id <= 0 || slot >= (uint64) fl_sessions->nslots)
		return false;
	s = &fl_sessions->slots[slot];
	if (pg_atomic_read_u64(&s->live) == (uint64) id)
		return true;
	SpinLockAcquire(&s->mutex);
	alive = pg_atomic_read_u64(&s->live) == (uint64) id;
	if (!alive && s->held_until != 0 && (uint64) id >= s->ended_first &&
		(uint64) id <= s->ended_last)
		until = s->held_until;
	SpinLockRelease(&s->mutex);
	return alive || (until != 0 && fl_lease_clock_read() < until);
}

/* Whether the registry is in shared memory (fencelock was preloaded). */
bool
fl_session_slots_attached(void)
{
	return fl_sessions != NULL;
}

/* A new id for this backend's session, in its slot: live from now on. */
int64
fl_session_slot_take(void)
{
	uint64 serial = pg_atomic_fetch_add_u64(&fl_sessions->next_serial, 1);
	int64 id = (int64) ((serial << FL_SESSION_SLOT_BITS) | (uint64) FL_MY_PROCNO);

	pg_atomic_write_u64(&fl_sessions->slots[FL_MY_PROCNO].live, (uint64) id);
	return id;
}

/*
 * Step 2 of a session's end (lease/session.c): the slot of session ID is cleared, and when its
 * grants had a LOCK_DELAY (microseconds), a record keeps the session alive for that long.  Only
 * assignments under a spinlock: nothing can fail.
 */
void
fl_session_slot_end(int64 id, int64 lock_delay, TimestampTz now)
{
	FlSessionSlot *s = &fl_sessions->slots[(uint64) id & FL_SESSION_SLOT_MASK];

	SpinLockAcquire(&s->mutex);
	if (lock_delay > 0)
	{
		TimestampTz until = now + lock_delay;

		if (s->held_until > now)
		{
			/* An earlier session of this slot is still held: cover both. */
			s->ended_last = (uint64) id;
			s->held_until = Max(s->held_until, until);
		}
		else
		{
			s->ended_first = s->ended_last = (uint64) id;
			s->held_until = until;
		}
	}
	pg_atomic_write_u64(&s->live, 0);
	SpinLockRelease(&s->mutex);
}

/* SQL: whether the session with this id is still connected (false without preload). */
Datum
fencelock_session_alive(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!PG_ARGISNULL(0) && fl_session_alive(PG_GETARG_INT64(0)));
}
