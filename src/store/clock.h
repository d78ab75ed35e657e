/*
 * store/clock.h — the lease clock (store/clock.c): the moment every lease decision is taken at.
 */
#ifndef FENCELOCK_CLOCK_H
#define FENCELOCK_CLOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* Shared memory (shmem.c) */
extern Size fl_clock_shmem_size(void);
extern void fl_clock_shmem_attach(void);

/* Now on the lease clock; lifted above this database's latest lease moment at its first use */
extern TimestampTz fl_lease_now(void);
/* The same clock, never reading the database (for callers inside the rule's row changes) */
extern TimestampTz fl_lease_clock_read(void);

#endif /* FENCELOCK_CLOCK_H */
