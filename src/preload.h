/*
 * preload.h — the error of an SQL function that has nothing to do without shared memory.  Each
 * part of shared memory (shmem.c) knows from its own pointer whether it is attached and passes
 * that here, so that no part calls back into shmem.c.
 */
#ifndef FENCELOCK_PRELOAD_H
#define FENCELOCK_PRELOAD_H

#include "postgres.h"

/* 55000 with a hint, unless attached (fencelock was loaded via shared_preload_libraries). */
static inline void
fl_require_preload(bool attached, const char *function)
{
	if (!attached)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s needs fencelock to be loaded via shared_preload_libraries", function),
				 errhint("Add 'fencelock' to shared_preload_libraries in postgresql.conf and "
						 "restart the server.")));
}

#endif /* FENCELOCK_PRELOAD_H */
