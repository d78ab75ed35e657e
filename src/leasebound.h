/*
 * leasebound.h — lease-bound writes: checking a write's fence against its lease's latest fence,
 * and the fences this transaction has shown.
 */
#ifndef FENCELOCK_LEASEBOUND_H
#define FENCELOCK_LEASEBOUND_H

#include "postgres.h"

#include "utils/rel.h"

/* Record that this transaction has shown (and row-locked) FENCE as RESOURCE's latest fence. */
extern void fl_note_shown_fence(text *resource, int64 fence);

/*
 * A write to REL carrying FENCE (in column ATTNUM) under LEASE: returns if FENCE is the lease's
 * latest fence, which stays so until this transaction ends; raises FL001 otherwise.
 */
extern void fl_check_lease_write(Relation rel, AttrNumber attnum, const char *lease, int64 fence);

/*
 * A write to REL that carries no fence (DELETE, an UPDATE that leaves the fence column alone
 * with allow_unfenced, TRUNCATE): returns if this transaction has already shown LEASE's latest
 * fence; raises FL002 otherwise.  WHAT names the write, e.g. "delete from".
 */
extern void fl_check_lease_shown(Relation rel, AttrNumber attnum, const char *lease,
								 const char *what);

#endif /* FENCELOCK_LEASEBOUND_H */
