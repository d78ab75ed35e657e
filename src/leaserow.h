/*
 * leaserow.h — a lease's row found and changed directly (leaserow.c).
 */
#ifndef FENCELOCK_LEASEROW_H
#define FENCELOCK_LEASEROW_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "fencelock.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

typedef enum FlRowOp
{
	FL_ROW_GRANT,
	FL_ROW_RENEW,
	FL_ROW_RELEASE
} FlRowOp;

typedef enum FlRowResult
{
	FL_ROW_CHANGED, /* the rule allowed the change, and it is made */
	FL_ROW_REFUSED, /* the rule refused it: nothing written, nothing locked */
	FL_ROW_MISSING, /* the resource has no row */
	FL_ROW_USE_SQL  /* not equivalent here: run the statement instead */
} FlRowResult;

typedef struct FlRowChange
{
	/* what to do */
	FlRowOp op;
	text *resource;
	text *owner;
	TimestampTz now;
	TimestampTz expires; /* the new deadline; now for a release */
	/* a grant's */
	bool v2;              /* FL_API_0_2 rules: lock_delay, how, sessions */
	int64 base;           /* fl_timeline_base() */
	Name holder;          /* the caller's role */
	Interval *lock_delay; /* the caller's fencelock.lock_delay */
	int64 session;        /* fl_grant_session */
	/* what happened */
	int64 fence;                /* the row's fence after the change */
	bool is_new;                /* a grant with a new fence */
	char how;                   /* an FlGrantedHow */
	TimestampTz holder_expires; /* refused grant: when the holder's lease runs out, 0 unknown */
} FlRowChange;

extern FlRowResult fl_lease_row_change(FlRowChange *c);

/* Where leasebound.c finds what it reads of a lease row (attribute numbers) and the row itself. */
typedef struct FlLeaseReadLayout
{
	Oid pkid; /* the primary key on resource */
	AttrNumber resource;
	AttrNumber fence;
	AttrNumber holder;
} FlLeaseReadLayout;

/*
 * Whether reading REL (fencelock.lease, opened by the caller) directly, by its primary key, equals
 * a SELECT of fence and holder FOR SHARE run as the extension's owner; fills *read if so.
 */
extern bool fl_lease_row_readable(Relation rel, FlLeaseReadLayout *read);
extern bool fl_lease_row_fetch(Relation rel, Relation idx, Snapshot snapshot, text *resource,
							   TupleTableSlot *slot);

#endif /* FENCELOCK_LEASEROW_H */
