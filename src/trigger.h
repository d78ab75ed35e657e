/*
 * trigger.h — the fence trigger (trigger.c), as other parts recognise it.
 */
#ifndef FENCELOCK_TRIGGER_H
#define FENCELOCK_TRIGGER_H

#include "postgres.h"

/* Whether a function is fencelock.fence_trigger (by its C symbol, not its name) */
extern bool fl_is_fence_trigger(Oid fn);

#endif /* FENCELOCK_TRIGGER_H */
