/*
 * wait/taskqueue.h — the waiting claim's wake-ups (wait/taskqueue.c).
 */
#ifndef FENCELOCK_TASKWAIT_H
#define FENCELOCK_TASKWAIT_H

#include "postgres.h"

#include "storage/lwlock.h"

/*
 * The task table whose statements claim runs now (InvalidOid: none): its wake trigger counts
 * nothing.  Returns the table set before, to be set again afterwards.
 */
extern Oid fl_task_wait_set_own(Oid relid);

/* Shared memory (shmem.c): the size to request, and attaching under AddinShmemInitLock */
extern Size fl_task_wait_shmem_size(int nslots);
extern void fl_task_wait_shmem_attach(int nslots, LWLock *lock);

/* A waiting claim */
extern void fl_task_wait_enter(Oid relid, int32 max_rows);
extern bool fl_task_wait_sleep(long timeout_ms);
extern void fl_task_wait_leave(void);

/* Wakers: rows made claimable, handed to the waiters at commit */
extern void fl_task_wake_next(Oid relid);
extern void fl_task_wake_pending(Oid relid, int64 rows, bool unknown);

#endif /* FENCELOCK_TASKWAIT_H */
