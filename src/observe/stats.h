/*
 * observe/stats.h — fencelock's statistics in shared memory (observe/stats.c): the counters behind
 * fencelock.stats, the per-table refusal counts behind fencelock.table_stats, and the counts of
 * prepared transactions until they end.  Kept only when fencelock is preloaded.
 */
#ifndef FENCELOCK_STATS_H
#define FENCELOCK_STATS_H

#include "postgres.h"

#include "storage/lwlock.h"
#include "utils/hsearch.h"

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
	FL_SHARED_GRANTS,     /* of FL_GRANTS: shares (acquire_shared) */
	FL_PERMIT_GRANTS,     /* of FL_GRANTS: permits (acquire_permit) */
	FL_NUM_COUNTERS
} FlCounter;

/* Shared memory (shmem.c): the sizes to request, and attaching under AddinShmemInitLock */
extern Size fl_stats_shmem_size(void);
extern void fl_stats_shmem_attach(LWLock *lock);
extern Size fl_prepared_shmem_size(void);
extern void fl_prepared_shmem_attach(LWLock *lock);

/* Counting at once (no-ops without shared memory) */
extern bool fl_stats_kept(void);
extern void fl_count(FlCounter counter, uint64 n);
extern void fl_count_table(Oid relid, bool stale);

/*
 * The eviction rule of the cluster-wide statistics tables (table_stats here, resource_stats in
 * observe/resstats.c), in one place: each row belongs to a role, and when a table is full the role
 * that brings the new row pays first.  A role with rows gives up its own least recently used ones,
 * never more than it has; only a role with no row yet takes from another, from the role with the
 * most rows, down to that role's fair share (the table's capacity divided by the number of roles
 * with rows, the newcomer counted) and never below it.  So a role that floods a table with
 * throwaway rows evicts only its own, and a role at or under its fair share is never evicted by
 * another's (issue 35: before, the role with the most rows paid for any role's new rows).
 *
 * The caller counts the rows per role (fl_role_rows_add into a table from fl_role_rows_create),
 * asks fl_evict_payer which role gives up rows for a new row of ROLE and how many at most, and
 * removes that role's least recently used rows.
 */
typedef struct FlRoleRows
{
	Oid role; /* hash key */
	int rows;
} FlRoleRows;

extern HTAB *fl_role_rows_create(void);
extern void fl_role_rows_add(HTAB *roles, Oid role);
extern Oid fl_evict_payer(HTAB *roles, Oid role, int capacity, int *limit);

/* A prepared transaction's counts (observe/count.c), until it ends: counted if it committed */
extern int fl_prepared_fill(TransactionId xid, const uint64 counts[FL_NUM_COUNTERS]);
extern void fl_prepared_free(int slot, TransactionId xid);
extern int fl_prepared_settle(void);

#endif /* FENCELOCK_STATS_H */
