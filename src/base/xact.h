/*
 * base/xact.h — the one pair of transaction callbacks (base/xact.c), and the order in which it
 * calls the parts that joined it.  src/README.md ("Transaction callbacks") says what each part
 * does at which event and what it may assume of the parts before it.
 */
#ifndef FENCELOCK_XACT_H
#define FENCELOCK_XACT_H

#include "postgres.h"

#include "access/xact.h"

/*
 * The parts, in the order they are called at every event (commit, abort, prepare, and the end of
 * a subtransaction).  Changing the order is changing the contract in src/README.md.
 */
typedef enum FlXactPart
{
	FL_XACT_TIMELINE = 0, /* store/timeline.c: PRE_COMMIT decides the durable commit */
	FL_XACT_COUNT,        /* observe/count.c: PRE_PREPARE keeps, COMMIT applies the counts */
	FL_XACT_SESSION,      /* lease/session.c: the bindings made in this transaction */
	FL_XACT_LEASE_WAKE,   /* wait/leasequeue.c: COMMIT wakes the heads of freed leases */
	FL_XACT_TASK_WAKE,    /* wait/taskqueue.c: COMMIT wakes the waiting claims */
	FL_XACT_BOUND,        /* fence/bound.c: forgets the lease rows this transaction locked */
	FL_XACT_MERGE_GUARD,  /* fence/mergeguard.c: forgets the MERGE it watched */
	FL_XACT_NUM_PARTS
} FlXactPart;

/*
 * Join the callbacks (on a part's first use; again is a no-op): XACT at every transaction event,
 * SUBXACT (may be NULL) at every subtransaction event, each in FlXactPart's order.
 */
extern void fl_xact_join(FlXactPart part, XactCallback xact, SubXactCallback subxact);

#endif /* FENCELOCK_XACT_H */
