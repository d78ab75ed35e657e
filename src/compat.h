/*
 * compat.h — every PG_VERSION_NUM shim fencelock needs, in one place.
 *
 * fencelock is written against PostgreSQL 15; newer majors are handled here rather than with
 * version branches scattered through the sources.
 */
#ifndef FENCELOCK_COMPAT_H
#define FENCELOCK_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#error "fencelock requires PostgreSQL 15 or later"
#endif

/* The varlena macros (VARSIZE_ANY_EXHDR, ...): in postgres.h until 15, in varatt.h from 16. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * PostgreSQL 18 replaced the pg_attribute_noreturn() suffix with the pg_noreturn prefix; the
 * older attribute works as a prefix too.
 */
#if PG_VERSION_NUM < 180000
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * The module's magic block.  From PostgreSQL 18 it also carries the module's name and version,
 * which pg_get_loaded_modules() shows (FENCELOCK_VERSION: the Makefile passes the control file's).
 */
#if PG_VERSION_NUM >= 180000
#define FL_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "fencelock", .version = FENCELOCK_VERSION)
#else
#define FL_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/* PostgreSQL 17 added infinite intervals; earlier majors have none to reject. */
#if PG_VERSION_NUM >= 170000
#define FL_INTERVAL_IS_FINITE(iv) (!INTERVAL_NOT_FINITE(iv))
#else
#define FL_INTERVAL_IS_FINITE(iv) (true)
#endif

/* This backend's index among PGPROCs: PostgreSQL 17 renamed it. */
#if PG_VERSION_NUM >= 170000
#define FL_MY_PROCNO MyProcNumber
#else
#define FL_MY_PROCNO (MyProc->pgprocno)
#endif

/*
 * The oldest transaction whose commit status the commit log still holds (read under
 * XactTruncationLock): PostgreSQL 17 renamed ShmemVariableCache to TransamVariables.
 */
#if PG_VERSION_NUM >= 170000
#define FL_OLDEST_CLOG_XID (TransamVariables->oldestClogXid)
#else
#define FL_OLDEST_CLOG_XID (ShmemVariableCache->oldestClogXid)
#endif

/* PostgreSQL 16 replaced the per-catalog ownership checks with object_ownercheck. */
#if PG_VERSION_NUM >= 160000
#define FL_CLASS_OWNERCHECK(relid, roleid) object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define FL_CLASS_OWNERCHECK(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif

/* PostgreSQL 18 dropped ExecutorRun's execute_once argument. */
#if PG_VERSION_NUM >= 180000
#define FL_EXECUTOR_RUN_PARAMS QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define FL_EXECUTOR_RUN_ARGS   queryDesc, direction, count
#else
#define FL_EXECUTOR_RUN_PARAMS                                                                     \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count, bool execute_once
#define FL_EXECUTOR_RUN_ARGS queryDesc, direction, count, execute_once
#endif

/*
 * A table's primary key index.  PostgreSQL 18 can also return a DEFERRABLE primary key, when the
 * caller says it will do; before 18 the relcache never returned one.  Claiming needs an immediate
 * key (rows are found and ordered by it), so a deferrable one counts as none on every major.
 */
#if PG_VERSION_NUM >= 180000
#define FL_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define FL_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/* PostgreSQL 18 gave index_beginscan an instrumentation argument. */
#if PG_VERSION_NUM >= 180000
#define FL_INDEX_BEGINSCAN(heap, index, snapshot, nkeys, norderbys)                                \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define FL_INDEX_BEGINSCAN(heap, index, snapshot, nkeys, norderbys)                                \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * heap_update: PostgreSQL 16 added an argument that says which indexes the new version needs
 * entries in; before, a version that is not heap-only needs entries in every index.
 */
#if PG_VERSION_NUM >= 160000
#define FL_UPDATE_INDEXES_DECL(var) TU_UpdateIndexes var = TU_None
#define FL_HEAP_UPDATE(rel, otid, tuple, cid, tmfd, lockmode, var)                                 \
	heap_update((rel), (otid), (tuple), (cid), InvalidSnapshot, true, (tmfd), (lockmode), &(var))
#define FL_UPDATE_NEEDS_INDEX_ENTRIES(var, tuple) ((var) == TU_All)
#else
#define FL_UPDATE_INDEXES_DECL(var) bool var pg_attribute_unused() = false
#define FL_HEAP_UPDATE(rel, otid, tuple, cid, tmfd, lockmode, var)                                 \
	heap_update((rel), (otid), (tuple), (cid), InvalidSnapshot, true, (tmfd), (lockmode))
#define FL_UPDATE_NEEDS_INDEX_ENTRIES(var, tuple) (!HeapTupleIsHeapOnly(tuple))
#endif

/*
 * pq_check_connection() (PostgreSQL 14 and later) is declared in libpq/libpq.h, which includes
 * libpq-be.h and with it <gssapi/gssapi.h> on servers built with GSSAPI, such as Debian's: a
 * header the server-dev packages do not bring.  The prototype, unchanged since 14, is repeated
 * here instead.
 */
extern bool pq_check_connection(void);

/*
 * The wait event of a backend waiting for a lease (fencelock.acquire with a wait): PostgreSQL 17
 * lets an extension register its own name, shown as pg_stat_activity.wait_event; before, every
 * extension wait shows as "Extension".  Registering an existing name returns its number.
 */
#if PG_VERSION_NUM >= 170000
#include "utils/wait_event.h"
static inline uint32
fl_wait_event_acquire(void)
{
	static uint32 event = 0;

	if (event == 0)
		event = WaitEventExtensionNew("FencelockAcquire");
	return event;
}
#define FL_WAIT_EVENT_ACQUIRE fl_wait_event_acquire()
#else
#define FL_WAIT_EVENT_ACQUIRE PG_WAIT_EXTENSION
#endif

#endif /* FENCELOCK_COMPAT_H */
