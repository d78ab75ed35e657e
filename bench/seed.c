/*
 * seed.c — the seed's workload (issue 28, doc/bench.md "The seed's workload"): take the lock of a
 * random key, write that key's business row carrying the lock's token, release.  One program for
 * every contender, so each pays the same client cost: C, one thread and one connection per client
 * (plus one to the lock service), every PostgreSQL statement prepared once per connection, every
 * reply checked.
 *
 *   fl3    fencelock, three transactions: acquire; UPDATE (fence_trigger checks the fence);
 *          release(resource, owner, fence)
 *   fl2    acquire; then the UPDATE and the release in one transaction and one round trip: libpq
 *          pipeline mode, the two prepared statements then one Sync (one implicit transaction)
 *   fl1    the whole cycle in one transaction and one round trip, README's form for a one-step
 *          job: UPDATE t SET ..., last_fence = a.f FROM (SELECT fencelock.acquire(k, owner, ttl)
 *          AS f) AS a WHERE id = k AND a.f IS NOT NULL; SELECT fencelock.release(k, owner) --
 *          the two statements then one Sync in pipeline mode: one implicit transaction (a
 *          multi-statement simple query would be the same).  The grant takes its fence inside the
 *          UPDATE, so no answer has to come back before the write; the release in the same
 *          transaction spares the grant its forced flush.  Busy: acquire answers NULL, the
 *          UPDATE changes nothing, the release answers false.
 *   flx    the whole cycle in one statement, autocommit: UPDATE t SET ..., last_fence = a.f FROM
 *          (SELECT fencelock.acquire_xact(k, owner) AS f) AS a WHERE id = k AND a.f IS NOT NULL.
 *          The transaction's own grant: nothing to release, the commit frees the lease.  Busy:
 *          acquire_xact answers NULL, the UPDATE changes nothing.
 *   redis  Redis + PostgreSQL: one Lua script (SET lock:k owner NX PX ttl, then INCR fence:k: the
 *          token), the conditional UPDATE ... AND last_fence < $token on a table without the fence
 *          trigger, then EVALSHA compare-and-delete
 *   etcd   etcd + PostgreSQL: lease grant (TTL), txn put-if-absent (create_revision == 0) of key k
 *          with the lease, token = the txn's header.revision; the same conditional UPDATE; lease
 *          revoke (which deletes the key).  Through etcd's v3 JSON gateway with libcurl (one
 *          keep-alive HTTP/1.1 connection per client): Debian 12 ships etcd's Go client only as
 *          sources for GOPATH builds (golang-etcd-server-dev), and a C client keeps every
 *          contender's client cost alike.  The gateway's JSON costs etcd some CPU a gRPC client
 *          would not; that is counted in etcd's server CPU.
 *   zk     ZooKeeper + PostgreSQL (libzookeeper_mt): an ephemeral sequential node under /seed/k,
 *          then the children of /seed/k: the lowest wins (else delete ours: busy); token = our
 *          node's czxid (from zoo_create2's Stat); the same conditional UPDATE; delete our node.
 *
 * A busy key (held by another client) is not a cycle: the client tries another key.
 *
 *   seed -C contender [-c clients] [-T seconds] [-n keys] [-t ttl_ms] [service options]
 *        prints: cycles=N busy=N writes=N seconds=S     (writes: UPDATEs that changed the row)
 *   seed -C contender -V      verify: writes=<sum of writes> violations=<rows whose last_fence
 *        exceeds the service's latest token for the key> held=<locks left held>
 *   seed -C zk -I             create /seed and /seed/0 .. /seed/n (persistent parents)
 *   seed -C contender -S cond|naive [-t ttl_ms]
 *        safety row on key 0: a forked holder A takes the lock, is SIGSTOPped past its TTL, B
 *        takes over and writes its token (status 'B'), A is SIGCONTed and writes its old token
 *        with the conditional UPDATE (cond) or without any condition (naive); prints
 *        safety=kept|lost a=written|refused|changed-nothing
 *
 * Service options: -r redis port, -e etcd URL (http://127.0.0.1:port), -z zk host:port.
 * PostgreSQL: libpq's environment (PGHOST, PGPORT, PGDATABASE, PGUSER).
 */
#include <curl/curl.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define THREADED /* libzookeeper_mt: the synchronous API */
#include <zookeeper/zookeeper.h>

enum contender
{
	FL3,
	FL2,
	FL1,
	FLX,
	REDIS,
	ETCD,
	ZK
};
static const char *const names[] = {"fl3", "fl2", "fl1", "flx", "redis", "etcd", "zk"};

static enum contender who;
static int nclients = 2;
static double seconds = 10;
static long nkeys = 1000;
static long ttl_ms = 30000;
static int redis_port = 6379;
static const char *etcd_url = "http://127.0.0.1:2379";
static const char *zk_hosts = "127.0.0.1:2181";
static char acquire_sha[64], release_sha[64];

static const char *acquire_lua = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
								 "return redis.call('incr', KEYS[2]) else return 0 end";
static const char *release_lua = "if redis.call('get', KEYS[1]) == ARGV[1] then "
								 "return redis.call('del', KEYS[1]) else return 0 end";

static void
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "seed %s: ", names[who]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t
next_random(unsigned *seed)
{
	return ((uint64_t) rand_r(seed) << 31) ^ (uint64_t) rand_r(seed);
}

/* ---------------------------------------------------------------------------------------------
 * PostgreSQL */

static const char *
table_of(enum contender c)
{
	static const char *const t[] = {"seed_fl3",   "seed_fl2",  "seed_fl1", "seed_flx",
									"seed_redis", "seed_etcd", "seed_zk"};
	return t[c];
}

static PGconn *
pg_connect(void)
{
	PGconn *c = PQconnectdb("");

	if (PQstatus(c) != CONNECTION_OK)
		die("%s", PQerrorMessage(c));
	return c;
}

static void
pg_prepare(PGconn *c, const char *name, const char *fmt)
{
	char sql[1024];
	PGresult *r;

	snprintf(sql, sizeof(sql), fmt, table_of(who), table_of(who));
	r = PQprepare(c, name, sql, 0, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("prepare %s: %s", name, PQerrorMessage(c));
	PQclear(r);
}

/* Every statement of the contender, prepared once per connection. */
static void
pg_prepare_all(PGconn *c, int safety)
{
	if (who <= FLX)
	{
		pg_prepare(c, "acq", "SELECT fencelock.acquire($1, $2, $3::interval)");
		pg_prepare(c, "upd", "UPDATE %s SET last_fence = $2, writes = writes + 1 WHERE id = $1");
		pg_prepare(c, "rel", "SELECT fencelock.release($1, $2, $3::bigint)");
		pg_prepare(c, "upd1",
				   "UPDATE %s SET last_fence = a.f, writes = writes + 1 "
				   "FROM (SELECT fencelock.acquire($1, $2, $3::interval) AS f) AS a "
				   "WHERE id = $4 AND a.f IS NOT NULL");
		pg_prepare(c, "rel1", "SELECT fencelock.release($1, $2)");
		pg_prepare(c, "updx",
				   "UPDATE %s SET last_fence = a.f, writes = writes + 1 "
				   "FROM (SELECT fencelock.acquire_xact($1, $2) AS f) AS a "
				   "WHERE id = $3 AND a.f IS NOT NULL");
		/* The safety row: the cycle's write (the trigger is its condition) and the naive one. */
		if (safety)
		{
			pg_prepare(
				c, "scond",
				"UPDATE %s SET last_fence = $2, writes = writes + 1, status = $3 WHERE id = $1");
			pg_prepare(c, "snaive", "UPDATE %s SET last_fence = $2, status = $3 WHERE id = $1");
		}
	}
	else
	{
		pg_prepare(c, "upd",
				   "UPDATE %s SET last_fence = $2, writes = writes + 1 WHERE id = $1 "
				   "AND last_fence < $2");
		if (safety)
		{
			pg_prepare(c, "scond",
					   "UPDATE %s SET last_fence = $2, writes = writes + 1, status = $3 "
					   "WHERE id = $1 AND last_fence < $2");
			pg_prepare(c, "snaive", "UPDATE %s SET last_fence = $2, status = $3 WHERE id = $1");
		}
	}
}

/* One prepared statement, outside pipeline mode; the result must be tuples or a command. */
static PGresult *
pg_exec(PGconn *c, const char *stmt, int n, const char *const *params)
{
	PGresult *r = PQexecPrepared(c, stmt, n, params, NULL, NULL, 0);

	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
		die("%s: %s", stmt, PQerrorMessage(c));
	return r;
}

/* Rows an UPDATE changed (0 or 1), checked. */
static int
pg_changed(PGresult *r)
{
	const char *n = PQcmdTuples(r);

	if (PQresultStatus(r) != PGRES_COMMAND_OK || (strcmp(n, "0") != 0 && strcmp(n, "1") != 0))
		die("UPDATE changed %s rows", n);
	return n[0] == '1';
}

typedef struct Stmt
{
	const char *name;
	int n;
	const char *params[4];
	PGresult *result;
} Stmt;

/* A pipeline of prepared statements and one Sync: one round trip, one (implicit or explicit)
 * transaction.  Every result is checked. */
static void
pg_pipeline(PGconn *c, Stmt *s, int n)
{
	PGresult *r;

	for (int i = 0; i < n; i++)
		if (!PQsendQueryPrepared(c, s[i].name, s[i].n, s[i].params, NULL, NULL, 0))
			die("send %s: %s", s[i].name, PQerrorMessage(c));
	if (!PQpipelineSync(c))
		die("sync: %s", PQerrorMessage(c));
	for (int i = 0; i < n; i++)
	{
		s[i].result = PQgetResult(c);
		if (PQresultStatus(s[i].result) != PGRES_TUPLES_OK &&
			PQresultStatus(s[i].result) != PGRES_COMMAND_OK)
			die("%s: %s", s[i].name, PQresultErrorMessage(s[i].result));
		if ((r = PQgetResult(c)) != NULL)
			die("%s: more than one result", s[i].name);
	}
	r = PQgetResult(c);
	if (PQresultStatus(r) != PGRES_PIPELINE_SYNC)
		die("pipeline: no sync");
	PQclear(r);
}

static void
pg_pipeline_clear(Stmt *s, int n)
{
	for (int i = 0; i < n; i++)
		PQclear(s[i].result);
}

/* ---------------------------------------------------------------------------------------------
 * Redis */

static redisContext *
redis_connect(void)
{
	redisContext *c = redisConnect("127.0.0.1", redis_port);

	if (c == NULL || c->err)
		die("redis: %s", c ? c->errstr : "out of memory");
	return c;
}

static redisReply *
redis_cmd(redisContext *c, int type, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (r == NULL)
		die("redis: %s", c->errstr);
	if (r->type != type)
		die("redis: unexpected reply (type %d%s%s) to %s", r->type,
			r->type == REDIS_REPLY_ERROR ? ": " : "", r->type == REDIS_REPLY_ERROR ? r->str : "",
			fmt);
	return r;
}

static void
redis_load_scripts(void)
{
	redisContext *c = redis_connect();
	redisReply *r;

	r = redis_cmd(c, REDIS_REPLY_STRING, "SCRIPT LOAD %s", acquire_lua);
	snprintf(acquire_sha, sizeof(acquire_sha), "%s", r->str);
	freeReplyObject(r);
	r = redis_cmd(c, REDIS_REPLY_STRING, "SCRIPT LOAD %s", release_lua);
	snprintf(release_sha, sizeof(release_sha), "%s", r->str);
	freeReplyObject(r);
	redisFree(c);
}

/* ---------------------------------------------------------------------------------------------
 * etcd's v3 JSON gateway */

typedef struct Etcd
{
	CURL *curl;
	char *buf;
	size_t len, cap;
} Etcd;

static size_t
etcd_sink(char *p, size_t size, size_t n, void *arg)
{
	Etcd *e = arg;

	if (e->len + size * n + 1 > e->cap)
	{
		e->cap = (e->len + size * n + 1) * 2;
		if ((e->buf = realloc(e->buf, e->cap)) == NULL)
			die("out of memory");
	}
	memcpy(e->buf + e->len, p, size * n);
	e->len += size * n;
	e->buf[e->len] = '\0';
	return size * n;
}

static void
etcd_init(Etcd *e)
{
	memset(e, 0, sizeof(*e));
	if ((e->curl = curl_easy_init()) == NULL)
		die("curl_easy_init failed");
	curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, etcd_sink);
	curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e->curl, CURLOPT_TCP_NODELAY, 1L);
}

/* POST a JSON body to a gateway path; the reply (HTTP 200 with a header) is in e->buf. */
static const char *
etcd_post(Etcd *e, const char *path, const char *body)
{
	char url[256];
	long code = 0;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", etcd_url, path);
	e->len = 0;
	if (e->buf)
		e->buf[0] = '\0';
	curl_easy_setopt(e->curl, CURLOPT_URL, url);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
	if ((rc = curl_easy_perform(e->curl)) != CURLE_OK)
		die("etcd %s: %s", path, curl_easy_strerror(rc));
	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200 || e->buf == NULL || strstr(e->buf, "\"header\"") == NULL)
		die("etcd %s: HTTP %ld: %s", path, code, e->buf ? e->buf : "");
	return e->buf;
}

/* The number after "field":" (the gateway writes int64 as strings); -1 when absent. */
static long long
json_int(const char *json, const char *field)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":\"", field);
	if ((p = strstr(json, pat)) == NULL)
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

static void
base64(const char *in, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), i;
	char *o = out;

	for (i = 0; i + 2 < n; i += 3)
	{
		unsigned v = (unsigned char) in[i] << 16 | (unsigned char) in[i + 1] << 8 |
					 (unsigned char) in[i + 2];
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63];
		*o++ = tab[v & 63];
	}
	if (i < n)
	{
		unsigned v = (unsigned char) in[i] << 16 | (i + 1 < n ? (unsigned char) in[i + 1] << 8 : 0);
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
}

/* ---------------------------------------------------------------------------------------------
 * ZooKeeper */

static void
zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void) zh, (void) type, (void) state, (void) path, (void) ctx;
}

static zhandle_t *
zk_connect(int timeout_ms)
{
	zhandle_t *zh = zookeeper_init(zk_hosts, zk_watcher, timeout_ms, NULL, NULL, 0);
	double deadline = now_s() + 10;

	if (zh == NULL)
		die("zookeeper_init: %s", strerror(errno));
	while (zoo_state(zh) != ZOO_CONNECTED_STATE)
	{
		if (now_s() > deadline)
			die("zookeeper: not connected to %s after 10 s", zk_hosts);
		usleep(10000);
	}
	return zh;
}

static void
zk_check(int rc, const char *what)
{
	if (rc != ZOK)
		die("zookeeper %s: %s", what, zerror(rc));
}

/* ---------------------------------------------------------------------------------------------
 * One client: its connections and the lock steps of every contender. */

typedef struct Client
{
	pthread_t thread;
	unsigned seed;
	PGconn *pg;
	redisContext *redis;
	Etcd etcd;
	zhandle_t *zk;
	long cycles, busy, writes;
	/* the lock held: */
	char resource[32];
	char owner[32];
	long long token;
	long long lease; /* etcd */
	char node[128];  /* zk */
} Client;

static void
client_open(Client *cl, int safety, int zk_timeout_ms)
{
	cl->pg = pg_connect();
	pg_prepare_all(cl->pg, safety);
	if (who == FL2 || who == FL1)
		if (!PQenterPipelineMode(cl->pg))
			die("cannot enter pipeline mode");
	if (who == REDIS)
		cl->redis = redis_connect();
	if (who == ETCD)
		etcd_init(&cl->etcd);
	if (who == ZK)
		cl->zk = zk_connect(zk_timeout_ms);
}

static void
client_close(Client *cl)
{
	PQfinish(cl->pg);
	if (cl->redis)
		redisFree(cl->redis);
	if (cl->etcd.curl)
		curl_easy_cleanup(cl->etcd.curl), free(cl->etcd.buf);
	if (cl->zk)
		zookeeper_close(cl->zk);
}

/* Take key k's lock with a fresh owner; 1 and cl->token set, or 0 when busy.  (fl1 does its whole
 * cycle in cycle_fl1.) */
static int
lock_take(Client *cl, long k)
{
	snprintf(cl->owner, sizeof(cl->owner), "%llu", (unsigned long long) next_random(&cl->seed));
	if (who <= FLX)
	{
		char ttl[32];
		const char *p[3] = {cl->resource, cl->owner, ttl};
		PGresult *r;
		int got;

		snprintf(ttl, sizeof(ttl), "%ld milliseconds", ttl_ms);
		if (who == FL2)
		{
			Stmt s = {"acq", 3, {cl->resource, cl->owner, ttl}, NULL};

			pg_pipeline(cl->pg, &s, 1);
			r = s.result;
		}
		else
			r = pg_exec(cl->pg, "acq", 3, p);
		if (PQntuples(r) != 1)
			die("acquire: %d rows", PQntuples(r));
		got = !PQgetisnull(r, 0, 0);
		if (got)
			cl->token = atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
		return got;
	}
	if (who == REDIS)
	{
		redisReply *r =
			redis_cmd(cl->redis, REDIS_REPLY_INTEGER, "EVALSHA %s 2 lock:%ld fence:%ld %s %ld",
					  acquire_sha, k, k, cl->owner, ttl_ms);

		cl->token = r->integer;
		freeReplyObject(r);
		return cl->token > 0;
	}
	if (who == ETCD)
	{
		char body[512], key[64], key64[96], val64[64];
		const char *j;

		snprintf(body, sizeof(body), "{\"TTL\":\"%ld\"}", (ttl_ms + 999) / 1000);
		j = etcd_post(&cl->etcd, "/v3/lease/grant", body);
		if ((cl->lease = json_int(j, "ID")) <= 0)
			die("etcd lease grant: %s", j);
		snprintf(key, sizeof(key), "seed/%ld", k);
		base64(key, key64);
		base64(cl->owner, val64);
		snprintf(body, sizeof(body),
				 "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
				 "\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"%s\","
				 "\"value\":\"%s\",\"lease\":\"%lld\"}}]}",
				 key64, key64, val64, cl->lease);
		j = etcd_post(&cl->etcd, "/v3/kv/txn", body);
		if (strstr(j, "\"succeeded\":true") != NULL)
		{
			if ((cl->token = json_int(j, "revision")) <= 0)
				die("etcd txn: no revision: %s", j);
			return 1;
		}
		/* Busy: give the lease back. */
		snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", cl->lease);
		etcd_post(&cl->etcd, "/v3/lease/revoke", body);
		return 0;
	}
	/* ZK */
	{
		char parent[64], path[80];
		struct Stat st;
		struct String_vector kids;
		int lowest = 1;
		const char *ours;

		snprintf(parent, sizeof(parent), "/seed/%ld", k);
		snprintf(path, sizeof(path), "%s/n-", parent);
		zk_check(zoo_create2(cl->zk, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
							 cl->node, sizeof(cl->node), &st),
				 "create");
		cl->token = st.czxid;
		zk_check(zoo_get_children(cl->zk, parent, 0, &kids), "get children");
		ours = cl->node + strlen(parent) + 1;
		for (int i = 0; i < kids.count; i++)
			if (strcmp(kids.data[i], ours) < 0)
				lowest = 0;
		deallocate_String_vector(&kids);
		if (lowest)
			return 1;
		zk_check(zoo_delete(cl->zk, cl->node, -1), "delete (busy)");
		return 0;
	}
}

/* Release the lock lock_take took; checked: it must still have been ours. */
static void
lock_give(Client *cl)
{
	if (who == FL3)
	{
		char fence[32];
		const char *p[3] = {cl->resource, cl->owner, fence};
		PGresult *r;

		snprintf(fence, sizeof(fence), "%lld", cl->token);
		r = pg_exec(cl->pg, "rel", 3, p);
		if (PQntuples(r) != 1 || strcmp(PQgetvalue(r, 0, 0), "t") != 0)
			die("release refused (%s %s)", cl->resource, fence);
		PQclear(r);
	}
	else if (who == REDIS)
	{
		char key[48];
		redisReply *r;

		snprintf(key, sizeof(key), "lock:%s", cl->resource);
		r = redis_cmd(cl->redis, REDIS_REPLY_INTEGER, "EVALSHA %s 1 %s %s", release_sha, key,
					  cl->owner);
		if (r->integer != 1)
			die("compare-and-delete refused (%s)", key);
		freeReplyObject(r);
	}
	else if (who == ETCD)
	{
		char body[64];
		const char *j;

		snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", cl->lease);
		j = etcd_post(&cl->etcd, "/v3/lease/revoke", body);
		(void) j;
	}
	else if (who == ZK)
		zk_check(zoo_delete(cl->zk, cl->node, -1), "delete");
}

/* The business write of key k with the held token (the cycle's conditional UPDATE). */
static int
business_write(Client *cl, long k, const char *stmt, const char *status)
{
	char id[32], tok[32];
	const char *p[3] = {id, tok, status};
	PGresult *r;
	int n;

	snprintf(id, sizeof(id), "%ld", k);
	snprintf(tok, sizeof(tok), "%lld", cl->token);
	r = pg_exec(cl->pg, stmt, status ? 3 : 2, p);
	n = pg_changed(r);
	PQclear(r);
	return n;
}

/* One cycle on key k: 1 done, 0 busy. */
static int
cycle(Client *cl, long k)
{
	char id[32], tok[32], ttl[32];

	snprintf(cl->resource, sizeof(cl->resource), who <= FLX ? "seed:%ld" : "%ld", k);
	if (who == FLX)
	{
		const char *p[3] = {cl->resource, cl->owner, id};
		PGresult *r;
		int wrote;

		snprintf(cl->owner, sizeof(cl->owner), "%llu", (unsigned long long) next_random(&cl->seed));
		snprintf(id, sizeof(id), "%ld", k);
		r = pg_exec(cl->pg, "updx", 3, p);
		wrote = pg_changed(r);
		PQclear(r);
		cl->writes += wrote;
		return wrote;
	}
	if (who == FL1)
	{
		Stmt s[2] = {{"upd1", 4, {cl->resource, cl->owner, ttl, id}, NULL},
					 {"rel1", 2, {cl->resource, cl->owner}, NULL}};
		int wrote, released;

		snprintf(cl->owner, sizeof(cl->owner), "%llu", (unsigned long long) next_random(&cl->seed));
		snprintf(id, sizeof(id), "%ld", k);
		snprintf(ttl, sizeof(ttl), "%ld milliseconds", ttl_ms);
		pg_pipeline(cl->pg, s, 2);
		wrote = pg_changed(s[0].result);
		released = PQntuples(s[1].result) == 1 && strcmp(PQgetvalue(s[1].result, 0, 0), "t") == 0;
		pg_pipeline_clear(s, 2);
		if (wrote != released)
			die("fl1: write %d, release %d", wrote, released);
		cl->writes += wrote;
		return released;
	}
	if (!lock_take(cl, k))
		return 0;
	if (who == FL2)
	{
		Stmt s[2] = {{"upd", 2, {id, tok}, NULL}, {"rel", 3, {cl->resource, cl->owner, tok}, NULL}};

		snprintf(id, sizeof(id), "%ld", k);
		snprintf(tok, sizeof(tok), "%lld", cl->token);
		pg_pipeline(cl->pg, s, 2);
		cl->writes += pg_changed(s[0].result);
		if (PQntuples(s[1].result) != 1 || strcmp(PQgetvalue(s[1].result, 0, 0), "t") != 0)
			die("release refused (%s %s)", cl->resource, tok);
		pg_pipeline_clear(s, 2);
		return 1;
	}
	cl->writes += business_write(cl, k, "upd", NULL);
	lock_give(cl);
	return 1;
}

static void *
work(void *arg)
{
	Client *cl = arg;
	double deadline = now_s() + seconds;

	while (now_s() < deadline)
	{
		if (cycle(cl, (long) (next_random(&cl->seed) % nkeys) + 1))
			cl->cycles++;
		else
			cl->busy++;
	}
	return NULL;
}

static int
run(void)
{
	Client *cls = calloc(nclients, sizeof(Client));
	long cycles = 0, busy = 0, writes = 0;
	double start;

	if (who == REDIS)
		redis_load_scripts();
	for (int i = 0; i < nclients; i++)
	{
		cls[i].seed = (unsigned) (getpid() * 7919 + i * 104729 + (long) time(NULL));
		client_open(&cls[i], 0, 30000);
	}
	start = now_s();
	for (int i = 0; i < nclients; i++)
		pthread_create(&cls[i].thread, NULL, work, &cls[i]);
	for (int i = 0; i < nclients; i++)
	{
		pthread_join(cls[i].thread, NULL);
		cycles += cls[i].cycles;
		busy += cls[i].busy;
		writes += cls[i].writes;
	}
	printf("cycles=%ld busy=%ld writes=%ld seconds=%.3f\n", cycles, busy, writes, now_s() - start);
	for (int i = 0; i < nclients; i++)
		client_close(&cls[i]);
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Verification: the rows against the lock service. */

static int
verify(void)
{
	Client cl = {0};
	PGresult *rows;
	char sql[512];
	long long writes = 0, violations = 0, held = 0, ceiling = 0;
	const char *j;

	if (who == REDIS)
		redis_load_scripts();
	client_open(&cl, 0, 30000);
	if (who == FL2 || who == FL1)
		PQexitPipelineMode(cl.pg);
	if (who <= FLX)
		snprintf(
			sql, sizeof(sql),
			"SELECT id, last_fence, writes, coalesce(fencelock.current_fence('seed:' || id), 0) "
			"FROM %s ORDER BY id",
			table_of(who));
	else
		snprintf(sql, sizeof(sql), "SELECT id, last_fence, writes, 0 FROM %s ORDER BY id",
				 table_of(who));
	rows = PQexec(cl.pg, sql);
	if (PQresultStatus(rows) != PGRES_TUPLES_OK)
		die("verify: %s", PQerrorMessage(cl.pg));
	if (who <= FLX)
	{
		PGresult *r = PQexec(cl.pg, "SELECT count(*) FROM fencelock.lease WHERE resource LIKE "
									"'seed:%' AND owner IS NOT NULL AND expires_at > now()");

		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			die("verify: %s", PQerrorMessage(cl.pg));
		held = atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	if (who == ETCD)
	{
		char body[256], from[32], to[32];

		base64("seed/", from);
		base64("seed0", to);
		snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\",\"count_only\":true}",
				 from, to);
		j = etcd_post(&cl.etcd, "/v3/kv/range", body);
		ceiling = json_int(j, "revision");
		held = json_int(j, "count") > 0 ? json_int(j, "count") : 0;
		j = etcd_post(&cl.etcd, "/v3/lease/leases", "{}");
		if (strstr(j, "\"ID\"") != NULL)
			held++;
	}
	for (int i = 0; i < PQntuples(rows); i++)
	{
		long id = atol(PQgetvalue(rows, i, 0));
		long long fence = atoll(PQgetvalue(rows, i, 1)), top = atoll(PQgetvalue(rows, i, 3));

		if (id > 0)
			writes += atoll(PQgetvalue(rows, i, 2));
		if (who == REDIS)
		{
			redisReply *r = redisCommand(cl.redis, "GET fence:%ld", id);

			if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
				die("verify: GET fence:%ld", id);
			top = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
			freeReplyObject(r);
			r = redis_cmd(cl.redis, REDIS_REPLY_INTEGER, "EXISTS lock:%ld", id);
			held += r->integer;
			freeReplyObject(r);
		}
		else if (who == ETCD)
			top = ceiling;
		else if (who == ZK)
		{
			char path[64];
			struct Stat st;

			snprintf(path, sizeof(path), "/seed/%ld", id);
			zk_check(zoo_exists(cl.zk, path, 0, &st), path);
			top = st.pzxid;
			held += st.numChildren;
		}
		if (fence > top)
			violations++;
	}
	printf("writes=%lld violations=%lld held=%lld rows=%d\n", writes, violations, held,
		   PQntuples(rows));
	PQclear(rows);
	client_close(&cl);
	return 0;
}

static int
zk_setup(void)
{
	zhandle_t *zh = zk_connect(30000);
	char path[64];
	int rc;

	rc = zoo_create(zh, "/seed", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc != ZOK && rc != ZNODEEXISTS)
		zk_check(rc, "create /seed");
	for (long k = 0; k <= nkeys; k++)
	{
		snprintf(path, sizeof(path), "/seed/%ld", k);
		rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
		if (rc != ZOK && rc != ZNODEEXISTS)
			zk_check(rc, path);
	}
	zookeeper_close(zh);
	printf("created /seed/0 .. /seed/%ld\n", nkeys);
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The safety row on key 0. */

/* Take key 0, retrying while busy, for up to 15 s. */
static void
take_key0(Client *cl)
{
	double deadline = now_s() + 15;

	snprintf(cl->resource, sizeof(cl->resource), who <= FLX ? "seed:%d" : "%d", 0);
	while (!lock_take(cl, 0))
	{
		if (now_s() > deadline)
			die("safety: key 0 still busy after 15 s");
		usleep(50000);
	}
}

static int
safety(const char *form)
{
	int naive = strcmp(form, "naive") == 0;
	int tokpipe[2], donepipe[2], status;
	pid_t a;
	char line[64];
	long long a_token;
	Client b = {0};
	PGresult *r;
	ssize_t n;
	char sql[128];

	if (!naive && strcmp(form, "cond") != 0)
		die("-S cond or -S naive");
	if (who == FL1 || who == FL2 || who == FLX)
		who = FL3; /* the same lease and trigger: the safety row is the form-independent part */
	if (who == REDIS)
		redis_load_scripts();
	if (pipe(tokpipe) || pipe(donepipe))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	if ((a = fork()) < 0)
		die("fork: %s", strerror(errno));
	if (a == 0)
	{
		/* Holder A: take key 0 with the short TTL, report the token, "work" 1 s, then write. */
		Client cl = {0};
		int wrote;
		PGresult *w;
		char id[] = "0", tok[32];
		const char *p[3] = {id, tok, "A"};

		cl.seed = getpid();
		zoo_set_debug_level(0); /* its session expiring while it is paused is the point */
		client_open(&cl, 1, (int) ttl_ms);
		take_key0(&cl);
		dprintf(tokpipe[1], "%lld\n", cl.token);
		usleep(1000000);
		snprintf(tok, sizeof(tok), "%lld", cl.token);
		w = PQexecPrepared(cl.pg, naive ? "snaive" : "scond", 3, p, NULL, NULL, 0);
		if (PQresultStatus(w) == PGRES_COMMAND_OK)
			wrote = strcmp(PQcmdTuples(w), "1") == 0 ? 1 : 0;
		else
			wrote = 2; /* refused with an error (fencelock's FL001) */
		dprintf(donepipe[1], "%d %s\n", wrote,
				wrote == 2 ? PQresultErrorField(w, PG_DIAG_SQLSTATE) : "-");
		_exit(0);
	}
	close(tokpipe[1]);
	close(donepipe[1]);
	if ((n = read(tokpipe[0], line, sizeof(line) - 1)) <= 0)
		die("safety: holder A reported no token");
	line[n] = '\0';
	a_token = atoll(line);
	if (kill(a, SIGSTOP) != 0)
		die("kill SIGSTOP: %s", strerror(errno));
	/* A is paused past its TTL (etcd rounds a lease up to whole seconds; ZooKeeper's session
	 * expires after its timeout). */
	usleep((useconds_t) (ttl_ms * 1000 + (who == ETCD ? 2500000 : 1500000)));

	/* B holds its lock with the benchmark's TTL: A's remaining "work" after SIGCONT must not
	 * outlast B's lock before B releases it. */
	ttl_ms = 30000;
	b.seed = getpid() * 31;
	client_open(&b, 1, 30000);
	take_key0(&b);
	if (b.token <= a_token)
		die("safety: B's token %lld is not above A's %lld", b.token, a_token);
	if (business_write(&b, 0, "scond", "B") != 1)
		die("safety: B's write changed nothing");
	if (kill(a, SIGCONT) != 0)
		die("kill SIGCONT: %s", strerror(errno));
	if ((n = read(donepipe[0], line, sizeof(line) - 1)) <= 0)
		die("safety: holder A reported no write");
	line[n] = '\0';
	waitpid(a, &status, 0);
	if (who == ETCD)
		lock_give(&b);
	else if (who == FL3)
	{
		char fence[32];
		const char *p[3] = {b.resource, b.owner, fence};

		snprintf(fence, sizeof(fence), "%lld", b.token);
		PQclear(pg_exec(b.pg, "rel", 3, p));
	}
	else
		lock_give(&b);
	snprintf(sql, sizeof(sql), "SELECT status FROM %s WHERE id = 0", table_of(who));
	r = PQexec(b.pg, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		die("safety: %s", PQerrorMessage(b.pg));
	line[strcspn(line, "\n")] = '\0';
	printf("safety=%s a=%s tokens=%lld,%lld a_error=%s\n",
		   strcmp(PQgetvalue(r, 0, 0), "B") == 0 ? "kept" : "lost",
		   line[0] == '1'   ? "written"
		   : line[0] == '2' ? "refused"
							: "changed-nothing",
		   a_token, b.token, line + 2);
	PQclear(r);
	client_close(&b);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *contender = NULL, *safety_form = NULL;
	int opt, do_verify = 0, do_setup = 0;

	while ((opt = getopt(argc, argv, "C:c:T:n:t:r:e:z:VIS:")) != -1)
	{
		switch (opt)
		{
			case 'C':
				contender = optarg;
				break;
			case 'c':
				nclients = atoi(optarg);
				break;
			case 'T':
				seconds = atof(optarg);
				break;
			case 'n':
				nkeys = atol(optarg);
				break;
			case 't':
				ttl_ms = atol(optarg);
				break;
			case 'r':
				redis_port = atoi(optarg);
				break;
			case 'e':
				etcd_url = optarg;
				break;
			case 'z':
				zk_hosts = optarg;
				break;
			case 'V':
				do_verify = 1;
				break;
			case 'I':
				do_setup = 1;
				break;
			case 'S':
				safety_form = optarg;
				break;
			default:
				fprintf(stderr, "usage: seed -C fl3|fl2|fl1|flx|redis|etcd|zk [-c clients] "
								"[-T seconds] [-n keys] [-t ttl_ms] [-r port] [-e url] [-z "
								"host:port] [-V | -I | -S cond|naive]\n");
				return 2;
		}
	}
	for (who = FL3; contender && who <= ZK; who++)
		if (strcmp(contender, names[who]) == 0)
			break;
	if (contender == NULL || who > ZK || nclients < 1 || nkeys < 1 || seconds <= 0 || ttl_ms < 1)
	{
		fprintf(stderr, "seed: bad arguments (-C is one of fl3 fl2 fl1 flx redis etcd zk)\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	if (do_setup)
		return zk_setup();
	if (do_verify)
		return verify();
	if (safety_form)
		return safety(safety_form);
	return run();
}
