/*
 * chaos.h — fencelock chaos harness: shared declarations.
 *
 * The harness forks worker processes that take short leases, write a fenced business row and a
 * history row in one transaction, and release.  The parent freezes workers with SIGSTOP (as a GC
 * pause or a VM freeze would) so that their writes land after their lease ran out, then audits
 * what the database accepted.  See doc/chaos.md.
 */
#ifndef CHAOS_H
#define CHAOS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "libpq-fe.h"

#define CHAOS_MAX_WORKERS   64
#define CHAOS_MAX_RESOURCES 1000
#define CHAOS_NAME_LEN      32

/* SQLSTATEs raised by fencelock.fence_trigger(). */
#define SQLSTATE_STALE_FENCE "FL001"

/* The workload (-m): which kind of lease the workers take. */
typedef enum ChaosMode
{
	MODE_EXCLUSIVE, /* acquire; the per-row and lease-bound tables and the sets */
	MODE_SHARED,    /* readers acquire_shared, writers acquire, one lease-bound log */
	MODE_PERMIT     /* acquire_permit(..., permits => K), the same log with slots */
} ChaosMode;

#define MODE_BIT(m) (1 << (m))
#define MODES_ALL   (MODE_BIT(MODE_EXCLUSIVE) | MODE_BIT(MODE_SHARED) | MODE_BIT(MODE_PERMIT))
#define MODES_GROUP (MODE_BIT(MODE_SHARED) | MODE_BIT(MODE_PERMIT))

typedef struct ChaosOptions
{
	ChaosMode mode;
	int permits;          /* MODE_PERMIT: the K of acquire_permit */
	int writer_pct;       /* MODE_SHARED: share of rounds that take the exclusive lease */
	const char *conninfo; /* NULL: libpq environment */
	int workers;
	int resources;
	int seconds;
	int ttl_ms;
	int stall_pct;      /* share of writes frozen past the lease at the handshake */
	int random_stop_ms; /* mean gap between random freezes; 0 disables them */
	uint64_t seed;
	bool allow_no_stale; /* do not fail a run that saw no stale rejection */
	bool keep_logs;
	bool verbose;
	char logdir[256];
} ChaosOptions;

/* Counters a worker keeps and reports in the last line of its log ("S ..."). */
typedef struct WorkerStats
{
	long attempts; /* acquire calls */
	long busy;     /* acquire returned NULL: someone else holds a live lease */
	long grants;
	long frozen;            /* handshakes the parent answered with a freeze */
	long frozen_past_lease; /* ... after which the worker's lease had run out */
	long late_writes;       /* writes sent when the lease had surely run out */
	long late_accepted;
	long stale;    /* writes rejected with FL001 */
	long accepted; /* writes whose COMMIT succeeded */
	long releases;
	long overruns; /* release() returned false */
	long errors;   /* anything unexpected */
	/* the lease-bound table (chaos_leased), written in its own transaction after the above */
	long lb_accepted;
	long lb_stale;
	long lb_late_accepted; /* ... accepted although sent when the lease had surely run out */
	/* the read-modify-write sets: one add per round to each, read before the handshake */
	long set_row_acked; /* per-row fenced set (chaos_set_row) */
	long set_row_stale;
	long set_lease_acked; /* lease-bound set (chaos_set_lease) */
	long set_lease_stale;
	/* the shared and permit workloads (their writes count in accepted and stale above) */
	long reader_grants; /* MODE_SHARED: acquire_shared grants */
	long reader_accepted;
	long reader_stale;
	long slot_unknown; /* MODE_PERMIT: the holder's row was gone when its slot was read */
} WorkerStats;

#define WORKER_STATS_FIELDS 23

/* A worker tells the parent it is about to write; the parent answers with one byte. */
typedef struct ChaosMsg
{
	int32_t worker;
	int32_t kind;
} ChaosMsg;

#define MSG_ABOUT_TO_WRITE 1
#define REPLY_GO           'G'
#define REPLY_FROZEN       'S'

/* util.c */
extern uint64_t rng_next(uint64_t *state);
extern int64_t rng_range(uint64_t *state, int64_t lo, int64_t hi);
extern double rng_unit(uint64_t *state);
extern int64_t now_us(void);
extern void sleep_us(int64_t us);
extern PGconn *chaos_connect(const char *conninfo, const char *appname);
extern const char *result_sqlstate(const PGresult *res);
extern bool exec_ok(PGconn *conn, const char *sql, const char *what);
extern void resource_name(char *buf, size_t len, int index);
extern void owner_name(char *buf, size_t len, int index);
extern const char *mode_name(ChaosMode mode);
extern void chaos_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* worker.c */
extern void worker_main(const ChaosOptions *opt, int id, int to_parent, int from_parent,
						int64_t deadline) __attribute__((noreturn));

/* audit.c */
typedef struct RunFigures
{
	WorkerStats totals;
	int workers_reported;  /* workers whose log has a summary line */
	long frozen_at_write;  /* freezes the parent injected at the handshake */
	long frozen_at_random; /* freezes the parent injected at random moments */
	int workers_failed;    /* exited non-zero or had to be killed */
	double elapsed_s;
	bool cut_short; /* interrupted, or not every worker could be started */
} RunFigures;

extern bool setup_schema(PGconn *conn, const ChaosOptions *opt);
extern bool load_worker_logs(PGconn *conn, const ChaosOptions *opt, RunFigures *fig);
extern int audit_and_report(PGconn *conn, const ChaosOptions *opt, RunFigures *fig);

#endif /* CHAOS_H */
