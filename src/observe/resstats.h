/*
 * observe/resstats.h — contention per resource in shared memory (observe/resstats.c): the rows
 * behind fencelock.resource_stats, bounded by fencelock.max_resources.  Kept only when fencelock is
 * preloaded and max_resources is above 0.
 */
#ifndef FENCELOCK_RESSTATS_H
#define FENCELOCK_RESSTATS_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/lwlock.h"

/* Shared memory (shmem.c): the size to request, and attaching under AddinShmemInitLock */
extern Size fl_resstats_shmem_size(void);
extern void fl_resstats_shmem_attach(LWLock *lock);

/* Whether per-resource statistics are kept */
extern bool fl_resstats_kept(void);

/* Attempts, counted at once (no-ops when not kept) */
typedef enum FlResCount
{
	FL_RES_BUSY,            /* an acquire found another owner's live lease */
	FL_RES_RELEASE_REFUSED, /* a release by an owner that did not hold a live lease */
	FL_RES_WAITERS_REFUSED  /* a waiting acquire turned away by fencelock.max_waiters */
} FlResCount;

extern void fl_resstats_count(text *resource, FlResCount what);

/* A waiting acquire ended (US microseconds after it started waiting, with the lease or not) */
extern void fl_resstats_wait(text *resource, int64 us, bool granted);

/*
 * fl_queue_enter's answer for RESOURCE: the waiters queued with this one (their high-water mark
 * is kept), or 0 when fencelock.max_waiters turned it away (counted).  Returns whether it queued.
 */
extern bool fl_resstats_queued(text *resource, int waiters);

/* A stale fence refused, SINCE_US after the grant that superseded it (negative: unknown) */
extern void fl_resstats_stale(text *resource, int64 since_us);

/*
 * Grants, renewals and releases: observe/count.c holds them until the transaction commits
 * (fl_count_resource_at_commit), then applies them.  A lease's hold time is measured from the
 * grant this part saw to its release, or to its deadline (or the next grant, if sooner).
 */
typedef enum FlResEventKind
{
	FL_RES_GRANT,
	FL_RES_RENEW,
	FL_RES_RELEASE
} FlResEventKind;

typedef struct FlResEvent
{
	FlResEventKind kind;
	bool takeover;       /* a grant: of a lease that expired without a release */
	int64 fence;         /* the lease's fence */
	TimestampTz at;      /* when it was granted, renewed or released */
	TimestampTz expires; /* a grant's or renewal's deadline */
	/* filled by fl_resstats_touch: the row, valid while no row was removed since */
	void *entry;
	uint64 generation;
} FlResEvent;

/* Before an event is held for the commit: make sure RESOURCE has a row (may evict another) */
extern void fl_resstats_touch(text *resource, FlResEvent *event);

/* At commit (observe/count.c): cannot fail */
extern void fl_resstats_apply(Oid dbid, const char *name, int len, const FlResEvent *event);

#endif /* FENCELOCK_RESSTATS_H */
