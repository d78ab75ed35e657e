/*
 * fence/trigger.h — the fence trigger (fence/trigger.c), as other parts recognise it.
 */
#ifndef FENCELOCK_TRIGGER_H
#define FENCELOCK_TRIGGER_H

#include "postgres.h"

/* Whether a function is fencelock.fence_trigger (by its C symbol, not its name) */
extern bool fl_is_fence_trigger(Oid fn);

/*
 * Refuse (ELEVEL ERROR) or warn of a fence trigger with a column list (COLUMNS) or a WHEN
 * condition (WHEN): it would skip rows.  39P01, with a hint to recreate it without them.
 */
extern void fl_report_partial_fence_trigger(int elevel, const char *tgname, const char *relname,
											bool columns, bool when);

#endif /* FENCELOCK_TRIGGER_H */
