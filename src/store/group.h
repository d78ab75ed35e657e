/*
 * store/group.h — shared and permit holders (store/group.c): fencelock.lease_holder, and the
 * resource's lease row while a group holds it.
 */
#ifndef FENCELOCK_LEASEGROUP_H
#define FENCELOCK_LEASEGROUP_H

#include "postgres.h"

#include "lease/lease.h"
#include "utils/jsonb.h"

/* A group grant's request: what fl_try_acquire was asked for (lease/lease.h's fl_grant_permits). */
typedef struct FlGroupCall
{
	int permits; /* 0: shared; else the count of slots */
	TimestampTz now;
	TimestampTz expires;
	Name holder;   /* the caller's role */
	int64 session; /* 0: not session-bound */
	Jsonb *value;  /* NULL: none (a retry keeps its value) */
	bool nowait;
	bool want_expiry;
	bool writer_queued; /* an exclusive waiter is queued ahead: only a retry is granted */
} FlGroupCall;

extern void fl_group_grant(text *resource, text *owner, const FlGroupCall *c, FlGrant *g);
extern int64 fl_group_owner_change(text *resource, text *owner, const int64 *grant, TimestampTz now,
								   TimestampTz expires, bool release, int *slot);
extern bool fl_group_holds(text *resource, text *owner, int64 *fence, bool *permit, int *slot);
extern bool fl_group_value_set(text *resource, text *owner, Jsonb *value, int64 *fence,
							   bool *permit, int *slot);
extern bool fl_group_fence_holder(text *resource, int64 fence, NameData *holder);

/* The ends of groups: revoke, raise_fences and purge (ORPHANS: rows of groups that ended) */
extern void fl_group_forget(text *resource);
extern void fl_group_forget_orphans(void);
extern uint64 fl_group_end_session(Datum resources, int64 session, TimestampTz now);
extern bool fl_group_end_dead(text *resource, TimestampTz now, bool nowait);

#endif /* FENCELOCK_LEASEGROUP_H */
