/*
 * store/row.h — fencelock.lease as this backend knows it (its layout, cached), and a lease's row
 * found, locked and changed directly, without a statement (store/row.c).  What a change does is the
 * lease rule's (store/rule.c), handed in as a callback.
 */
#ifndef FENCELOCK_LEASEROW_H
#define FENCELOCK_LEASEROW_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/relcache.h"

/* The outcome of a direct change. */
typedef enum FlRowResult
{
	FL_ROW_CHANGED, /* the rule allowed the change, and it is made */
	FL_ROW_REFUSED, /* the rule refused it: nothing written, nothing locked */
	FL_ROW_MISSING, /* the resource has no row */
	FL_ROW_BUSY,    /* NOWAIT: another transaction is changing or has locked the row */
	FL_ROW_USE_SQL  /* not equivalent here: run the statement instead */
} FlRowResult;

/* What a change may set: FlLeaseRow.set. */
#define FL_SET_OWNER       (1 << 0)
#define FL_SET_EXPIRES     (1 << 1)
#define FL_SET_FENCE       (1 << 2)
#define FL_SET_ACQUIRED_AT (1 << 3)
#define FL_SET_HOLDER      (1 << 4)
#define FL_SET_HOW         (1 << 5)
#define FL_SET_LOCK_DELAY  (1 << 6)
#define FL_SET_SESSION     (1 << 7)

/*
 * A lease row's values as the rule reads them; the rule changes some of them and says which in
 * `set`.  A column the table does not have reads as NULL and is not written.
 */
typedef struct FlLeaseRow
{
	Datum owner; /* text */
	bool owner_null;
	TimestampTz expires;
	bool expires_null;
	int64 fence;
	TimestampTz acquired_at;
	Name holder;
	char how;
	bool how_null;
	Datum lock_delay; /* Interval * */
	bool lock_delay_null;
	int64 session;
	bool session_null;
	int set; /* FL_SET_* */
} FlLeaseRow;

/* The rule of a change: false when it refuses ROW; otherwise it changed ROW. */
typedef bool (*FlRowRule)(FlLeaseRow *row, void *arg);

/*
 * Change RESOURCE's row directly by RULE where that is equivalent to the statement (store/row.c's
 * header says when).  NEED_V2: the rule writes granted_how and lock_delay, which the table must
 * then have.  NOWAIT: FL_ROW_BUSY rather than wait for another transaction's change or row lock.
 * RULE may be called more than once (a concurrent change replaced the row).
 */
extern FlRowResult fl_lease_row_change(text *resource, bool need_v2, bool nowait, FlRowRule rule,
									   void *arg);

/* Whether a row's owner is OWNER, compared as the statements' = does (the column's collation). */
extern bool fl_lease_row_owner_is(const FlLeaseRow *row, text *owner);

/*
 * Share-lock RESOURCE's row and read its latest fence, holder, the grant's start (left alone
 * when NULL) and whether a group holds it directly, as SELECT ... FOR SHARE does in READ
 * COMMITTED; false when that is not equivalent here (then ask a statement).
 */
extern bool fl_lease_row_lock_share(text *resource, bool *found, int64 *fence, NameData *holder,
									bool *holder_null, TimestampTz *acquired_at, bool *group);

/* Whether another transaction is inserting or deleting RESOURCE's row now (a try-once grant). */
extern bool fl_lease_row_in_progress(text *resource);

/* Whether this database's lease table has session_id (0.3.0 on): the grant's statements differ. */
extern bool fl_lease_table_has_sessions(void);

#endif /* FENCELOCK_LEASEROW_H */
