/*
 * observe/notify.h — lease events on channel "fencelock" (observe/notify.c; fencelock.notify = on).
 */
#ifndef FENCELOCK_NOTIFY_H
#define FENCELOCK_NOTIFY_H

#include "postgres.h"

#include "utils/jsonb.h"

#define FENCELOCK_NOTIFY_CHANNEL "fencelock"
extern void fl_notify_holder(const char *event, text *resource, int64 fence, const char *holder,
							 Jsonb *value, const char *mode, int slot);
extern void fl_notify(const char *event, text *resource, int64 fence, const char *holder,
					  Jsonb *value);

#endif /* FENCELOCK_NOTIFY_H */
