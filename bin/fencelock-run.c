/*
 * fencelock-run.c
 *		flock(1) for a whole fleet: run a command while holding a fencelock
 *		lease.
 *
 *		fencelock-run -r order-scan -t 30s -- ./scan-expired-orders
 *
 * Acquires the lease with fencelock.acquire(), runs the command with the
 * fence in its environment, renews every third of the TTL, and stops the
 * command (SIGTERM to its process group, SIGKILL after a grace period) when
 * the lease is lost or cannot be renewed before its local deadline.  The
 * local deadline is the TTL counted from the moment the last successful
 * acquire or renew was sent, on a monotonic clock: the server's lease cannot
 * end before it.  See doc/fencelock-run.md.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flrun.h"

#define ACQUIRE_SQL "SELECT fencelock.acquire($1, $2, $3::interval)"
/* Renew and release name their grant (0.4.0): a retry can never touch a newer lease. */
#define RENEW_SQL   "SELECT fencelock.renew($1, $2, $3::interval, $4::bigint)"
#define RELEASE_SQL "SELECT fencelock.release($1, $2, $3::bigint)"
#define HOLDER_SQL                                                                                 \
	"SELECT holder, fence, pg_catalog.round(pg_catalog.date_part('epoch', "                        \
	"remaining)::pg_catalog.numeric, 1) FROM fencelock.leases "                                    \
	"WHERE resource = $1 AND state = 'held'"

#define MIN_TTL          100  /* ms; below this renewing is pointless */
#define MAX_RESOURCE_LEN 1024 /* bytes, as fencelock.acquire checks */
#define MAX_OWNER_LEN    256
#define MAX_ATTEMPT      30000 /* ms: longest wait for one call */
#define FIRST_POLL       50    /* ms: first pause while waiting for a lease */
#define MAX_POLL         2000  /* ms: longest pause, if TTL/4 is longer */

typedef struct Options
{
	const char *resource;
	const char *owner;
	const char *conninfo;
	msec_t ttl;
	msec_t wait; /* 0: try once */
	msec_t grace;
	int busy_exit;
	bool wait_given;
	char **command;
} Options;

typedef struct Lease
{
	char fence[32];
	char ttl_param[48];  /* the TTL as interval input */
	msec_t attempt;      /* bound on one call, also statement_timeout */
	msec_t sent_at;      /* last successful acquire/renew was sent */
	msec_t deadline;     /* sent_at + ttl: the lease is ours until */
	msec_t expires_wall; /* the same on the wall clock, at acquire */
} Lease;

typedef enum RenewResult
{
	RENEWED,
	NOT_HELD,
	RENEW_FAILED,
	RENEW_INTERRUPTED
} RenewResult;

static const char *progname = "fencelock-run";

/* why the last acquire attempt found the lease busy, if not a plain NULL */
static char busy_reason[512];

static void
usage(FILE *out)
{
	fprintf(out,
			"%s runs a command while it holds a fencelock lease on a resource,\n"
			"renews the lease in the background, and stops the command if the\n"
			"lease is lost.\n\n",
			progname);
	fprintf(out,
			"Usage:\n"
			"  %s [OPTION]... -r RESOURCE [--] COMMAND [ARG]...\n\n",
			progname);
	fprintf(out, "Options:\n"
				 "  -r, --resource=NAME       resource to lease (required)\n"
				 "  -t, --ttl=DURATION        lease time to live, renewed every third of it\n"
				 "                            (default 30s, at least 100ms)\n"
				 "  -o, --owner=TOKEN         owner token (default: HOST:PID:RANDOM, new per run)\n"
				 "  -w, --wait=DURATION       wait up to DURATION for a busy lease\n"
				 "                            (default: try once)\n"
				 "  -k, --grace=DURATION      after the lease is lost, time between SIGTERM\n"
				 "                            and SIGKILL to the command (default 5s)\n"
				 "  -E, --conflict-exit-code=N  exit code when the lease is busy (default 75)\n"
				 "  -d, --dbname=CONNINFO     database name or connection string\n"
				 "                            (default: PGHOST, PGDATABASE, ... and ~/.pgpass)\n"
				 "  -v, --verbose             report lease events on stderr\n"
				 "  -h, --help                show this help, then exit\n"
				 "  -V, --version             output version information, then exit\n\n");
	fprintf(out, "DURATION is a number with an optional unit: ms, s (the default), m or h,\n"
				 "e.g. 500ms, 30s, 1.5m, 1h.\n\n"
				 "The command finds FENCELOCK_RESOURCE, FENCELOCK_OWNER, FENCELOCK_FENCE and\n"
				 "FENCELOCK_EXPIRES (Unix time, whole seconds) in its environment.\n\n"
				 "Exit status: the command's own (128+N if it died of signal N);\n"
				 "64 bad usage, 71 system error, 75 lease busy (see -E), 76 lease lost,\n"
				 "77 cannot connect, 78 the server refused a fencelock call,\n"
				 "126 command not executable, 127 command not found.\n");
}

static void usage_error(const char *fmt, ...) FLRUN_PRINTF(1, 2) FLRUN_NORETURN;

/* Report bad usage the way PostgreSQL's tools do, and exit 64. */
static void
usage_error(const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	flrun_error("%s", msg);
	fprintf(stderr,
			"Usage: %s [OPTION]... -r RESOURCE [--] COMMAND [ARG]...\n"
			"Try \"%s --help\" for more information.\n",
			progname, progname);
	exit(FLRUN_EXIT_USAGE);
}

static msec_t
duration_arg(const char *arg, const char *flag)
{
	msec_t ms;

	if (!flrun_parse_duration(arg, &ms))
		usage_error("invalid duration \"%s\" for %s (use e.g. 500ms, 30s, 2m, "
					"1h or plain seconds)",
					arg, flag);
	return ms;
}

static int
exit_code_arg(const char *arg)
{
	char *end;
	long n;

	if (!isdigit((unsigned char) arg[0]))
		usage_error("invalid exit code \"%s\" for -E (use 0 to 255)", arg);
	n = strtol(arg, &end, 10);
	if (*end != '\0' || n > 255)
		usage_error("invalid exit code \"%s\" for -E (use 0 to 255)", arg);
	return (int) n;
}

static void
check_once(bool *seen, int c)
{
	char flag[3] = {'-', (char) c, '\0'};

	if (seen[c])
		usage_error("option %s given more than once", flag);
	seen[c] = true;
}

static void
bad_option(int argc, char **argv, int c)
{
	const char *text = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	char flag[3] = {'-', (char) optopt, '\0'};

	if (strncmp(text, "--", 2) == 0)
		usage_error(c == ':' ? "option \"%s\" requires an argument" : "invalid option \"%s\"",
					text);
	usage_error(c == ':' ? "option %s requires an argument" : "invalid option %s", flag);
}

static void
check_options(Options *opt)
{
	if (opt->resource == NULL)
		usage_error("%s", "no resource given (use -r RESOURCE)");
	if (opt->resource[0] == '\0')
		usage_error("%s", "the resource name must not be empty");
	if (strlen(opt->resource) > MAX_RESOURCE_LEN)
		usage_error("%s", "the resource name is longer than 1024 bytes");
	if (opt->owner != NULL && opt->owner[0] == '\0')
		usage_error("%s", "the owner must not be empty");
	if (opt->owner != NULL && strlen(opt->owner) > MAX_OWNER_LEN)
		usage_error("%s", "the owner is longer than 256 bytes");
	if (opt->conninfo != NULL && opt->conninfo[0] == '\0')
		usage_error("%s", "the connection string given with -d is empty");
	if (opt->ttl < MIN_TTL)
		usage_error("%s", "the TTL must be at least 100ms");
	if (opt->command == NULL || opt->command[0] == NULL)
		usage_error("%s", "no command given");
}

static void
parse_options(int argc, char **argv, Options *opt)
{
	static const struct option long_options[] = {
		{"resource", required_argument, NULL, 'r'},
		{"ttl", required_argument, NULL, 't'},
		{"owner", required_argument, NULL, 'o'},
		{"wait", required_argument, NULL, 'w'},
		{"grace", required_argument, NULL, 'k'},
		{"conflict-exit-code", required_argument, NULL, 'E'},
		{"dbname", required_argument, NULL, 'd'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}};
	bool seen[256] = {false};
	int c;

	memset(opt, 0, sizeof(*opt));
	opt->ttl = 30000;
	opt->grace = 5000;
	opt->busy_exit = FLRUN_EXIT_BUSY;

	opterr = 0;
	/* "+": stop at the command, whose own options are not ours */
	while ((c = getopt_long(argc, argv, "+:r:t:o:w:k:E:d:vhV", long_options, NULL)) != -1)
	{
		if (c != 'v' && c != '?' && c != ':')
			check_once(seen, c);
		switch (c)
		{
			case 'r':
				opt->resource = optarg;
				break;
			case 't':
				opt->ttl = duration_arg(optarg, "-t");
				break;
			case 'o':
				opt->owner = optarg;
				break;
			case 'w':
				opt->wait = duration_arg(optarg, "-w");
				opt->wait_given = opt->wait > 0;
				break;
			case 'k':
				opt->grace = duration_arg(optarg, "-k");
				break;
			case 'E':
				opt->busy_exit = exit_code_arg(optarg);
				break;
			case 'd':
				opt->conninfo = optarg;
				break;
			case 'v':
				flrun_verbose = true;
				break;
			case 'h':
				usage(stdout);
				exit(0);
			case 'V':
				printf("%s (fencelock) %s\n", progname, FENCELOCK_VERSION);
				exit(0);
			default:
				bad_option(argc, argv, c);
		}
	}
	opt->command = argv + optind;
	check_options(opt);
}

/* Clients should retry these: the row was locked, or the server is busy. */
static bool
sqlstate_is_contention(const char *state)
{
	return strcmp(state, "57014") == 0 || /* statement_timeout */
		   strcmp(state, "55P03") == 0 || /* lock_not_available */
		   strcmp(state, "40001") == 0 || /* serialization_failure */
		   strcmp(state, "40P01") == 0;   /* deadlock_detected */
}

/* ... and these mean: this server cannot serve us now; try another time. */
static bool
sqlstate_is_unavailable(const char *state)
{
	return strncmp(state, "08", 2) == 0 ||   /* connection exceptions */
		   strncmp(state, "57P0", 4) == 0 || /* shutting down, starting up */
		   strcmp(state, "53300") == 0 ||    /* too_many_connections */
		   strcmp(state, "25006") == 0;      /* read-only: a standby */
}

static const char *
sqlstate_of(const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return state ? state : "XX000";
}

static const char *
primary_message(const PGresult *res)
{
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	return msg ? msg : PQresultErrorMessage(res);
}

/* The single value a SELECT of one function returned ("" if none). */
static const char *
one_value(const PGresult *res)
{
	if (PQntuples(res) != 1 || PQnfields(res) < 1 || PQgetisnull(res, 0, 0))
		return "";
	return PQgetvalue(res, 0, 0);
}

/*
 * How long to wait for one call locally: the server's statement_timeout
 * (lease->attempt) plus a margin, so that a slow statement is reported by
 * the server (57014) rather than taken for a lost connection.
 */
static msec_t
call_limit(const Lease *lease)
{
	return lease->attempt + flrun_min(lease->attempt / 2, 1000);
}

/* For the busy message: who holds it, when known.  Best effort. */
static void
report_busy(const Options *opt, const Lease *lease, const char *waited)
{
	const char *params[1] = {opt->resource};
	PGresult *res = NULL;
	msec_t sent;
	char holder[400] = "";

	if (flrun_db_connected() &&
		flrun_db_query(HOLDER_SQL, 1, params, flrun_now() + call_limit(lease), &res, &sent) ==
			FL_DB_OK &&
		PQntuples(res) == 1)
		snprintf(holder, sizeof(holder), ": held by role \"%s\" with fence %s, %s s left",
				 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2));
	PQclear(res);
	if (holder[0] == '\0' && busy_reason[0] != '\0')
		snprintf(holder, sizeof(holder), ": %s", busy_reason);
	flrun_error("resource \"%s\" is busy%s%s", opt->resource, holder, waited);
}

/*
 * Release the lease, if it can still be ours.  Bounded by the local
 * deadline, after which the lease lapses by itself anyway.
 */
static void
release_lease(const Options *opt, const Lease *lease)
{
	const char *params[3] = {opt->resource, opt->owner, lease->fence};
	PGresult *res = NULL;
	msec_t now = flrun_now();
	msec_t limit = flrun_min(lease->deadline, now + call_limit(lease));
	msec_t sent;
	FlDbStatus st;

	if (now >= lease->deadline)
	{
		flrun_trace("lease on \"%s\" has expired: nothing to release", opt->resource);
		return;
	}
	flrun_stop_interrupts(false);
	st = flrun_db_connect(limit);
	if (st == FL_DB_OK)
		st = flrun_db_query(RELEASE_SQL, 3, params, limit, &res, &sent);
	if (st == FL_DB_OK && strcmp(one_value(res), "t") == 0)
		flrun_trace("released \"%s\" (fence %s)", opt->resource, lease->fence);
	else if (st == FL_DB_OK)
		flrun_error("lease on \"%s\" (fence %s) was no longer held at release", opt->resource,
					lease->fence);
	else
		flrun_error("cannot release lease on \"%s\" (it expires by itself): %s", opt->resource,
					st == FL_DB_SQLERROR ? primary_message(res) : flrun_db_error());
	PQclear(res);
	flrun_db_close();
}

/*
 * One acquire attempt: 0 when the lease is ours, else the exit code that
 * describes why not (FLRUN_EXIT_BUSY and FLRUN_EXIT_NOCONN may be retried).
 */
static int
try_acquire(const Options *opt, Lease *lease)
{
	const char *params[3] = {opt->resource, opt->owner, lease->ttl_param};
	PGresult *res = NULL;
	msec_t wall;
	FlDbStatus st;
	int rc;

	flrun_stop_interrupts(true);
	st = flrun_db_connect(FLRUN_FOREVER);
	if (st == FL_DB_INTERRUPTED)
		return 128 + flrun_stop_signal();
	if (st != FL_DB_OK)
		return FLRUN_EXIT_NOCONN;

	/* a stop signal now must not lose track of a granted lease */
	flrun_stop_interrupts(false);
	busy_reason[0] = '\0';
	wall = flrun_wallclock();
	st = flrun_db_query(ACQUIRE_SQL, 3, params, flrun_now() + call_limit(lease), &res,
						&lease->sent_at);
	if (st == FL_DB_OK && one_value(res)[0] != '\0')
	{
		snprintf(lease->fence, sizeof(lease->fence), "%s", one_value(res));
		lease->deadline = lease->sent_at + opt->ttl;
		lease->expires_wall = wall + opt->ttl;
		rc = 0;
	}
	else if (st == FL_DB_OK)
		rc = FLRUN_EXIT_BUSY;
	else if (st != FL_DB_SQLERROR)
		rc = FLRUN_EXIT_NOCONN;
	else if (sqlstate_is_contention(sqlstate_of(res)))
	{
		snprintf(busy_reason, sizeof(busy_reason), "the acquire gave up waiting: %s (SQLSTATE %s)",
				 primary_message(res), sqlstate_of(res));
		rc = FLRUN_EXIT_BUSY;
	}
	else if (sqlstate_is_unavailable(sqlstate_of(res)))
	{
		flrun_trace("acquire failed: %s", primary_message(res));
		flrun_db_close();
		rc = FLRUN_EXIT_NOCONN;
	}
	else
	{
		flrun_error("cannot acquire \"%s\": %s (SQLSTATE %s)", opt->resource, primary_message(res),
					sqlstate_of(res));
		if (strcmp(sqlstate_of(res), "42883") == 0 || strcmp(sqlstate_of(res), "3F000") == 0)
			flrun_error("is the fencelock extension installed in this database?");
		rc = FLRUN_EXIT_SERVER;
	}
	PQclear(res);
	if (rc == 0 && flrun_stop_signal() != 0)
	{
		release_lease(opt, lease);
		return 128 + flrun_stop_signal();
	}
	return rc;
}

/*
 * Acquire the lease: once, or with -w until the wait is over, pausing with
 * jittered exponential backoff capped at TTL/4 (and 2s).  Returns 0 when
 * the lease is ours, else the exit code.
 */
static int
acquire_lease(const Options *opt, Lease *lease)
{
	msec_t give_up = flrun_now() + opt->wait;
	msec_t pause = FIRST_POLL;
	msec_t cap = flrun_max(FIRST_POLL, flrun_min(opt->ttl / 4, MAX_POLL));
	char buf[32];
	char waited[64] = "";

	for (;;)
	{
		int rc = try_acquire(opt, lease);
		msec_t now;

		if (rc != FLRUN_EXIT_BUSY && rc != FLRUN_EXIT_NOCONN)
			return rc;
		now = flrun_now();
		if (now >= give_up)
		{
			if (opt->wait_given)
				snprintf(waited, sizeof(waited), " (gave up after %s)",
						 flrun_format_duration(opt->wait, buf, sizeof(buf)));
			if (rc == FLRUN_EXIT_BUSY)
			{
				report_busy(opt, lease, waited);
				flrun_db_close();
				return opt->busy_exit;
			}
			flrun_error("cannot connect to the server%s: %s", waited, flrun_db_error());
			return FLRUN_EXIT_NOCONN;
		}
		flrun_trace("%s; trying again", rc == FLRUN_EXIT_BUSY ? "lease is busy" : flrun_db_error());
		flrun_stop_interrupts(true);
		if (flrun_wait(-1, false, false, flrun_min(give_up, now + flrun_jitter(pause))) ==
			FL_WAIT_INTERRUPTED)
		{
			flrun_db_close();
			return 128 + flrun_stop_signal();
		}
		pause = flrun_min(pause * 2, cap);
	}
}

/*
 * One renewal attempt, bounded by the lease's local deadline.  On
 * RENEW_FAILED, why holds the reason.
 */
static RenewResult
renew_lease(const Options *opt, Lease *lease, char *why, size_t whylen)
{
	const char *params[4] = {opt->resource, opt->owner, lease->ttl_param, lease->fence};
	msec_t limit = flrun_min(lease->deadline, flrun_now() + call_limit(lease));
	PGresult *res = NULL;
	msec_t sent;
	FlDbStatus st;
	RenewResult result;
	char buf[32];

	st = flrun_db_connect(limit);
	if (st == FL_DB_OK)
		st = flrun_db_query(RENEW_SQL, 4, params, limit, &res, &sent);
	if (st == FL_DB_OK && strcmp(one_value(res), "t") == 0)
	{
		lease->sent_at = sent;
		lease->deadline = sent + opt->ttl;
		flrun_trace("renewed \"%s\" (fence %s) for %s", opt->resource, lease->fence,
					flrun_format_duration(opt->ttl, buf, sizeof(buf)));
		result = RENEWED;
	}
	else if (st == FL_DB_OK)
		result = NOT_HELD;
	else if (st == FL_DB_INTERRUPTED)
		result = RENEW_INTERRUPTED;
	else
	{
		if (st == FL_DB_SQLERROR)
		{
			snprintf(why, whylen, "%s (SQLSTATE %s)", primary_message(res), sqlstate_of(res));
			if (sqlstate_is_unavailable(sqlstate_of(res)))
				flrun_db_close();
		}
		else
			snprintf(why, whylen, "%s", flrun_db_error());
		result = RENEW_FAILED;
	}
	PQclear(res);
	return result;
}

static int
lease_lost(const Options *opt, const Lease *lease, const char *why)
{
	flrun_error("lost the lease on \"%s\" (fence %s): %s; stopping the command", opt->resource,
				lease->fence, why);
	flrun_stop_child(opt->grace);
	flrun_db_close();
	return FLRUN_EXIT_LOST;
}

/*
 * While the command runs: renew every TTL/3; after a failed renewal, retry
 * every TTL/20 (50ms to 1s, jittered) until the local deadline.  Returns the
 * exit code.
 */
static int
supervise(const Options *opt, Lease *lease)
{
	msec_t interval = opt->ttl / 3;
	msec_t retry = flrun_max(50, flrun_min(opt->ttl / 20, 1000));
	msec_t next_renew = lease->sent_at + interval;
	int failures = 0;
	int status;
	int code;
	char buf[32];
	char why[2048];

	for (;;)
	{
		msec_t now = flrun_now();

		if (now >= lease->deadline)
			return lease_lost(opt, lease,
							  failures > 0 ? "could not renew it before its deadline"
										   : "it was not renewed before its deadline");
		if (flrun_child_done(&status))
			break;
		if (now < next_renew)
		{
			flrun_wait(-1, false, false, flrun_min(next_renew, lease->deadline));
			continue;
		}
		switch (renew_lease(opt, lease, why, sizeof(why)))
		{
			case RENEWED:
				if (failures > 0)
					flrun_error("renewed the lease on \"%s\" again", opt->resource);
				failures = 0;
				next_renew = lease->sent_at + interval;
				break;
			case NOT_HELD:
				return lease_lost(opt, lease, "the server says it is no longer held");
			case RENEW_FAILED:
				if (failures++ == 0)
					flrun_error("cannot renew the lease on \"%s\" (retrying for up to %s): %s",
								opt->resource,
								flrun_format_duration(flrun_max(0, lease->deadline - flrun_now()),
													  buf, sizeof(buf)),
								why);
				else
					flrun_trace("renew failed again: %s", why);
				next_renew = flrun_now() + flrun_jitter(retry);
				break;
			case RENEW_INTERRUPTED:
				break;
		}
	}
	code = flrun_status_to_exit(status);
	release_lease(opt, lease);
	return code;
}

static void
export_lease(const Options *opt, const Lease *lease)
{
	char expires[32];

	snprintf(expires, sizeof(expires), "%lld", (long long) (lease->expires_wall / 1000));
	if (setenv("FENCELOCK_RESOURCE", opt->resource, 1) != 0 ||
		setenv("FENCELOCK_OWNER", opt->owner, 1) != 0 ||
		setenv("FENCELOCK_FENCE", lease->fence, 1) != 0 ||
		setenv("FENCELOCK_EXPIRES", expires, 1) != 0)
	{
		flrun_error("out of memory");
		exit(FLRUN_EXIT_OSERR);
	}
}

int
main(int argc, char **argv)
{
	Options opt;
	Lease lease;
	pid_t child;
	int rc;
	char buf[32];

	parse_options(argc, argv, &opt);

	memset(&lease, 0, sizeof(lease));
	lease.attempt = flrun_max(1, flrun_min(opt.ttl / 3, MAX_ATTEMPT));
	snprintf(lease.ttl_param, sizeof(lease.ttl_param), "%lld milliseconds", (long long) opt.ttl);
	if (!flrun_db_setup(opt.conninfo, lease.attempt))
		usage_error("%s", flrun_db_error());
	if (opt.owner == NULL && (opt.owner = flrun_default_owner()) == NULL)
	{
		flrun_error("cannot read random bytes for the owner token");
		return FLRUN_EXIT_OSERR;
	}
	if (!flrun_signals_init())
		return FLRUN_EXIT_OSERR;

	rc = acquire_lease(&opt, &lease);
	if (rc != 0)
		return rc;
	flrun_trace("acquired \"%s\" as owner \"%s\": fence %s, ttl %s", opt.resource, opt.owner,
				lease.fence, flrun_format_duration(opt.ttl, buf, sizeof(buf)));

	export_lease(&opt, &lease);
	if (flrun_stop_signal() != 0)
	{
		/* asked to stop between the grant and now */
		release_lease(&opt, &lease);
		return 128 + flrun_stop_signal();
	}
	if (!flrun_spawn(opt.command, &child))
	{
		release_lease(&opt, &lease);
		return FLRUN_EXIT_OSERR;
	}
	flrun_trace("started \"%s\" as process %ld", opt.command[0], (long) child);
	return supervise(&opt, &lease);
}
