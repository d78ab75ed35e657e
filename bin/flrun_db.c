/*
 * flrun_db.c
 *		libpq calls with deadlines.
 *
 * Connecting and querying both use libpq's non-blocking interface
 * (PQconnectStartParams / PQconnectPoll, PQsendQueryParams / PQflush /
 * PQconsumeInput) and wait in flrun_wait(), so a server that hangs or a
 * network that drops packets cannot hold fencelock-run past a deadline.  A
 * call that runs out of time drops the connection; the server-side
 * statement_timeout set at connection time ends the abandoned statement.
 *
 * Known limit: libpq resolves host names synchronously, so a hanging DNS
 * lookup is not bounded; use hostaddr or a local resolver cache.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flrun.h"

/* used when neither the connection string nor PGCONNECT_TIMEOUT sets one */
#define FLRUN_DEFAULT_CONNECT_TIMEOUT 10000

#define MAX_PARAMS 12

static const char *keywords[MAX_PARAMS];
static const char *values[MAX_PARAMS];
static char options[2048];
static int options_index = -1; /* where "options" is, the last keyword */
static PGconn *conn = NULL;
static bool ever_connected = false;
static char errbuf[2048];

static void set_error(const char *fmt, ...) FLRUN_PRINTF(1, 2);

static void
set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
}

/* libpq's own test: "key=value ..." or a URI, rather than a plain name */
static bool
is_connection_string(const char *s)
{
	return strchr(s, '=') != NULL || strncmp(s, "postgresql://", 13) == 0 ||
		   strncmp(s, "postgres://", 11) == 0;
}

/*
 * The user's startup options: from the connection string, else PGOPTIONS.
 * Returns false (with the error set) for a malformed connection string.
 */
static bool
user_options(const char *conninfo, char *buf, size_t len)
{
	const char *found = NULL;

	buf[0] = '\0';
	if (conninfo != NULL && is_connection_string(conninfo))
	{
		char *err = NULL;
		PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
		PQconninfoOption *o;

		if (opts == NULL)
		{
			set_error("invalid connection string: %s", err ? err : "out of memory");
			PQfreemem(err);
			return false;
		}
		for (o = opts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, "options") == 0 && o->val != NULL)
				snprintf(buf, len, "%s", o->val);
		PQconninfoFree(opts);
		if (buf[0] != '\0')
			return true;
	}
	found = getenv("PGOPTIONS");
	if (found != NULL)
		snprintf(buf, len, "%s", found);
	return true;
}

/*
 * Prepare the connection parameters.  Keyword order matters to libpq: the
 * user's connection string (dbname, expanded) overrides what comes before it
 * and is overridden by what comes after.
 *   before: target_session_attrs=read-write (leases live on the primary)
 *           and TCP keepalives, so that a dead peer is noticed;
 *   after:  fallback_application_name, and options carrying our
 *           statement_timeout ahead of the user's own options.
 */
bool
flrun_db_setup(const char *conninfo, msec_t statement_timeout)
{
	char theirs[1024];
	int n = 0;

	if (!user_options(conninfo, theirs, sizeof(theirs)))
		return false;

	if (getenv("PGTARGETSESSIONATTRS") == NULL)
	{
		keywords[n] = "target_session_attrs";
		values[n++] = "read-write";
	}
	keywords[n] = "keepalives_idle";
	values[n++] = "10";
	keywords[n] = "keepalives_interval";
	values[n++] = "5";
	keywords[n] = "keepalives_count";
	values[n++] = "3";
	if (conninfo != NULL)
	{
		keywords[n] = "dbname";
		values[n++] = conninfo;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "fencelock-run";
	snprintf(options, sizeof(options), "-c statement_timeout=%lld%s%s",
			 (long long) statement_timeout, theirs[0] ? " " : "", theirs);
	options_index = n;
	keywords[n] = "options";
	values[n++] = options;
	keywords[n] = NULL;
	values[n] = NULL;
	return true;
}

const char *
flrun_db_error(void)
{
	return errbuf;
}

bool
flrun_db_connected(void)
{
	return conn != NULL && PQstatus(conn) == CONNECTION_OK;
}

void
flrun_db_close(void)
{
	if (conn != NULL)
		PQfinish(conn);
	conn = NULL;
}

/* drop the connection, keeping its last error message */
static void
drop_connection(void)
{
	if (conn != NULL)
		set_error("%s", PQerrorMessage(conn));
	flrun_db_close();
}

/* connect_timeout as libpq would apply it, in ms; FOREVER for none */
static msec_t
connect_timeout(PGconn *c)
{
	PQconninfoOption *opts = PQconninfo(c);
	PQconninfoOption *o;
	msec_t result = FLRUN_DEFAULT_CONNECT_TIMEOUT;

	for (o = opts; o != NULL && o->keyword != NULL; o++)
	{
		if (strcmp(o->keyword, "connect_timeout") == 0 && o->val != NULL && o->val[0] != '\0')
		{
			long secs = strtol(o->val, NULL, 10);

			result = secs <= 0 ? FLRUN_FOREVER : flrun_max(secs, 2) * 1000;
		}
	}
	PQconninfoFree(opts);
	return result;
}

/* One connection attempt, bounded by deadline and connect_timeout. */
static FlDbStatus
connect_once(PGconn **result, msec_t deadline, msec_t started)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	PGconn *c = PQconnectStartParams(keywords, values, 1);
	msec_t timeout;
	msec_t limit;
	char buf[32];

	if (c == NULL)
	{
		set_error("%s", "out of memory");
		return FL_DB_CONNFAIL;
	}
	timeout = connect_timeout(c);
	limit = timeout == FLRUN_FOREVER ? deadline : flrun_min(deadline, started + timeout);
	while (st != PGRES_POLLING_OK)
	{
		FlWait w;

		if (PQstatus(c) == CONNECTION_BAD || st == PGRES_POLLING_FAILED)
		{
			set_error("%s", PQerrorMessage(c));
			PQfinish(c);
			return FL_DB_CONNFAIL;
		}
		w = flrun_wait(PQsocket(c), st == PGRES_POLLING_READING, st == PGRES_POLLING_WRITING,
					   limit);
		if (w != FL_WAIT_READY)
		{
			set_error("connection attempt timed out after %s",
					  flrun_format_duration(flrun_now() - started, buf, sizeof(buf)));
			PQfinish(c);
			return w == FL_WAIT_TIMEOUT ? FL_DB_TIMEOUT : FL_DB_INTERRUPTED;
		}
		st = PQconnectPoll(c);
	}
	if (PQsetnonblocking(c, 1) != 0)
	{
		set_error("%s", PQerrorMessage(c));
		PQfinish(c);
		return FL_DB_CONNFAIL;
	}
	*result = c;
	return FL_DB_OK;
}

/*
 * Make sure there is a connection, opening one if needed; gives up at
 * deadline or after connect_timeout, whichever is first.
 *
 * A connection pooler such as PgBouncer may refuse the "options" startup
 * parameter; then we connect again without it, for good, and rely on the
 * local deadlines alone.
 */
FlDbStatus
flrun_db_connect(msec_t deadline)
{
	msec_t started = flrun_now();
	FlDbStatus st;

	if (flrun_db_connected())
		return FL_DB_OK;
	flrun_db_close();

	st = connect_once(&conn, deadline, started);
	if (st == FL_DB_CONNFAIL && options_index >= 0 &&
		strstr(errbuf, "unsupported startup parameter") != NULL)
	{
		flrun_trace("the server refused startup options; connecting without statement_timeout");
		keywords[options_index] = NULL;
		values[options_index] = NULL;
		options_index = -1;
		st = connect_once(&conn, deadline, started);
	}
	if (st != FL_DB_OK)
	{
		conn = NULL;
		return st;
	}
	if (ever_connected)
		flrun_trace("reconnected to the server");
	ever_connected = true;
	return FL_DB_OK;
}

/*
 * Run one parameterised statement on the open connection, giving up at
 * deadline.  *sent_at is set to the time just before the statement was sent
 * (the start of the server's lease is no earlier).  On FL_DB_OK and
 * FL_DB_SQLERROR *res holds the result, for the caller to PQclear.
 */
FlDbStatus
flrun_db_query(const char *sql, int nparams, const char *const *params, msec_t deadline,
			   PGresult **res, msec_t *sent_at)
{
	PGresult *result = NULL;

	*res = NULL;
	if (!flrun_db_connected())
	{
		set_error("%s", "no connection to the server");
		return FL_DB_CONNFAIL;
	}
	*sent_at = flrun_now();
	if (!PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0))
	{
		drop_connection();
		return FL_DB_CONNFAIL;
	}
	for (;;)
	{
		int pending = PQflush(conn);
		FlWait w;

		if (pending < 0)
			break;
		while (pending == 0 && !PQisBusy(conn))
		{
			PGresult *r = PQgetResult(conn);

			if (r == NULL)
				goto done;
			if (result == NULL)
				result = r;
			else
				PQclear(r);
		}
		w = flrun_wait(PQsocket(conn), true, pending == 1, deadline);
		if (w != FL_WAIT_READY)
		{
			PQclear(result);
			drop_connection();
			if (w == FL_WAIT_TIMEOUT)
				set_error("%s", "no answer from the server in time");
			return w == FL_WAIT_TIMEOUT ? FL_DB_TIMEOUT : FL_DB_INTERRUPTED;
		}
		if (!PQconsumeInput(conn))
			break;
	}
	/* the connection broke */
	PQclear(result);
	drop_connection();
	return FL_DB_CONNFAIL;

done:
	if (PQstatus(conn) != CONNECTION_OK || result == NULL)
	{
		PQclear(result);
		drop_connection();
		return FL_DB_CONNFAIL;
	}
	*res = result;
	if (PQresultStatus(result) == PGRES_TUPLES_OK)
		return FL_DB_OK;
	return FL_DB_SQLERROR;
}
