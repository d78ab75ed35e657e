/*
 * observe/count.h — counts that follow the transaction's outcome (observe/count.c): made when the
 * transaction that did the counted thing commits.
 */
#ifndef FENCELOCK_COUNT_H
#define FENCELOCK_COUNT_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "observe/resstats.h"
#include "observe/stats.h"

/* _PG_init, while shared_preload_libraries is processed */
extern void fl_count_init(void);

/* Grants, renewals and releases: counted at the commit of the current (sub)transaction */
extern void fl_count_at_commit(FlCounter counter, uint64 n);

/* A resource's grant, renewal or release: applied to its row (observe/resstats.c) at the commit */
extern void fl_count_resource_at_commit(text *resource, FlResEventKind kind, int64 fence,
										TimestampTz at, TimestampTz expires, bool takeover);

#endif /* FENCELOCK_COUNT_H */
