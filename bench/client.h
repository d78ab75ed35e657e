/*
 * client.h — what the latency benchmarks' C clients share (bench/claim_wait.c, bench/handoff.c):
 * a monotonic clock in milliseconds, a connection and a statement that end the program on
 * failure, and the comparison qsort needs for latencies.  Each program defines BENCH_NAME, the
 * prefix of its error messages, before including this file.
 */
#ifndef BENCH_CLIENT_H
#define BENCH_CLIENT_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline PGconn *
connect_or_die(void)
{
	PGconn *c = PQconnectdb("");

	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, BENCH_NAME ": %s", PQerrorMessage(c));
		exit(1);
	}
	return c;
}

static inline PGresult *
exec_or_die(PGconn *c, const char *sql, int n, const char *const *params)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, BENCH_NAME ": %s: %s", sql, PQerrorMessage(c));
		exit(1);
	}
	return r;
}

static inline int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

#endif /* BENCH_CLIENT_H */
