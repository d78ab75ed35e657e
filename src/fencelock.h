/*
 * fencelock.h — declarations shared by fencelock's source files.
 */
#ifndef FENCELOCK_H
#define FENCELOCK_H

#include "postgres.h"

#include "args.h"
#include "compat.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

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

/*
 * asowner.c: the statements behind the SQL API.  Each runs through SPI as the extension's owner
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

extern Oid fl_lease_relid(void);
extern Oid fl_rel_owner(Oid relid);
extern void fl_begin(FlSession *session);
extern void fl_end(FlSession *session);
extern uint64 fl_run(FlStmt *stmt, Datum *values, const char *nulls, bool read_only);
extern uint64 fl_run_latest(FlStmt *stmt, Datum *values, const char *nulls);
extern bool fl_run_or_undo(FlStmt *stmt, Datum *values, const char *nulls);
extern int64 fl_get_int64(uint64 row, int col, bool *isnull);
extern Oid fl_extension_schema(void);

/* asowner.c: SPI for statements that are not FlStmts (claim.c's, run as the caller) */
extern SPIPlanPtr fl_keep_plan(const char *sql, int nargs, Oid *argtypes, int cursor_options);
extern uint64 fl_spi_result(const char *sql, int rc);
extern void fl_spi_connect(void);
extern void fl_spi_finish(void);

/* asowner.c: an internal subtransaction, as PL/pgSQL runs an EXCEPTION block */
typedef struct FlSubxact
{
	MemoryContext cxt;
	ResourceOwner owner;
} FlSubxact;

extern void fl_subxact_begin(FlSubxact *x);
extern void fl_subxact_end(FlSubxact *x, bool commit);

/*
 * The SQL entry points of each version of the extension's scripts: a database keeps its
 * version's definitions (and its lease table's columns) until ALTER EXTENSION ... UPDATE.
 */
typedef enum FlApi
{
	FL_API_0_1 = 1, /* no granted_how, no lock_delay, no counts or history */
	FL_API_0_2 = 2  /* also 0.3.0's: sessions are found from the lease table's columns */
} FlApi;

/* How a lease was granted: fencelock.lease.granted_how, history's granted_how in words. */
typedef enum FlGrantedHow
{
	FL_GRANTED_NEW = 'n',           /* the resource's first grant, or after a purge */
	FL_GRANTED_AFTER_RELEASE = 'r', /* after a release, a revoke or the holder's session ended */
	FL_GRANTED_AFTER_EXPIRY = 'e',  /* to the same owner, after its own lease expired */
	FL_GRANTED_TAKEOVER = 't',      /* to another owner, after the holder's lease expired */
	FL_GRANTED_REVOKED = 'v'        /* not a grant: revoke's new fence, nobody holds it */
} FlGrantedHow;

/* lease.c: one grant attempt, shared by acquire, waiting acquire and acquire_all */
typedef struct FlGrant
{
	bool granted;
	bool is_new; /* a new grant (new fence), not the same owner's live lease */
	char how;    /* an FlGrantedHow */
	int64 fence;
	TimestampTz granted_at;
	TimestampTz expires_at;
	TimestampTz holder_expires; /* busy: when the holder's lease runs out; 0 if unknown */
} FlGrant;

extern void fl_try_acquire(text *resource, text *owner, int64 ttl, FlApi api, bool want_expiry,
						   FlGrant *g);
extern void fl_count_grant(text *resource, const FlGrant *g);
extern bool fl_release(text *resource, text *owner, FlApi api);

/* trigger.c: whether a function is fencelock.fence_trigger (by its C symbol, not its name) */
extern bool fl_is_fence_trigger(Oid fn);

/* notify.c: lease events on channel "fencelock" (fencelock.notify = on) */
#define FENCELOCK_NOTIFY_CHANNEL "fencelock"
extern void fl_notify(const char *event, text *resource, int64 fence, const char *holder);

/* session.c: leases that end with the session that took them */
extern int64 fl_grant_session;
extern int64 fl_session_id(void);
extern void fl_session_bound(text *resource);

/* history.c: the optional record of grants and their endings (fencelock.history = on) */
extern void fl_history_grant(text *resource, text *owner, FlGrant *g);
extern void fl_history_update(text *resource, int64 fence, TimestampTz now, TimestampTz expires,
							  bool released);
extern void fl_history_purge(Datum gone, TimestampTz now);
extern void fl_history_revoke(text *resource, int64 fence, TimestampTz now);
extern void fl_history_session_end(Datum resource, Datum fence, TimestampTz now, bool released);

/* Rows of history a grant deletes, now and then, and a purge in each of its steps. */
#define FL_HISTORY_PRUNE_BATCH 500
#define FL_HISTORY_PURGE_BATCH 10000

#endif /* FENCELOCK_H */
