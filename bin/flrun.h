/*
 * flrun.h
 *		Shared declarations of fencelock-run, a libpq client that holds a
 *		fencelock lease while it runs a command.
 *
 * The program is split by concern:
 *		fencelock-run.c	options and the acquire / supervise / release flow
 *		flrun_util.c	messages, clocks, durations, randomness
 *		flrun_proc.c	signals, the child process and bounded waiting
 *		flrun_db.c		non-blocking libpq calls with deadlines
 */
#ifndef FLRUN_H
#define FLRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "libpq-fe.h"

#ifndef FENCELOCK_VERSION
#define FENCELOCK_VERSION "unknown"
#endif

/*
 * Exit codes.  Codes 64-78 follow sysexits.h; 126 and 127 follow the shell
 * (and env(1), timeout(1)) for a command that cannot be run.  Otherwise the
 * command's own status is passed through, 128+N when it died of signal N.
 */
#define FLRUN_EXIT_USAGE    64  /* EX_USAGE: bad options */
#define FLRUN_EXIT_OSERR    71  /* EX_OSERR: fork, pipe, ... failed */
#define FLRUN_EXIT_BUSY     75  /* EX_TEMPFAIL: held by another owner */
#define FLRUN_EXIT_LOST     76  /* the lease was lost while running */
#define FLRUN_EXIT_NOCONN   77  /* cannot connect to the server */
#define FLRUN_EXIT_SERVER   78  /* the server rejected a fencelock call */
#define FLRUN_EXIT_NOEXEC   126 /* command found but not executable */
#define FLRUN_EXIT_NOTFOUND 127 /* command not found */

#if defined(__GNUC__) || defined(__clang__)
#define FLRUN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define FLRUN_NORETURN     __attribute__((noreturn))
#else
#define FLRUN_PRINTF(f, a)
#define FLRUN_NORETURN
#endif

/* Milliseconds; instants are on flrun_now()'s monotonic clock. */
typedef int64_t msec_t;

#define FLRUN_FOREVER INT64_MAX

/* flrun_util.c */
extern bool flrun_verbose;

extern void flrun_error(const char *fmt, ...) FLRUN_PRINTF(1, 2);
extern void flrun_trace(const char *fmt, ...) FLRUN_PRINTF(1, 2);
extern msec_t flrun_now(void);
extern msec_t flrun_wallclock(void);
extern bool flrun_parse_duration(const char *text, msec_t *result);
extern const char *flrun_format_duration(msec_t ms, char *buf, size_t len);
extern bool flrun_random_bytes(unsigned char *buf, size_t len);
extern msec_t flrun_jitter(msec_t base);
extern char *flrun_default_owner(void);
extern msec_t flrun_min(msec_t a, msec_t b);
extern msec_t flrun_max(msec_t a, msec_t b);

/* flrun_proc.c */
typedef enum FlWait
{
	FL_WAIT_READY,      /* the socket is ready */
	FL_WAIT_TIMEOUT,    /* the deadline passed */
	FL_WAIT_INTERRUPTED /* the child exited or a stop was asked */
} FlWait;

extern bool flrun_signals_init(void);
extern FlWait flrun_wait(int sock, bool for_read, bool for_write, msec_t deadline);
extern void flrun_stop_interrupts(bool on);
extern int flrun_stop_signal(void);
extern bool flrun_spawn(char **argv, pid_t *child);
extern bool flrun_child_done(int *status);
extern void flrun_stop_child(msec_t grace);
extern int flrun_status_to_exit(int status);

/* flrun_db.c */
typedef enum FlDbStatus
{
	FL_DB_OK,         /* a result row is in *res */
	FL_DB_SQLERROR,   /* the server raised an error; see *res */
	FL_DB_CONNFAIL,   /* no usable connection; see flrun_db_error */
	FL_DB_TIMEOUT,    /* the deadline passed; connection dropped */
	FL_DB_INTERRUPTED /* flrun_wait was interrupted; dropped */
} FlDbStatus;

extern bool flrun_db_setup(const char *conninfo, msec_t statement_timeout);
extern FlDbStatus flrun_db_connect(msec_t deadline);
extern FlDbStatus flrun_db_query(const char *sql, int nparams, const char *const *values,
								 msec_t deadline, PGresult **res, msec_t *sent_at);
extern const char *flrun_db_error(void);
extern void flrun_db_close(void);
extern bool flrun_db_connected(void);

#endif /* FLRUN_H */
