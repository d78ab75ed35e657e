/*
 * util.c — random numbers, the clock and libpq helpers of the fuzzer.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* splitmix64: a seed reproduces the same decisions. */
uint64_t
fz_rng(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
int64_t
fz_range(uint64_t *state, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t) (fz_rng(state) % (uint64_t) (hi - lo + 1));
}

bool
fz_chance(uint64_t *state, int percent)
{
	return (int) (fz_rng(state) % 100) < percent;
}

int64_t
fz_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

char *
fz_strdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (d == NULL)
	{
		fprintf(stderr, "fuzz: out of memory\n");
		exit(2);
	}
	return d;
}

/* The SQLSTATE of a failed result; "" when there is none (a lost connection). */
const char *
fz_sqlstate(const PGresult *res)
{
	const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return s ? s : "";
}

PGresult *
fz_exec(PGconn *conn, const char *sql)
{
	return PQexec(conn, sql);
}

/* Run a command; print the error and return false if it fails. */
bool
fz_exec_ok(PGconn *conn, const char *sql, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType s = PQresultStatus(res);
	bool ok = (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK);

	if (!ok)
		fprintf(stderr, "fuzz: %s failed: %s", what, PQerrorMessage(conn));
	PQclear(res);
	return ok;
}

/* Count an error's SQLSTATE for the summary (the first 64 distinct ones). */
void
fz_count_state(FzStats *st, const char *state)
{
	for (int i = 0; i < st->ntop; i++)
		if (strcmp(st->top_states[i], state) == 0)
		{
			st->top_counts[i]++;
			return;
		}
	if (st->ntop < 64)
	{
		snprintf(st->top_states[st->ntop], sizeof(st->top_states[0]), "%s",
				 state[0] ? state : "none");
		st->top_counts[st->ntop++] = 1;
	}
}

/* S for a message: control characters as \n, \t, \r or \xNN, at most LEN - 1 bytes. */
const char *
fz_printable(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; *s && n + 5 < len; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == '\n')
			n += (size_t) snprintf(buf + n, len - n, "\\n");
		else if (c == '\t')
			n += (size_t) snprintf(buf + n, len - n, "\\t");
		else if (c == '\r')
			n += (size_t) snprintf(buf + n, len - n, "\\r");
		else if (c < 0x20 || c == 0x7f)
			n += (size_t) snprintf(buf + n, len - n, "\\x%02x", c);
		else
			buf[n++] = (char) c;
	}
	buf[n] = '\0';
	return buf;
}
