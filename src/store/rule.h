/*
 * store/rule.h — fencelock.lease and fencelock.fence_floor: the lease rule and the statements that
 * apply it (store/rule.c); the fence reads, row locks and the purge floor are store/fence.h's.  The
 * callers run no SQL of their own on these tables.
 */
#ifndef FENCELOCK_LEASETABLE_H
#define FENCELOCK_LEASETABLE_H

#include "postgres.h"

#include "fencelock.h"
#include "lease/lease.h"

/* Grants, renewals, releases: the direct path where it is equivalent, else the statements */
extern void fl_lease_grant(text *resource, text *owner, TimestampTz now, TimestampTz expires,
						   FlApi api, Name holder, int64 session, bool want_expiry, bool nowait,
						   bool xact, FlGrant *g);
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
