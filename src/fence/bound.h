/*
 * fence/bound.h — lease-bound writes: checking a write's fence against its lease's latest fence,
 * and the fences this transaction has shown.
 */
#ifndef FENCELOCK_LEASEBOUND_H
#define FENCELOCK_LEASEBOUND_H

#include "postgres.h"

#include "utils/rel.h"

/* The kinds of write a fence check is made for: each names its own error message. */
typedef enum FlWrite
{
	FL_WRITE_INSERT,
	FL_WRITE_UPDATE,
	FL_WRITE_DELETE,
	FL_WRITE_TRUNCATE
} FlWrite;

/* errmsg() "<write> table \"REL\" carries no fence" (FL002), inside an ereport. */
extern int fl_errmsg_unfenced(FlWrite write, Relation rel);

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
 * fence; raises FL002 otherwise.
 */
extern void fl_check_lease_shown(Relation rel, AttrNumber attnum, const char *lease, FlWrite write);

#endif /* FENCELOCK_LEASEBOUND_H */
