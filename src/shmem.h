/*
 * shmem.h — fencelock's shared memory: the hooks that request and attach it, for the statistics
 * (stats.h) and the wait queue (waitqueue.h).  All of it needs shared_preload_libraries =
 * 'fencelock'; without it the counters are not kept and waits fall back to polling.
 */
#ifndef FENCELOCK_SHMEM_H
#define FENCELOCK_SHMEM_H

#include "postgres.h"

#include "stats.h"
#include "storage/lwlock.h"
#include "waitqueue.h"

/* The locks of tranche "fencelock", one per part of shared memory. */
typedef enum FlLock
{
	FL_LOCK_STATS,    /* the per-table counts' hash (its shape) and stats_reset */
	FL_LOCK_QUEUE,    /* the wait queue's slots and tickets */
	FL_LOCK_PREPARED, /* count.c: the counts of prepared transactions */
	FL_NUM_LOCKS
} FlLock;

extern void fl_shmem_init(void);
extern bool fl_shmem_ready(void);
extern void fl_shmem_require(const char *function);
extern LWLock *fl_shmem_lock(FlLock which);

#endif /* FENCELOCK_SHMEM_H */
