/*
 * redis_lease.c — the Redis contender of the acquire + release benchmark (doc/bench.md, row 2).
 *
 * What a client of a Redis lock does per cycle, over its own connection, one request at a time:
 *
 *   SET lock:<resource> <owner> NX PX <ttl>           the grant ("OK", or nil when held)
 *   EVALSHA <compare-and-delete> 1 lock:<resource> <owner>
 *                                                      the release: deletes the key only when it
 *                                                      still holds this owner's token (1, else 0)
 *
 * with a random resource among -n and a fresh random owner token per cycle, as the pgbench
 * scripts do.  Every reply is checked and counted, so the totals printed at the end are the work
 * the server confirmed:
 *
 *   cycles=N grants=G releases=R seconds=S
 *
 * Usage: redis_lease -p PORT [-h 127.0.0.1] [-c clients] [-T seconds] [-n resources] [-t ttl_ms]
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *release_lua = "if redis.call('get', KEYS[1]) == ARGV[1] then "
								 "return redis.call('del', KEYS[1]) else return 0 end";

static const char *host = "127.0.0.1";
static int port = 6379;
static int nclients = 1;
static double seconds = 10;
static long nresources = 10000;
static long ttl_ms = 30000;
static char sha[64];

typedef struct Worker
{
	pthread_t thread;
	unsigned seed;
	long cycles;
	long grants;
	long releases;
	int failed;
} Worker;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static redisContext *
connect_or_die(void)
{
	redisContext *c = redisConnect(host, port);

	if (c == NULL || c->err)
	{
		fprintf(stderr, "redis_lease: cannot connect to %s:%d: %s\n", host, port,
				c ? c->errstr : "out of memory");
		exit(2);
	}
	return c;
}

static uint64_t
next_random(unsigned *seed)
{
	return ((uint64_t) rand_r(seed) << 31) ^ (uint64_t) rand_r(seed);
}

static void *
work(void *arg)
{
	Worker *w = arg;
	redisContext *c = connect_or_die();
	double deadline = now_s() + seconds;

	while (now_s() < deadline)
	{
		char key[64];
		char owner[32];
		redisReply *r;

		snprintf(key, sizeof(key), "lock:%ld", (long) (next_random(&w->seed) % nresources) + 1);
		snprintf(owner, sizeof(owner), "%llu", (unsigned long long) next_random(&w->seed));

		r = redisCommand(c, "SET %s %s NX PX %ld", key, owner, ttl_ms);
		if (r == NULL || r->type == REDIS_REPLY_ERROR)
			goto fail;
		if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
			w->grants++;
		else if (r->type != REDIS_REPLY_NIL)
			goto fail;
		freeReplyObject(r);

		r = redisCommand(c, "EVALSHA %s 1 %s %s", sha, key, owner);
		if (r == NULL || r->type != REDIS_REPLY_INTEGER)
			goto fail;
		w->releases += r->integer;
		freeReplyObject(r);
		w->cycles++;
		continue;
fail:
		fprintf(stderr, "redis_lease: unexpected reply: %s\n",
				r == NULL ? c->errstr : (r->type == REDIS_REPLY_ERROR ? r->str : "(type)"));
		w->failed = 1;
		break;
	}
	redisFree(c);
	return NULL;
}

int
main(int argc, char **argv)
{
	Worker *workers;
	redisContext *c;
	redisReply *r;
	long cycles = 0, grants = 0, releases = 0;
	int failed = 0;
	double start, elapsed;
	int opt;

	while ((opt = getopt(argc, argv, "h:p:c:T:n:t:")) != -1)
	{
		switch (opt)
		{
			case 'h': host = optarg; break;
			case 'p': port = atoi(optarg); break;
			case 'c': nclients = atoi(optarg); break;
			case 'T': seconds = atof(optarg); break;
			case 'n': nresources = atol(optarg); break;
			case 't': ttl_ms = atol(optarg); break;
			default:
				fprintf(stderr, "usage: %s -p port [-h host] [-c clients] [-T seconds] "
								"[-n resources] [-t ttl_ms]\n",
						argv[0]);
				return 2;
		}
	}
	if (nclients < 1 || nresources < 1 || seconds <= 0)
	{
		fprintf(stderr, "redis_lease: bad arguments\n");
		return 2;
	}

	/* What a client library does once: load the release script, then call it by its digest. */
	c = connect_or_die();
	r = redisCommand(c, "SCRIPT LOAD %s", release_lua);
	if (r == NULL || r->type != REDIS_REPLY_STRING || r->len >= (int) sizeof(sha))
	{
		fprintf(stderr, "redis_lease: SCRIPT LOAD failed\n");
		return 2;
	}
	memcpy(sha, r->str, r->len);
	sha[r->len] = '\0';
	freeReplyObject(r);
	redisFree(c);

	workers = calloc(nclients, sizeof(Worker));
	start = now_s();
	for (int i = 0; i < nclients; i++)
	{
		workers[i].seed = (unsigned) (getpid() * 7919 + i * 104729 + (long) start);
		pthread_create(&workers[i].thread, NULL, work, &workers[i]);
	}
	for (int i = 0; i < nclients; i++)
	{
		pthread_join(workers[i].thread, NULL);
		cycles += workers[i].cycles;
		grants += workers[i].grants;
		releases += workers[i].releases;
		failed |= workers[i].failed;
	}
	elapsed = now_s() - start;
	printf("cycles=%ld grants=%ld releases=%ld seconds=%.3f\n", cycles, grants, releases, elapsed);
	return failed ? 1 : 0;
}
