/*
 * shmem.c — fencelock's shared memory: requested while shared_preload_libraries is processed,
 * attached at startup.  It holds the statistics (stats.c) and the wait queue (waitqueue.c); each
 * of those says how much it needs and initialises its own part; so do the counts of prepared
 * transactions (count.c).
 */
#include "postgres.h"

#include "fencelock.h"
#include "miscadmin.h"
#include "shmem.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#define FL_TRANCHE "fencelock"

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static bool fl_attached = false;

static void
fl_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(fl_stats_shmem_size());
	RequestAddinShmemSpace(fl_queue_shmem_size());
	RequestAddinShmemSpace(fl_prepared_shmem_size());
	RequestNamedLWLockTranche(FL_TRANCHE, FL_NUM_LOCKS);
}

static void
fl_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	fl_stats_shmem_startup();
	fl_queue_shmem_startup();
	fl_prepared_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
	fl_attached = true;
}

/* Called from _PG_init while shared_preload_libraries is being processed. */
void
fl_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = fl_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = fl_shmem_startup;
}

/* Whether the statistics and the wait queue are in shared memory (fencelock was preloaded). */
bool
fl_shmem_ready(void)
{
	return fl_attached;
}

/* For the functions that have nothing to do without shared memory: 55000 with a hint. */
void
fl_shmem_require(const char *function)
{
	if (!fl_attached)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s needs fencelock to be loaded via shared_preload_libraries", function),
				 errhint("Add 'fencelock' to shared_preload_libraries in postgresql.conf and "
						 "restart the server.")));
}

/* One of the tranche's locks; for the part's startup, which keeps it in its shared struct. */
LWLock *
fl_shmem_lock(FlLock which)
{
	return &GetNamedLWLockTranche(FL_TRANCHE)[which].lock;
}
