/*
 * shmem.h — shared memory: statistics counters, per-table rejection counts, and the wait queue.
 * All of it needs shared_preload_libraries = 'fencelock'; without it the counters are not kept
 * and waits fall back to polling.
 */
#ifndef FENCELOCK_SHMEM_H
#define FENCELOCK_SHMEM_H

#include "postgres.h"

typedef enum FlCounter
{
	FL_GRANTS,     /* leases granted (new fence) */
	FL_TAKEOVERS,  /* grants of a lease that expired without a release */
	FL_REACQUIRES, /* the same owner's live lease acquired again */
	FL_BUSY,       /* acquires that found another owner's live lease */
	FL_RENEWALS,
	FL_RENEWALS_REFUSED, /* expired, or not the owner */
	FL_RELEASES,
	FL_RELEASES_REFUSED,  /* expired (an overrun), or not the owner */
	FL_STALE_REJECTED,    /* FL001 from the trigger or assert_fence */
	FL_UNFENCED_REJECTED, /* FL002 from the trigger */
	FL_WAITS,             /* acquires that had to wait */
	FL_WAIT_US,           /* time spent waiting, microseconds */
	FL_WAIT_TIMEOUTS,     /* waits that ended without the lease */
	FL_REVOKES,           /* leases freed by revoke() */
	FL_NUM_COUNTERS
} FlCounter;

extern void fl_shmem_init(void);
extern bool fl_shmem_ready(void);
extern void fl_count(FlCounter counter, uint64 n);
extern void fl_count_table(Oid relid, bool stale);

/* The wait queue: FIFO per resource (by hash); one entry per backend. */
extern uint64 fl_resource_key(text *resource);
extern int fl_queue_length(uint64 key);
extern void fl_queue_enter(uint64 key);
extern uint64 fl_queue_my_key(void);
extern bool fl_queue_is_head(void);
extern void fl_queue_prepare(void);
extern void fl_queue_clear_woken(void);
extern bool fl_queue_woken(void);
extern void fl_queue_sleep(long timeout_ms);
extern void fl_queue_leave(bool wake_next);
extern void fl_queue_wake(uint64 key);

#endif /* FENCELOCK_SHMEM_H */
