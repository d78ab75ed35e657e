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

/*
 * PostgreSQL 18 replaced the pg_attribute_noreturn() suffix with the pg_noreturn prefix; the
 * older attribute works as a prefix too.
 */
#if PG_VERSION_NUM < 180000
#define pg_noreturn pg_attribute_noreturn()
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

/* PostgreSQL 18 gave RelationGetPrimaryKeyIndex a deferrable_ok argument. */
#if PG_VERSION_NUM >= 180000
#define FL_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define FL_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * pq_check_connection() (PostgreSQL 14 and later) is declared in libpq/libpq.h, which includes
 * libpq-be.h and with it <gssapi/gssapi.h> on servers built with GSSAPI, such as Debian's: a
 * header the server-dev packages do not bring.  The prototype, unchanged since 14, is repeated
 * here instead.
 */
extern bool pq_check_connection(void);

#endif /* FENCELOCK_COMPAT_H */
