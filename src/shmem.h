/*
 * shmem.h — fencelock's shared memory (shmem.c): the hooks that request and attach all of it,
 * installed by _PG_init when fencelock is preloaded.
 */
#ifndef FENCELOCK_SHMEM_H
#define FENCELOCK_SHMEM_H

#include "postgres.h"

/* _PG_init, while shared_preload_libraries is processed */
extern void fl_shmem_init(void);

/* Whether shared memory is attached: false without preload (waits then poll) */

#endif /* FENCELOCK_SHMEM_H */
