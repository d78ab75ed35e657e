/*
 * wait/leasequeue.h — the queue of backends waiting for a lease, in shared memory: FIFO per
 * resource (its database and its whole name), one entry per backend.  Without preload every
 * function here is a no-op and a waiter is its own head: it polls.
 */
#ifndef FENCELOCK_WAITQUEUE_H
#define FENCELOCK_WAITQUEUE_H

#include "postgres.h"

#include "storage/lwlock.h"

/* Shared memory (shmem.c): the size to request, and attaching under AddinShmemInitLock */
extern Size fl_queue_shmem_size(int nslots);
extern void fl_queue_shmem_attach(int nslots, LWLock *lock);

/* A waiter: its place in the queue */
extern int fl_queue_enter(text *resource, int max_waiters, bool exclusive);
extern bool fl_queue_attached(void);
extern bool fl_queue_queued(void);
extern bool fl_queue_is_mine(text *resource);
extern bool fl_queue_is_head(void);
extern void fl_queue_leave(bool granted);

/* A waiter: sleeping until its turn */
extern void fl_queue_prepare(void);
extern void fl_queue_clear_woken(void);
extern bool fl_queue_woken(void);
extern void fl_queue_sleep(long timeout_ms);

/* Anyone: the waiters of a resource; waking its head now, or when this transaction commits */
extern int fl_queue_length(text *resource);
extern bool fl_queue_exclusive_ahead(text *resource);
extern void fl_queue_wake(text *resource);
extern void fl_queue_wake_at_commit(text *resource);

#endif /* FENCELOCK_WAITQUEUE_H */
