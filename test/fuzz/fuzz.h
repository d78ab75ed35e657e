/*
 * fuzz.h — fencelock's SQL fuzzer: shared declarations.
 *
 * One process drives several libpq connections at once (asynchronous queries, one event loop),
 * each as one of four roles, calling every SQL entry point of the extension (read from the
 * catalog at start) with valid and hostile arguments, inside transactions with savepoints and
 * two-phase commits, with tiny statement_timeouts on fresh sessions.  It checks the invariants
 * as it goes and at the end.  See doc/testing.md, "The fuzzer".
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "libpq-fe.h"

#define FZ_MAX_SLOTS   32
#define FZ_MAX_FUNCS   128
#define FZ_MAX_ARGS    16
#define FZ_MAX_VIEWS   32
#define FZ_NAME_LEN    64
#define FZ_HIST        256 /* statements of a session kept for a violation's report */
#define FZ_MAX_PREFIX  16
#define FZ_MAX_PENDING 256

/* The four roles; a slot (connection) plays one for its whole life. */
typedef enum FzRole
{
	ROLE_SUPER,  /* the user the fuzzer connects as */
	ROLE_APP,    /* fuzz_app: granted the reserved prefix 'fz-app:' */
	ROLE_CREATE, /* fuzz_creator: CREATE on schema fuzz_ws, granted 'fz-app:cr:' */
	ROLE_PLAIN,  /* fuzz_plain: the defaults */
	FZ_NROLES
} FzRole;

typedef struct FzArg
{
	char name[FZ_NAME_LEN]; /* "" when unnamed */
	char type[FZ_NAME_LEN]; /* format_type() */
} FzArg;

/* What a call's result means for the invariants. */
typedef enum FzKind
{
	KIND_OTHER,
	KIND_GRANT,     /* acquire, acquire_shared, acquire_permit, acquire_xact: a fence or NULL */
	KIND_GRANT_ALL, /* acquire_all: bigint[] or NULL */
	KIND_GUARDED    /* renew, release, release_all, set_value, assert_fence */
} FzKind;

typedef struct FzFunc
{
	char name[FZ_NAME_LEN];
	int nargs;
	int ndefaults;
	bool retset;
	bool variadic;
	bool trigger; /* returns trigger or event_trigger: only callable as one */
	char ret[FZ_NAME_LEN];
	FzArg args[FZ_MAX_ARGS];
	FzKind kind;
} FzFunc;

typedef struct FzOptions
{
	const char *conninfo;
	int seconds;
	int slots; /* connections, spread over the four roles */
	uint64_t seed;
	const char *server_log; /* scanned for crashes and assertion failures; NULL: not */
	bool verbose;
} FzOptions;

/* One grant the fuzzer saw returned, not yet known to be committed. */
typedef struct FzGrant
{
	char *resource;
	char *owner;
	int64_t fence;
} FzGrant;

/* What a built call names: the resources and owner the invariants judge it by. */
#define FZ_CALL_RES 8
#define FZ_RES_LEN  1100
typedef struct FzCallInfo
{
	int nres;
	char res[FZ_CALL_RES][FZ_RES_LEN];
	bool res_unknown; /* a resource argument was an expression, or too many */
	char owner[320];
	bool owner_unknown; /* an expression (a fresh uuid): an owner of its own */
} FzCallInfo;

/* The catalog, read at start. */
typedef struct FzCatalog
{
	FzFunc funcs[FZ_MAX_FUNCS];
	int nfuncs;
	char views[FZ_MAX_VIEWS][FZ_NAME_LEN];
	int nviews;
	char role_name[FZ_NROLES][FZ_NAME_LEN];
	/* the judged reservations: prefix -> may role R use it */
	char prefixes[FZ_MAX_PREFIX][FZ_NAME_LEN];
	bool prefix_allows[FZ_MAX_PREFIX][FZ_NROLES];
	int nprefixes;
} FzCatalog;

/* Counters for the summary. */
typedef struct FzStats
{
	long statements;
	long by_role[FZ_NROLES];
	long ok;
	long errors;
	long timeouts; /* 57014 */
	long refused;  /* 42501 */
	long grants_committed;
	long grants_rolled_back;
	long prepared;
	long commit_prepared;
	long rollback_prepared;
	long savepoints_rolled_back;
	long reconnects;
	long tiny_timeouts; /* fresh sessions whose first statements ran under a tiny timeout */
	long checks;        /* rounds of the running checks */
	long observations;  /* current_fence values read */
	long writes_ok;     /* fenced-table writes that changed rows */
	char top_states[64][6];
	long top_counts[64];
	int ntop;
} FzStats;

typedef enum FzViolation
{
	V_TWO_OWNERS,   /* one (resource, fence) committed to two owners */
	V_PERMITS,      /* more live holders than permits, or two in one slot */
	V_RESERVED,     /* a reserved name used by a role its grantees do not include */
	V_FENCE_DOWN,   /* current_fence lower than a fence seen before */
	V_INTERNAL,     /* SQLSTATE XX... */
	V_LOST_BACKEND, /* a connection lost without a reason the fuzzer gave */
	V_SERVER_LOG,   /* a crash or an assertion failure in the server log */
	V_HISTORY,      /* fencelock.history disagrees with a committed grant */
	V_AMCHECK,      /* amcheck found corruption */
	FZ_NVIOLATIONS
} FzViolation;

#define SQL_LEN 8192

typedef enum Act
{
	ACT_CALL,
	ACT_VIEW,
	ACT_WRITE,
	ACT_SET,
	ACT_BEGIN,
	ACT_SAVEPOINT,
	ACT_ROLLBACK_TO,
	ACT_COMMIT,
	ACT_ROLLBACK,
	ACT_PREPARE,
	ACT_FINISH_PREPARED,
	ACT_SCRATCH
} Act;

typedef struct Slot
{
	int id;
	FzRole role;
	PGconn *conn;
	uint64_t rng;
	int session;   /* sessions started by this slot */
	int statement; /* statements sent in this session */
	int budget;    /* statements left before the session ends */
	int tiny_left; /* statements left under a tiny statement_timeout; 0: none, -1: reset it */
	bool busy;
	int64_t sent_at;
	Act act;
	const FzFunc *func;
	FzCallInfo info;
	char judged[FZ_RES_LEN]; /* a write's lease */
	char sql[SQL_LEN];
	/* the transaction */
	int tx_left;
	int nsavepoints;
	int marks[16];
	FzGrant pending[FZ_MAX_PENDING];
	int npending;
	/* a prepared transaction of this slot, waiting for COMMIT / ROLLBACK PREPARED */
	char gid[64];
	bool commit_it;
	FzGrant prepared[FZ_MAX_PENDING];
	int nprepared;
	int gids;
	/* the session's last statements, printed with a violation */
	char hist[FZ_HIST][200];
	char hist_state[FZ_HIST][8];
	int nhist;
} Slot;

/* fuzz.c */
extern FzOptions opt;
extern FzCatalog cat;
extern FzStats st;
extern int outstanding_prepared; /* prepared transactions not yet committed or rolled back */
extern PGconn *connect_retrying(const char *appname);

/* lease/session.c */
extern bool fz_session_start(Slot *s);
extern void fz_session_end(Slot *s);
extern void fz_send_next(Slot *s);
extern void fz_poll_slot(Slot *s, PGresult **last, PGresult **error);
extern void fz_finish_statement(Slot *s, PGresult *last, PGresult *error, bool lost);
extern void fz_free_grants(FzGrant *g, int n);

/* util.c */
extern uint64_t fz_rng(uint64_t *state);
extern int64_t fz_range(uint64_t *state, int64_t lo, int64_t hi);
extern bool fz_chance(uint64_t *state, int percent);
extern int64_t fz_now_us(void);
extern char *fz_strdup(const char *s);
extern const char *fz_sqlstate(const PGresult *res);
extern PGresult *fz_exec(PGconn *conn, const char *sql);
extern bool fz_exec_ok(PGconn *conn, const char *sql, const char *what);
extern void fz_count_state(FzStats *st, const char *state);
extern const char *fz_printable(const char *s, char *buf, size_t len);

/* gen.c: the catalog and the statements */
extern bool fz_read_catalog(PGconn *conn, FzCatalog *cat);
extern void fz_build_call(const FzCatalog *cat, const FzFunc *f, FzRole role, uint64_t *rng,
						  char *buf, size_t len, FzCallInfo *info);
extern void fz_build_write(const FzCatalog *cat, FzRole role, uint64_t *rng, char *buf, size_t len,
						   char *judged_name, size_t judged_len);
extern void fz_note_fence(const char *resource, int64_t fence);
extern const char *fz_pool_resource(int i);
extern int fz_pool_size(void);
extern bool fz_role_may_use(const FzCatalog *cat, FzRole role, const char *name);
extern bool fz_name_judged(const char *name);

/* check.c: the invariants */
extern void fz_check_init(void);
extern void fz_commit_grants(const FzCatalog *cat, FzGrant *g, int n, FzStats *st);
extern void fz_observe(PGconn *admin, FzStats *st);
extern void fz_violation(FzViolation v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern long fz_violations(FzViolation v);
extern const char *fz_violation_name(FzViolation v);
extern uint64_t fz_seed;
extern int64_t fz_started_us;         /* when the statements began */
extern int64_t fz_first_violation_us; /* 0: none yet */
extern void fz_final_audit(PGconn *admin, FzStats *st, bool *amcheck_ran);
extern long fz_log_offset(const char *path);
extern void fz_scan_log(const char *path, long offset);

#endif /* FUZZ_H */
