/*
 * settings.h — the variables of fencelock's settings (fencelock.*), all defined in fencelock.c
 * and registered by its _PG_init.  A file that reads a setting includes this header.
 */
#ifndef FENCELOCK_SETTINGS_H
#define FENCELOCK_SETTINGS_H

#include "postgres.h"

/* Leases */
extern int fencelock_max_ttl_s;
extern int fencelock_lock_delay_ms;
extern bool fencelock_direct_path; /* off: every lease change runs its statement */
extern int fencelock_wait_recheck_ms;
extern int fencelock_max_value_bytes; /* the largest value a lease or holder may carry */

/* What is recorded and told: history, notifications, the server log */
extern bool fencelock_history;
extern int fencelock_history_retention_s;
extern bool fencelock_notify;
extern int fencelock_log_level; /* an elevel, or -1 for off */

/* Task tables */
extern int fencelock_claim_recheck_ms;

/* Waiting acquires: the most waiters queued per resource (0: no cap) */
extern int fencelock_max_waiters;

/* Shared memory (only when preloaded) */
extern int fencelock_max_tables;
extern int fencelock_max_resources; /* 0: no per-resource statistics */

#endif /* FENCELOCK_SETTINGS_H */
