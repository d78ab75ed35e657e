/*
 * store/timeline.h — fences across timelines, and their durable commit (store/timeline.c).
 */
#ifndef FENCELOCK_TIMELINE_H
#define FENCELOCK_TIMELINE_H

#include "postgres.h"

/* The lowest fence a grant on this server's timeline may carry, less one (25006 on a standby) */
extern int64 fl_timeline_base(void);

/* Make the current transaction's commit durable (synchronous_commit at least on, flushed) */
extern void fl_commit_durably(void);

/*
 * A lease granted with FENCE: its transaction's commit is made durable unless the transaction
 * releases that grant again (fl_grant_released) before it commits
 */
extern void fl_grant_durably(text *resource, int64 fence);
extern void fl_grant_released(text *resource, int64 fence);

#endif /* FENCELOCK_TIMELINE_H */
