/*
 * store/sessionslot.h — the registry of sessions in shared memory (store/sessionslot.c).
 */
#ifndef FENCELOCK_SESSIONSLOT_H
#define FENCELOCK_SESSIONSLOT_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* Shared memory (shmem.c): one slot per PGPROC */
extern Size fl_session_shmem_size(int nslots);
extern void fl_session_shmem_attach(int nslots);

/* The rule of liveness: whether the leases of session ID still count as its */
extern bool fl_session_alive(int64 id);

/* A session's slot, taken and cleared by lease/session.c */
extern bool fl_session_slots_attached(void);
extern int64 fl_session_slot_take(void);
extern void fl_session_slot_end(int64 id, int64 lock_delay, TimestampTz now);

#endif /* FENCELOCK_SESSIONSLOT_H */
