/*
 * handoff.c — how soon a freed lease reaches its waiter (bench/handoff.sh, doc/bench.md
 * "Hand-offs").
 *
 *   handoff -m autocommit|xact|expiry [-n hand-offs] [-w waiters] [-t ttl ms]
 *
 * Connection from the libpq environment (PGHOST, PGPORT, PGDATABASE); one resource.
 * autocommit, xact: two clients take turns.  The holder waits until the other is queued
 * (fencelock.waiters), releases (autocommit: SELECT fencelock.release(...); xact: BEGIN, the same,
 * COMMIT) and notes when the release's commit was acknowledged; the waiter, in
 * acquire(..., wait => '10 s'), notes when its acquire returned.  A waiter that returned before
 * its releaser saw the acknowledgement counts 0.
 * expiry: -w clients (4) wait for the lease with a ttl of -t ms (50) and never release: each grant
 * is a takeover of the previous holder's expired lease; the latency is the server's clock at the
 * grant's return minus the previous lease's expires_at (grants ordered by the server's clock).
 * Prints one line: hand-offs, p50, p90, p99 and max latency in ms.
 */
#define BENCH_NAME "handoff"
#include "client.h"
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int mode = 0; /* 0 autocommit, 1 xact, 2 expiry */
static int nhandoffs = 1000;
static int nwaiters = 4;
static int ttl_ms = 50;
static double *t_release; /* [g]: when the release of grant g was acknowledged (client clock) */
static double *t_grant;   /* [g]: when grant g returned (client clock; expiry: server clock) */
static double *t_expires; /* expiry: [g], grant g's expires_at (server clock) */
static atomic_int grants;

static void *
turn_taker(void *arg)
{
	PGconn *c = connect_or_die();
	char name[32];
	const char *params[2] = {"handoff", name};

	snprintf(name, sizeof(name), "c%ld", (long) (size_t) arg);
	for (;;)
	{
		PGresult *r = exec_or_die(
			c, "SELECT fencelock.acquire($1, $2, '1 minute', '10 seconds') IS NOT NULL", 2, params);
		double got = now_ms();
		int g;

		if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		{
			fprintf(stderr, "handoff: a waiter timed out\n");
			exit(1);
		}
		PQclear(r);
		r = NULL;
		g = atomic_fetch_add(&grants, 1);
		t_grant[g] = got;
		if (g < nhandoffs)
			for (;;) /* a hand-off needs a waiter */
			{
				r = exec_or_die(c, "SELECT fencelock.waiters($1) > 0", 1, params);
				if (strcmp(PQgetvalue(r, 0, 0), "t") == 0)
					break;
				PQclear(r);
				usleep(200);
			}
		PQclear(r);
		if (mode == 1)
			PQclear(exec_or_die(c, "BEGIN", 0, NULL));
		PQclear(exec_or_die(c, "SELECT fencelock.release($1, $2)", 2, params));
		if (mode == 1)
			PQclear(exec_or_die(c, "COMMIT", 0, NULL));
		t_release[g] = now_ms();
		if (g >= nhandoffs)
			break;
	}
	PQfinish(c);
	return NULL;
}

/* expiry: take the lease over when it expires; never release. */
static void *
chain_link(void *arg)
{
	PGconn *c = connect_or_die();
	char name[32];
	char ttl[32];
	const char *params[3] = {"handoff", name, ttl};

	snprintf(ttl, sizeof(ttl), "%d milliseconds", ttl_ms);
	for (int k = 0;; k++)
	{
		PGresult *r;
		double got;
		int g;

		/* A new owner each time: the same owner's live lease would be granted again at once. */
		snprintf(name, sizeof(name), "c%ld-%d", (long) (size_t) arg, k);
		r = exec_or_die(c,
						"SELECT fencelock.acquire($1, $2, $3::interval, '10 seconds') IS NOT NULL, "
						"extract(epoch FROM clock_timestamp()) * 1000",
						3, params);
		if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
		{
			fprintf(stderr, "handoff: a waiter timed out\n");
			exit(1);
		}
		got = atof(PQgetvalue(r, 0, 1));
		PQclear(r);
		r = exec_or_die(c,
						"SELECT extract(epoch FROM expires_at) * 1000 FROM fencelock.leases "
						"WHERE resource = $1 AND owner = $2",
						2, params);
		/* Already taken over (the query came after the ttl): no expiry to measure from. */
		if (PQntuples(r) == 0)
		{
			PQclear(r);
			continue;
		}
		g = atomic_fetch_add(&grants, 1);
		if (g <= nhandoffs)
		{
			t_grant[g] = got;
			t_expires[g] = atof(PQgetvalue(r, 0, 0));
		}
		PQclear(r);
		if (g >= nhandoffs)
			break;
	}
	PQfinish(c);
	return NULL;
}

int
main(int argc, char **argv)
{
	int opt;
	int nthreads;
	pthread_t *th;
	double *lat;
	int n = 0;

	while ((opt = getopt(argc, argv, "m:n:w:t:")) != -1)
		switch (opt)
		{
			case 'm':
				mode = strcmp(optarg, "xact") == 0 ? 1 : strcmp(optarg, "expiry") == 0 ? 2 : 0;
				break;
			case 'n':
				nhandoffs = atoi(optarg);
				break;
			case 'w':
				nwaiters = atoi(optarg);
				break;
			case 't':
				ttl_ms = atoi(optarg);
				break;
			default:
				fprintf(stderr, "usage: handoff -m autocommit|xact|expiry [-n N] [-w W] [-t ms]\n");
				return 2;
		}
	nthreads = mode == 2 ? nwaiters : 2;
	t_release = calloc(nhandoffs + nthreads + 2, sizeof(double));
	t_grant = calloc(nhandoffs + nthreads + 2, sizeof(double));
	t_expires = calloc(nhandoffs + nthreads + 2, sizeof(double));
	lat = calloc(nhandoffs + 1, sizeof(double));
	th = calloc(nthreads, sizeof(pthread_t));
	for (long i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, mode == 2 ? chain_link : turn_taker, (void *) i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	/* expiry: the clients note their grants in any order; the server's clock orders them. */
	if (mode == 2)
	{
		double(*pairs)[2] = calloc(nhandoffs + 1, sizeof(*pairs));

		for (int g = 0; g <= nhandoffs; g++)
		{
			pairs[g][0] = t_grant[g];
			pairs[g][1] = t_expires[g];
		}
		qsort(pairs, nhandoffs + 1, sizeof(*pairs), cmp_double);
		for (int g = 0; g <= nhandoffs; g++)
		{
			t_grant[g] = pairs[g][0];
			t_expires[g] = pairs[g][1];
		}
	}
	/* Grant g + 1 followed the release (or the expiry) of grant g. */
	for (int g = 0; g < nhandoffs; g++)
	{
		double d = mode == 2 ? t_grant[g + 1] - t_expires[g] : t_grant[g + 1] - t_release[g];

		lat[n++] = d < 0 ? 0 : d;
	}
	qsort(lat, n, sizeof(double), cmp_double);
	printf("handoffs=%d p50=%.2f p90=%.2f p99=%.2f max=%.2f\n", n, lat[n / 2], lat[n * 9 / 10],
		   lat[n * 99 / 100], lat[n - 1]);
	return 0;
}
