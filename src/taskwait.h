/*
 * taskwait.h — the waiting claim's wake-ups (taskwait.c).
 */
#ifndef FENCELOCK_TASKWAIT_H
#define FENCELOCK_TASKWAIT_H

#include "postgres.h"

extern int fencelock_claim_recheck_ms;
extern Oid fl_task_own_relid;

extern void fl_task_wait_shmem_init(void);
extern bool fl_task_wait_ready(void);
extern void fl_task_wait_enter(Oid relid, int32 max_rows);
extern void fl_task_wait_leave(void);
extern bool fl_task_wait_take_wakeup(void);
extern bool fl_task_wait_sleep(long timeout_ms);
extern void fl_task_wake_next(Oid relid);
extern void fl_task_wake_pending(Oid relid, int64 rows, bool unknown);

#endif /* FENCELOCK_TASKWAIT_H */
