/*
 * fencelock.h — declarations shared by fencelock's source files.
 */
#ifndef FENCELOCK_H
#define FENCELOCK_H

#include "postgres.h"

#include "compat.h"
#include "executor/spi.h"
#include "fmgr.h"

/* Our own SQLSTATEs (class FL), documented in README's error table. */
#define ERRCODE_FENCELOCK_STALE_FENCE MAKE_SQLSTATE('F', 'L', '0', '0', '1')
#define ERRCODE_FENCELOCK_UNFENCED    MAKE_SQLSTATE('F', 'L', '0', '0', '2')

/* Documented input limits, in bytes. */
#define FENCELOCK_MAX_RESOURCE_LEN 1024
#define FENCELOCK_MAX_OWNER_LEN    256

/*
 * Fences carry the server's timeline in their top bits: a grant on timeline T gets a fence of at
 * least (T - 1) << FENCELOCK_TIMELINE_SHIFT, so every fence issued after a promotion exceeds every
 * fence issued on the timeline before it, even when an asynchronous standby lost the last grants.
 */
#define FENCELOCK_TIMELINE_SHIFT 48
#define FENCELOCK_MAX_TIMELINE   ((1U << (63 - FENCELOCK_TIMELINE_SHIFT)) - 1)

/* fencelock.c: settings */
extern int fencelock_max_ttl_s;

/*
 * exec.c: the statements behind the SQL API.  Each runs through SPI as the extension's owner
 * (the caller has no privileges on fencelock's tables), prepared once per backend.
 */
#define FL_MAX_ARGS 8

typedef struct FlStmt
{
	const char *sql;
	int nargs;
	Oid argtypes[FL_MAX_ARGS];
	SPIPlanPtr plan;
} FlStmt;

typedef struct FlSession
{
	Oid save_userid;
	int save_sec_context;
} FlSession;

extern void fl_begin(FlSession *session);
extern void fl_end(FlSession *session);
extern uint64 fl_run(FlStmt *stmt, Datum *values, const char *nulls, bool read_only);
extern uint64 fl_run_latest(FlStmt *stmt, Datum *values, const char *nulls);
extern int64 fl_get_int64(uint64 row, int col, bool *isnull);
extern Oid fl_relid(const char *relname);

/* lease.c: argument checks shared by the lease functions */
extern text *fl_arg_resource(FunctionCallInfo fcinfo, int argno);
extern text *fl_arg_owner(FunctionCallInfo fcinfo, int argno);
extern int64 fl_arg_ttl(FunctionCallInfo fcinfo, int argno);

#endif /* FENCELOCK_H */
