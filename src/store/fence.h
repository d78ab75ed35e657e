/*
 * store/fence.h — a lease's fence as the writers check it: read, share-locked against grants, and
 * the purge floor a new row starts above (store/fence.c).
 */
#ifndef FENCELOCK_LEASEFENCE_H
#define FENCELOCK_LEASEFENCE_H

#include "postgres.h"

/* Fences read, and rows locked against grants */
extern char *fl_lease_holder(text *resource, bool *found, bool *group);
extern void fl_lease_lock(text *resource, bool *found, int64 *fence, NameData *holder,
						  bool *holder_null, bool *group);
extern int64 fl_lease_locked_age(void);

/* A fence for a row just inserted: above the purge floor (runs inside the caller's fl_begin) */
extern int64 fl_lease_above_floor(Datum resource, int64 fence);

#endif /* FENCELOCK_LEASEFENCE_H */
