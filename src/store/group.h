/*
 * store/group.h — shared and permit holders (store/group.c): fencelock.lease_holder, and the
 * resource's lease row while a group holds it.
 */
#ifndef FENCELOCK_LEASEGROUP_H
#define FENCELOCK_LEASEGROUP_H

#include "postgres.h"

#include "store/rule.h"
#include "utils/jsonb.h"

extern void fl_group_grant(text *resource, text *owner, const FlRequest *req, const FlAttempt *a,
						   FlGrant *g);
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
