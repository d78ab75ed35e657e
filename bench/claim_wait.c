/*
 * claim_wait.c — latency from a job's INSERT commit to its claim, with waiting workers or with
 * workers that poll (bench/claim_wait.sh, doc/bench.md "Waiting claim").
 *
 *   claim_wait -m wait|poll|notify [-w workers] [-n jobs] [-i insert interval ms] [-p poll ms]
 *
 * Connection from the libpq environment (PGHOST, PGPORT, PGDATABASE).  A producer inserts jobs
 * one at a time (autocommit) into lat_jobs at a jittered interval and notes the moment each
 * INSERT's commit was acknowledged; the workers claim (waiting; polling: claim, and when no row
 * came, sleep; notify: LISTEN on channel fencelock_jobs, claim, and when no row came, wait for a
 * notification, at most 1 s), note the moment the claim returned, and complete the job.  Prints one line:
 * jobs, median, p90, p99 and max latency in ms, and the claims that returned no row.
 */
#define BENCH_NAME "claim_wait"
#include "client.h"
#include <libpq-fe.h>
#include <sys/select.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int nworkers = 8;
static int njobs = 400;
static int interval_ms = 25;
static int poll_ms = 100;
static int mode = 0; /* 0 wait, 1 poll, 2 notify */
static double *t_commit;
static double *t_claim;
static atomic_int done;
static atomic_long empty_claims;

static void *
worker(void *arg)
{
	PGconn *c = connect_or_die();
	char name[32];
	const char *params[1] = {name};
	const char *sql = mode == 0 ? "SELECT id, fence FROM fencelock.claim(NULL::lat_jobs, $1, "
								  "'30 seconds', 1, wait => '1 second')"
								: "SELECT id, fence FROM fencelock.claim(NULL::lat_jobs, $1, "
								  "'30 seconds', 1)";

	snprintf(name, sizeof(name), "w%ld", (long) (size_t) arg);
	if (mode == 2)
		PQclear(exec_or_die(c, "LISTEN fencelock_jobs", 0, NULL));
	while (atomic_load(&done) < njobs)
	{
		PGresult *r = exec_or_die(c, sql, 1, params);

		if (PQntuples(r) == 0)
		{
			atomic_fetch_add(&empty_claims, 1);
			PQclear(r);
			if (mode == 1)
				usleep(poll_ms * 1000);
			else if (mode == 2)
			{
				PGnotify *n;
				int got = 0;
				fd_set fds;
				struct timeval tv = {1, 0};

				PQconsumeInput(c);
				while ((n = PQnotifies(c)) != NULL)
				{
					got = 1;
					PQfreemem(n);
				}
				if (!got)
				{
					FD_ZERO(&fds);
					FD_SET(PQsocket(c), &fds);
					select(PQsocket(c) + 1, &fds, NULL, NULL, &tv);
					PQconsumeInput(c);
					while ((n = PQnotifies(c)) != NULL)
						PQfreemem(n);
				}
			}
			continue;
		}
		{
			double at = now_ms();
			int id = atoi(PQgetvalue(r, 0, 0));
			const char *cp[2] = {PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1)};

			t_claim[id] = at;
			PQclear(exec_or_die(c, "SELECT fencelock.complete('lat_jobs', $1::int, $2::bigint)",
								2, cp));
			atomic_fetch_add(&done, 1);
		}
		PQclear(r);
	}
	PQfinish(c);
	return NULL;
}

int
main(int argc, char **argv)
{
	int opt;
	pthread_t *th;
	PGconn *p;
	double *lat;

	while ((opt = getopt(argc, argv, "m:w:n:i:p:")) != -1)
	{
		switch (opt)
		{
			case 'm':
				mode = strcmp(optarg, "wait") == 0 ? 0 : strcmp(optarg, "poll") == 0 ? 1 : 2;
				break;
			case 'w':
				nworkers = atoi(optarg);
				break;
			case 'n':
				njobs = atoi(optarg);
				break;
			case 'i':
				interval_ms = atoi(optarg);
				break;
			case 'p':
				poll_ms = atoi(optarg);
				break;
			default:
				fprintf(stderr,
						"usage: claim_wait -m wait|poll|notify [-w N] [-n N] [-i ms] [-p ms]\n");
				return 2;
		}
	}
	t_commit = calloc(njobs + 1, sizeof(double));
	t_claim = calloc(njobs + 1, sizeof(double));
	lat = calloc(njobs, sizeof(double));
	th = calloc(nworkers, sizeof(pthread_t));
	p = connect_or_die();
	PQclear(exec_or_die(p, "TRUNCATE lat_jobs", 0, NULL));
	for (long i = 0; i < nworkers; i++)
		pthread_create(&th[i], NULL, worker, (void *) i);
	usleep(500 * 1000); /* the workers are waiting (or polling) */
	srandom(42);
	for (int k = 1; k <= njobs; k++)
	{
		char id[16];
		const char *params[1] = {id};

		/* uniformly 0.5 to 1.5 times the interval: jobs do not arrive in step with the polls */
		usleep((useconds_t) (interval_ms * 1000 * (0.5 + (random() % 1000) / 1000.0)));
		snprintf(id, sizeof(id), "%d", k);
		PQclear(exec_or_die(p, "INSERT INTO lat_jobs (id) VALUES ($1::int)", 1, params));
		t_commit[k] = now_ms();
	}
	for (int i = 0; i < nworkers; i++)
		pthread_join(th[i], NULL);
	for (int k = 1; k <= njobs; k++)
		lat[k - 1] = t_claim[k] - t_commit[k];
	qsort(lat, njobs, sizeof(double), cmp_double);
	printf("jobs=%d median=%.2f p90=%.2f p99=%.2f max=%.2f empty_claims=%ld\n", njobs,
		   lat[njobs / 2], lat[njobs * 9 / 10], lat[njobs * 99 / 100], lat[njobs - 1],
		   atomic_load(&empty_claims));
	PQfinish(p);
	return 0;
}
