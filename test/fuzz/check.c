/*
 * check.c — the fuzzer's invariants: checked as results come in, by a superuser connection every
 * few hundred milliseconds, and at the end.
 *
 *   two owners     every committed grant's (resource, fence) is kept with its owner token; the
 *                  same pair committed to another owner is a violation (and, with
 *                  fencelock.history on, a history row naming another owner than the grant's)
 *   fence down     current_fence(r) read after a fence F of r was committed or read is never
 *                  below F (NULL is allowed: purge deletes idle rows and keeps a floor)
 *   permits        lease_holders never shows more live holders of a permit group than its
 *                  permits, nor two live holders in one slot
 *   reserved       (fuzz.c) no call or write of a non-grantee on a reserved name succeeds
 *   internal       (fuzz.c) no XX000-class error, no lost backend, nothing in the server log
 *   amcheck        at the end, bt_index_check and verify_heapam on fencelock's and fuzz_ws's
 *                  tables and indexes
 */
#include "fuzz.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

uint64_t fz_seed;
int64_t fz_started_us;
int64_t fz_first_violation_us;

static long counts[FZ_NVIOLATIONS];

static const char *const names[FZ_NVIOLATIONS] = {
	[V_TWO_OWNERS] = "fence granted to two owners",
	[V_PERMITS] = "more live holders than permits",
	[V_RESERVED] = "reserved name used by a non-grantee",
	[V_FENCE_DOWN] = "current_fence went down",
	[V_INTERNAL] = "internal error (XX...)",
	[V_LOST_BACKEND] = "backend lost",
	[V_SERVER_LOG] = "crash or assertion in server log",
	[V_HISTORY] = "history disagrees with a grant",
	[V_AMCHECK] = "amcheck",
};

const char *
fz_violation_name(FzViolation v)
{
	return names[v];
}

long
fz_violations(FzViolation v)
{
	return counts[v];
}

/* Print a violation (the first 20 of each kind in full) with the seed. */
void
fz_violation(FzViolation v, const char *fmt, ...)
{
	va_list ap;

	if (fz_first_violation_us == 0)
		fz_first_violation_us = fz_now_us();
	if (++counts[v] > 20)
		return;
	printf("VIOLATION %s (seed %llu): ", names[v], (unsigned long long) fz_seed);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (counts[v] == 20)
		printf("(further violations of this kind are counted, not printed)\n");
	fflush(stdout);
}

/* The committed grants: (resource, fence) -> owner, chained in a fixed table. */
typedef struct Entry
{
	struct Entry *next;
	char *resource;
	char *owner;
	int64_t fence;
} Entry;

#define NBUCKETS 65536
static Entry *buckets[NBUCKETS];
static long nentries;
static int64_t committed_max[64]; /* per pool name: the highest fence known committed */

void
fz_check_init(void)
{
	memset(buckets, 0, sizeof(buckets));
	memset(committed_max, 0, sizeof(committed_max));
}

static uint32_t
hash_of(const char *s, int64_t fence)
{
	uint32_t h = 2166136261u ^ (uint32_t) fence;

	for (; *s; s++)
		h = (h ^ (unsigned char) *s) * 16777619u;
	return h % NBUCKETS;
}

static int
pool_index(const char *resource)
{
	for (int i = 0; i < fz_pool_size() && i < 64; i++)
		if (strcmp(fz_pool_resource(i), resource) == 0)
			return i;
	return -1;
}

/* N grants committed: record them, a pair already committed to another owner is a violation. */
void
fz_commit_grants(const FzCatalog *cat, FzGrant *g, int n, FzStats *st)
{
	(void) cat;
	for (int i = 0; i < n; i++)
	{
		uint32_t h = hash_of(g[i].resource, g[i].fence);
		Entry *e;
		int p;

		st->grants_committed++;
		for (e = buckets[h]; e; e = e->next)
			if (e->fence == g[i].fence && strcmp(e->resource, g[i].resource) == 0)
				break;
		if (e && strcmp(e->owner, g[i].owner) != 0)
			fz_violation(V_TWO_OWNERS,
						 "resource \"%.80s\" fence %lld to \"%.40s\", then to \"%.40s\"",
						 g[i].resource, (long long) g[i].fence, e->owner, g[i].owner);
		else if (!e)
		{
			e = malloc(sizeof(Entry));
			e->resource = fz_strdup(g[i].resource);
			e->owner = fz_strdup(g[i].owner);
			e->fence = g[i].fence;
			e->next = buckets[h];
			buckets[h] = e;
			nentries++;
		}
		p = pool_index(g[i].resource);
		if (p >= 0 && g[i].fence > committed_max[p])
			committed_max[p] = g[i].fence;
	}
}

/* The running checks, on the superuser's connection. */
void
fz_observe(PGconn *admin, FzStats *st)
{
	char sql[2048];
	size_t used;
	PGresult *res;

	st->checks++;
	used = (size_t) snprintf(sql, sizeof(sql),
							 "SELECT r, fencelock.current_fence(r) FROM pg_catalog.unnest(ARRAY[");
	for (int i = 0; i < fz_pool_size(); i++)
		used += (size_t) snprintf(sql + used, sizeof(sql) - used, "%s'%s'", i ? ", " : "",
								  fz_pool_resource(i));
	snprintf(sql + used, sizeof(sql) - used, "]::text[]) WITH ORDINALITY AS u(r, i) ORDER BY i");
	res = PQexec(admin, sql);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
	{
		for (int r = 0; r < PQntuples(res); r++)
		{
			int64_t v;

			if (PQgetisnull(res, r, 1))
				continue;
			v = strtoll(PQgetvalue(res, r, 1), NULL, 10);
			st->observations++;
			if (v < committed_max[r])
				fz_violation(V_FENCE_DOWN, "current_fence('%s') = %lld after fence %lld was seen",
							 fz_pool_resource(r), (long long) v, (long long) committed_max[r]);
			else
				committed_max[r] = v;
			fz_note_fence(fz_pool_resource(r), v);
		}
	}
	else
		fprintf(stderr, "fuzz: current_fence check failed: %s", PQerrorMessage(admin));
	PQclear(res);

	res = PQexec(
		admin,
		"SELECT h.resource, pg_catalog.max(h.permits), pg_catalog.count(*), "
		"       pg_catalog.count(DISTINCT h.slot), "
		"       pg_catalog.string_agg(h.owner || ' slot ' || h.slot || ' fence ' || h.fence, "
		"', ' ORDER BY h.slot) "
		"  FROM fencelock.lease_holders AS h "
		" WHERE h.mode = 'permit' AND h.state = 'held' "
		" GROUP BY h.resource "
		"HAVING pg_catalog.count(*) > pg_catalog.max(h.permits) "
		"    OR pg_catalog.count(*) <> pg_catalog.count(DISTINCT h.slot)");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
	{
		for (int r = 0; r < PQntuples(res); r++)
			fz_violation(V_PERMITS,
						 "resource \"%.80s\": %s live holders in %s slots of %s permits: %.300s",
						 PQgetvalue(res, r, 0), PQgetvalue(res, r, 2), PQgetvalue(res, r, 3),
						 PQgetvalue(res, r, 1), PQgetvalue(res, r, 4));
	}
	else
		fprintf(stderr, "fuzz: permit check failed: %s", PQerrorMessage(admin));
	PQclear(res);
}

/* COPY text format: backslash, tab, newline and carriage return escaped. */
static void
copy_field(PGconn *conn, const char *s)
{
	char buf[4200];
	size_t n = 0;

	for (; *s && n < sizeof(buf) - 3; s++)
	{
		switch (*s)
		{
			case '\\':
				buf[n++] = '\\';
				buf[n++] = '\\';
				break;
			case '\t':
				buf[n++] = '\\';
				buf[n++] = 't';
				break;
			case '\n':
				buf[n++] = '\\';
				buf[n++] = 'n';
				break;
			case '\r':
				buf[n++] = '\\';
				buf[n++] = 'r';
				break;
			default:
				buf[n++] = *s;
		}
	}
	PQputCopyData(conn, buf, (int) n);
}

/* fencelock.history (when it has rows) against every committed grant the fuzzer saw. */
static void
audit_history(PGconn *admin)
{
	PGresult *res;

	if (!fz_exec_ok(admin, "CREATE TEMP TABLE fz_grant (resource text, fence bigint, owner text)",
					"creating fz_grant"))
		return;
	res = PQexec(admin, "COPY fz_grant FROM STDIN");
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		fprintf(stderr, "fuzz: COPY fz_grant failed: %s", PQerrorMessage(admin));
		PQclear(res);
		return;
	}
	PQclear(res);
	for (int b = 0; b < NBUCKETS; b++)
		for (Entry *e = buckets[b]; e; e = e->next)
		{
			char num[32];

			copy_field(admin, e->resource);
			snprintf(num, sizeof(num), "\t%lld\t", (long long) e->fence);
			PQputCopyData(admin, num, (int) strlen(num));
			copy_field(admin, e->owner);
			PQputCopyData(admin, "\n", 1);
		}
	PQputCopyEnd(admin, NULL);
	res = PQgetResult(admin);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fprintf(stderr, "fuzz: COPY fz_grant failed: %s", PQerrorMessage(admin));
	PQclear(res);
	while ((res = PQgetResult(admin)) != NULL)
		PQclear(res);
	res = PQexec(admin, "SELECT g.resource, g.fence, g.owner, h.owner "
						"  FROM fz_grant AS g JOIN fencelock.history AS h "
						"    ON h.resource = g.resource AND h.fence = g.fence "
						" WHERE h.owner <> g.owner AND g.owner NOT LIKE '(uuid %' "
						" ORDER BY 1, 2 LIMIT 20");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int r = 0; r < PQntuples(res); r++)
			fz_violation(V_HISTORY,
						 "resource \"%.80s\" fence %s granted to \"%.40s\", history says \"%.40s\"",
						 PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
						 PQgetvalue(res, r, 3));
	else
		fprintf(stderr, "fuzz: history audit failed: %s", PQerrorMessage(admin));
	PQclear(res);
	fz_exec_ok(admin, "DROP TABLE fz_grant", "dropping fz_grant");
}

/* amcheck on every btree index and table of fencelock and fuzz_ws; *RAN: whether it could. */
static void
audit_amcheck(PGconn *admin, bool *ran)
{
	PGresult *res;
	PGresult *rels;
	bool created = false;

	*ran = false;
	res = PQexec(admin,
				 "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'amcheck'), "
				 "       EXISTS (SELECT FROM pg_catalog.pg_available_extensions "
				 "                WHERE name = 'amcheck')");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQgetvalue(res, 0, 1)[0] != 't')
	{
		printf("NOTICE: amcheck is not installed in this server: the amcheck audit is skipped\n");
		PQclear(res);
		return;
	}
	if (PQgetvalue(res, 0, 0)[0] != 't')
	{
		if (!fz_exec_ok(admin, "CREATE EXTENSION amcheck", "CREATE EXTENSION amcheck"))
		{
			PQclear(res);
			return;
		}
		created = true;
	}
	PQclear(res);
	rels = PQexec(
		admin, "SELECT c.oid, pg_catalog.format('%I.%I', n.nspname, c.relname), "
			   "       c.relkind = 'i' "
			   "  FROM pg_catalog.pg_class AS c "
			   "  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
			   "  LEFT JOIN pg_catalog.pg_am AS a ON a.oid = c.relam "
			   " WHERE n.nspname IN ('fencelock', 'fuzz_ws') AND c.relpersistence = 'p' "
			   "   AND ((c.relkind = 'i' AND a.amname = 'btree') OR c.relkind IN ('r', 'm', 't')) "
			   " ORDER BY 2");
	if (PQresultStatus(rels) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "fuzz: listing relations for amcheck failed: %s", PQerrorMessage(admin));
		PQclear(rels);
		return;
	}
	*ran = true;
	for (int r = 0; r < PQntuples(rels); r++)
	{
		char sql[256];
		bool index = PQgetvalue(rels, r, 2)[0] == 't';

		if (index)
			snprintf(sql, sizeof(sql), "SELECT bt_index_check(%s, true)", PQgetvalue(rels, r, 0));
		else
			snprintf(sql, sizeof(sql),
					 "SELECT pg_catalog.count(*), pg_catalog.min(msg) FROM verify_heapam(%s)",
					 PQgetvalue(rels, r, 0));
		res = PQexec(admin, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			fz_violation(V_AMCHECK, "%s on %s: %s", index ? "bt_index_check" : "verify_heapam",
						 PQgetvalue(rels, r, 1), PQerrorMessage(admin));
		else if (!index && strcmp(PQgetvalue(res, 0, 0), "0") != 0)
			fz_violation(V_AMCHECK, "verify_heapam on %s: %s problems, first: %s",
						 PQgetvalue(rels, r, 1), PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
		PQclear(res);
	}
	printf("amcheck: %d relations checked\n", PQntuples(rels));
	PQclear(rels);
	if (created)
		fz_exec_ok(admin, "DROP EXTENSION amcheck", "DROP EXTENSION amcheck");
}

void
fz_final_audit(PGconn *admin, FzStats *st, bool *amcheck_ran)
{
	fz_observe(admin, st);
	audit_history(admin);
	audit_amcheck(admin, amcheck_ran);
}

long
fz_log_offset(const char *path)
{
	FILE *f = path ? fopen(path, "r") : NULL;
	long off = 0;

	if (f)
	{
		fseek(f, 0, SEEK_END);
		off = ftell(f);
		fclose(f);
	}
	return off;
}

/* The server log from OFFSET on: a crash or a failed assertion is a violation. */
void
fz_scan_log(const char *path, long offset)
{
	static const char *const bad[] = {"terminated by signal",
									  "TRAP:", "PANIC:", "was terminated by exception",
									  "terminated by exception"};
	char line[2048];
	FILE *f;

	if (path == NULL)
		return;
	f = fopen(path, "r");
	if (f == NULL)
	{
		printf("NOTICE: cannot read the server log %s: not scanned\n", path);
		return;
	}
	fseek(f, offset, SEEK_SET);
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strstr(line, bad[i]))
			{
				line[strcspn(line, "\n")] = '\0';
				fz_violation(V_SERVER_LOG, "%s: %s", path, line);
				break;
			}
	fclose(f);
}
