/*
 * store/rule.h — fencelock.lease and fencelock.fence_floor: the lease rule and the statements that
 * apply it (store/rule.c); the fence reads, row locks and the purge floor are store/fence.h's.  The
 * callers run no SQL of their own on these tables.
 */
#ifndef FENCELOCK_LEASETABLE_H
#define FENCELOCK_LEASETABLE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fencelock.h"
#include "utils/jsonb.h"

/* What a grant gives: the lease alone, a share of it, or one of its permits (store/group.c). */
typedef enum FlMode
{
	FL_MODE_EXCLUSIVE = 0,
	FL_MODE_SHARED,
	FL_MODE_PERMIT
} FlMode;

/*
 * One request, as the SQL entry point (lease/acquire.c) made it from its arguments, passed down
 * unchanged to the waiting loop, the rule and the grant's side effects: everything a grant
 * needs, and nothing set aside in a global.
 */
typedef struct FlRequest
{
	FlApi api;     /* the installed SQL's version */
	FlMode mode;   /* the lease alone, a share, or a permit */
	int permits;   /* FL_MODE_PERMIT: the count of permits; 0 otherwise */
	int64 ttl;     /* microseconds; 0 for the transaction's own grant */
	int64 wait;    /* microseconds the caller may wait; 0: one try */
	int64 session; /* the session the grant binds to (lease/session.c); 0: none */
	bool xact;     /* the transaction's own grant (acquire_xact): written released */
	Jsonb *value;  /* the lease's value; NULL: none (a retry keeps its value) */
} FlRequest;

/* One attempt at a request: when, by whom, and how it may wait for a row lock. */
typedef struct FlAttempt
{
	TimestampTz now;
	Name holder;        /* the caller's role */
	bool nowait;        /* busy rather than wait for another transaction's change or row lock */
	bool want_expiry;   /* busy: tell when the holder's lease runs out */
	bool writer_queued; /* shares and permits: an exclusive waiter is queued ahead */
} FlAttempt;

/* The outcome of one attempt. */
typedef struct FlGrant
{
	bool granted;
	bool is_new; /* a new grant (new fence), not the same owner's live lease */
	char how;    /* an FlGrantedHow */
	int64 fence;
	TimestampTz granted_at;
	TimestampTz expires_at;
	TimestampTz holder_expires; /* busy: when the holder's lease runs out; 0 if unknown */
	bool group;                 /* busy: a group of shares or permits holds the lease row */
	bool xact;                  /* the transaction's own grant (acquire_xact): released with it */
	FlMode mode;
	int slot; /* a permit's slot (1..permits); 0 otherwise */
} FlGrant;

/* Grants, renewals, releases: the direct path where it is equivalent, else the statements */
extern void fl_lease_grant(text *resource, text *owner, const FlRequest *req, const FlAttempt *a,
						   FlGrant *g);
extern int64 fl_lease_owner_change(text *resource, text *owner, const int64 *grant, TimestampTz now,
								   TimestampTz expires, bool release, FlApi api);
extern bool fl_lease_holds(text *resource, text *owner, int64 *fence);
extern bool fl_lease_fence(text *resource, int64 *fence);

/* Purge, revoke, a session's end, raise_fences */
extern int64 fl_lease_purge(FlApi api, TimestampTz cutoff, TimestampTz now,
							void (*wake)(text *resource));
extern bool fl_lease_revoke(text *resource, TimestampTz now, int64 *fence);
extern uint64 fl_lease_end_session(Datum resources, int64 session, TimestampTz now);
extern int64 fl_lease_raise(int64 above, void (*wake)(text *resource));

#endif /* FENCELOCK_LEASETABLE_H */
