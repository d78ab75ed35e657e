/*
 * fence/mergeguard.h — which statement fires a row trigger: MERGE's UPDATE actions share one column
 * set.
 */
#ifndef FENCELOCK_MERGEGUARD_H
#define FENCELOCK_MERGEGUARD_H

#include "postgres.h"

/* How the statement that fires an UPDATE row trigger assigns a column. */
typedef enum FlMergeAssign
{
	FL_MERGE_NONE,    /* not a MERGE: tg_updatedcols is exact */
	FL_MERGE_ALL,     /* a MERGE whose every UPDATE action assigns the column */
	FL_MERGE_PARTIAL, /* a MERGE with an UPDATE action that leaves the column alone */
	/*
	 * No frame, in the transaction that loaded the library, and not the client's statement: a
	 * statement a function started before the library was loaded, perhaps a MERGE.  The trigger
	 * refuses an UPDATE that keeps the fence, as for _PARTIAL, with a hint to load fencelock
	 * first.
	 */
	FL_MERGE_UNKNOWN
} FlMergeAssign;

extern void fl_merge_guard_init(void);
/* Called by the trigger in the memory context it was called in. */
extern FlMergeAssign fl_merge_assigns(const char *column);

#endif /* FENCELOCK_MERGEGUARD_H */
