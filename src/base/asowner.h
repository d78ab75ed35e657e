/*
 * base/asowner.h — running fencelock's own statements as the extension's owner, and SPI helpers
 * (base/asowner.c).
 */
#ifndef FENCELOCK_ASOWNER_H
#define FENCELOCK_ASOWNER_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/resowner.h"

/*
 * The statements behind the SQL API.  Each runs through SPI as the extension's owner
 * (the caller has no privileges on fencelock's tables), prepared once per backend.
 */
#define FL_MAX_ARGS 12

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

extern Oid fl_lease_relid(void);
extern Oid fl_rel_owner(Oid relid);
extern void fl_begin(FlSession *session);
extern void fl_end(FlSession *session);
extern uint64 fl_run(FlStmt *stmt, Datum *values, const char *nulls, bool read_only);
extern uint64 fl_run_latest(FlStmt *stmt, Datum *values, const char *nulls);
extern bool fl_run_or_undo(FlStmt *stmt, Datum *values, const char *nulls);
extern bool fl_run_nowait(FlStmt *stmt, Datum *values, const char *nulls, int64 timeout_ms,
						  bool *busy);
extern int64 fl_get_int64(uint64 row, int col, bool *isnull);
extern Oid fl_extension_schema(void);

/* SPI for statements that are not FlStmts (claim/claim.c's, run as the caller) */
extern SPIPlanPtr fl_keep_plan(const char *sql, int nargs, Oid *argtypes, int cursor_options);
extern uint64 fl_spi_result(const char *sql, int rc);
extern void fl_spi_connect(void);
extern void fl_spi_finish(void);
extern List *fl_first_column(SPIPlanPtr *plan, const char *sql, bool oids);

/* An internal subtransaction, as PL/pgSQL runs an EXCEPTION block */
typedef struct FlSubxact
{
	MemoryContext cxt;
	ResourceOwner owner;
} FlSubxact;

extern void fl_subxact_begin(FlSubxact *x);
extern void fl_subxact_end(FlSubxact *x, bool commit);
extern void fl_subxact_lock_timeout(int64 ms);
extern bool fl_subxact_end_if_busy(FlSubxact *x);

#endif /* FENCELOCK_ASOWNER_H */
