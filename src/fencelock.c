/*
 * fencelock.c — module entry point and settings.
 *
 * Nothing here needs shared_preload_libraries: the lease functions and the fence trigger work in
 * any backend that loads the library.
 */
#include "postgres.h"

#include <limits.h>

#include "fencelock.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

/* fencelock.max_ttl, in seconds: the longest lease acquire and renew grant. */
int fencelock_max_ttl_s = 86400;

void _PG_init(void);

void
_PG_init(void)
{
	DefineCustomIntVariable("fencelock.max_ttl", "Longest lease that acquire and renew grant.",
							"A longer ttl is rejected; a lease that outlives its holder blocks the "
							"resource until it expires.",
							&fencelock_max_ttl_s, 86400, 1, INT_MAX, PGC_SUSET, GUC_UNIT_S, NULL,
							NULL, NULL);

	MarkGUCPrefixReserved("fencelock");
}
