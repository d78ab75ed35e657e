/*
 * lease/lease.h — the lease API (lease/lease.c): one grant attempt, shared by acquire, the waiting
 * acquire and acquire_all (lease/wait.c), and a release.
 */
#ifndef FENCELOCK_LEASE_H
#define FENCELOCK_LEASE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fencelock.h"
#include "fmgr.h"
#include "utils/jsonb.h"

/* What a grant gives: the lease alone, a share of it, or one of its permits (store/group.c). */
typedef enum FlMode
{
	FL_MODE_EXCLUSIVE = 0,
	FL_MODE_SHARED,
	FL_MODE_PERMIT
} FlMode;

/* The outcome of one grant attempt. */
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

/* Set around a call of fl_try_acquire: its grants are the transaction's own (acquire_xact) */
extern bool fl_grant_xact;
/* Set around a call of fl_try_acquire: -1 the lease alone; 0 a share; N one of N permits */
extern int fl_grant_permits;

extern void fl_try_acquire(text *resource, text *owner, int64 ttl, FlApi api, bool want_expiry,
						   bool nowait, Jsonb *value, FlGrant *g);
extern void fl_count_grant(text *resource, const FlGrant *g);
extern Datum fl_acquire_sql(FunctionCallInfo fcinfo, FlApi api);
extern bool fl_release(text *resource, text *owner, const int64 *grant, FlApi api);

#endif /* FENCELOCK_LEASE_H */
