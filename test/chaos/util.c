/*
 * util.c — random numbers, clocks and libpq helpers for the chaos harness.
 */
#include "chaos.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

/* splitmix64: small, fast, and good enough to make a seed reproduce the same decisions. */
uint64_t
rng_next(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
int64_t
rng_range(uint64_t *state, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t) (rng_next(state) % (uint64_t) (hi - lo + 1));
}

/* Uniform in [0, 1). */
double
rng_unit(uint64_t *state)
{
	return (double) (rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Monotonic microseconds; the same clock in every process of the machine. */
int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
sleep_us(int64_t us)
{
	struct timespec req;
	struct timespec rem;

	if (us <= 0)
		return;
	req.tv_sec = us / 1000000;
	req.tv_nsec = (us % 1000000) * 1000;
	while (nanosleep(&req, &rem) != 0 && errno == EINTR)
		req = rem;
}

/* Print a message and a newline to stderr; libpq's messages bring their own newline. */
void
chaos_warn(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	size_t len;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	len = strlen(buf);
	while (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	fprintf(stderr, "%s\n", buf);
}

/*
 * Connect with CONNINFO (a connection string or URI) or, when it is NULL, with the libpq
 * environment (PGHOST, PGPORT, PGDATABASE, ...).  Returns NULL after printing the reason.
 */
PGconn *
chaos_connect(const char *conninfo, const char *appname)
{
	const char *const keys[] = {"dbname", "application_name", NULL};
	const char *values[3];
	PGconn *conn;

	values[0] = conninfo;
	values[1] = appname;
	values[2] = NULL;
	conn = PQconnectdbParams(keys, values, 1);
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		chaos_warn("%s: could not connect: %s", appname,
				   conn ? PQerrorMessage(conn) : "out of memory");
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* The SQLSTATE of a failed result, or "" when there is none (e.g. a lost connection). */
const char *
result_sqlstate(const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return state ? state : "";
}

/* Run a parameterless command or script; print the error and return false if it fails. */
bool
exec_ok(PGconn *conn, const char *sql, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	bool ok = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);

	if (!ok)
		chaos_warn("%s failed: %s", what, PQerrorMessage(conn));
	PQclear(res);
	return ok;
}

void
resource_name(char *buf, size_t len, int index)
{
	snprintf(buf, len, "chaos:r%d", index);
}

void
owner_name(char *buf, size_t len, int index)
{
	snprintf(buf, len, "w%d", index);
}

/* The mode's name, as the harness's tables and fencelock's views spell it. */
const char *
mode_name(ChaosMode mode)
{
	switch (mode)
	{
		case MODE_SHARED:
			return "shared";
		case MODE_PERMIT:
			return "permit";
		case MODE_EXCLUSIVE:
			break;
	}
	return "exclusive";
}
