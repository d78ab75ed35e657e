/*
 * audit.c — the harness's tables, loading the workers' logs, the audit and the summary.
 *
 * Tables (dropped and created at every start; left in place afterwards for inspection):
 *   chaos_account  the business rows, one per resource, guarded by fencelock.fence_trigger
 *   chaos_history  one row per accepted write, inserted after the fenced UPDATE in the same
 *                  transaction, so per resource its id order is the commit order
 *   chaos_leased, chaos_leased_history   the same writes to a lease-bound table (each row bound to
 *                  the lease it names), in a transaction of their own after the per-row one
 *   chaos_set_row, chaos_set_lease   one set per resource, per-row fenced and lease-bound: every
 *                  round reads both (before the worker may be frozen) and writes each back with one
 *                  element added (a read-modify-write)
 *   chaos_grant, chaos_ack, chaos_release, chaos_leased_ack, chaos_set_row_ack,
 *   chaos_set_lease_ack   what the workers were told (from their logs)
 */
#include "chaos.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_LEN 1024
#define EXAMPLES     3

static const char SQL_SCHEMA[] =
	"SET client_min_messages = warning;"
	"DROP TABLE IF EXISTS chaos_history, chaos_account, chaos_grant, chaos_ack, chaos_release,"
	"  chaos_leased, chaos_leased_history, chaos_leased_ack, chaos_set_row, chaos_set_lease,"
	"  chaos_set_row_ack, chaos_set_lease_ack;"
	"CREATE TABLE chaos_account ("
	"  resource text PRIMARY KEY,"
	"  last_fence bigint NOT NULL DEFAULT 0,"
	"  counter bigint NOT NULL DEFAULT 0,"
	"  last_owner text);"
	"CREATE TRIGGER fence BEFORE UPDATE ON chaos_account FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence');"
	"CREATE TABLE chaos_history ("
	"  id bigserial PRIMARY KEY,"
	"  resource text NOT NULL,"
	"  owner text NOT NULL,"
	"  fence bigint NOT NULL,"
	"  seq bigint NOT NULL,"
	"  committed_at timestamptz NOT NULL DEFAULT clock_timestamp());"
	"CREATE TABLE chaos_grant (resource text, fence bigint, owner text,"
	"  pre timestamptz, post timestamptz, ttl_ms integer);"
	"CREATE TABLE chaos_ack (resource text, fence bigint, owner text, seq bigint);"
	"CREATE TABLE chaos_release (resource text, fence bigint, owner text, released boolean,"
	"  pre timestamptz, post timestamptz);"
	"CREATE TABLE chaos_leased (LIKE chaos_account INCLUDING ALL);"
	"CREATE TABLE chaos_leased_history (LIKE chaos_history INCLUDING ALL);"
	"CREATE TABLE chaos_leased_ack (LIKE chaos_ack);"
	"CREATE TABLE chaos_set_row ("
	"  resource text PRIMARY KEY,"
	"  v text[] NOT NULL DEFAULT '{}',"
	"  last_fence bigint NOT NULL DEFAULT 0);"
	"CREATE TRIGGER fence BEFORE UPDATE ON chaos_set_row FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence');"
	"CREATE TABLE chaos_set_lease (LIKE chaos_set_row INCLUDING ALL);"
	"CREATE TABLE chaos_set_row_ack (resource text, elem text);"
	"CREATE TABLE chaos_set_lease_ack (resource text, elem text);"
	"RESET client_min_messages;";

/* After the rows exist (no lease has been granted yet): the lease-bound triggers. */
static const char SQL_LEASE_BOUND[] =
	"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON chaos_leased FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=resource');"
	"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON chaos_set_lease FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=resource');";

bool
setup_schema(PGconn *conn, const ChaosOptions *opt)
{
	PGresult *res;
	char resource[CHAOS_NAME_LEN];
	const char *params[1];
	bool ok;
	int i;

	res = PQexec(conn, "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'fencelock'");
	ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
	PQclear(res);
	if (!ok)
	{
		chaos_warn("chaos: extension \"fencelock\" is not installed in database \"%s\"\n"
				   "HINT:  Run CREATE EXTENSION fencelock; in it first.",
				   PQdb(conn));
		return false;
	}
	if (!exec_ok(conn, SQL_SCHEMA, "creating the chaos tables"))
		return false;
	params[0] = resource;
	for (i = 0; i < opt->resources; i++)
	{
		resource_name(resource, sizeof(resource), i);
		res = PQexecParams(conn, "INSERT INTO chaos_account (resource) VALUES ($1);", 1, NULL,
						   params, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_COMMAND_OK)
		{
			PQclear(res);
			res = PQexecParams(conn,
							   "WITH a AS (INSERT INTO chaos_leased (resource) VALUES ($1)),"
							   " b AS (INSERT INTO chaos_set_row (resource) VALUES ($1))"
							   " INSERT INTO chaos_set_lease (resource) VALUES ($1)",
							   1, NULL, params, NULL, NULL, 0);
		}
		ok = PQresultStatus(res) == PGRES_COMMAND_OK;
		PQclear(res);
		if (!ok)
		{
			chaos_warn("chaos: inserting %s: %s", resource, PQerrorMessage(conn));
			return false;
		}
	}
	return exec_ok(conn, SQL_LEASE_BOUND, "creating the lease-bound triggers");
}

static FILE *
open_log(const ChaosOptions *opt, int worker)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/w%d.log", opt->logdir, worker);
	f = fopen(path, "r");
	if (f == NULL)
		chaos_warn("chaos: cannot read %s: %s", path, strerror(errno));
	return f;
}

/* Add up the "S" lines; a worker that was killed has none. */
static void
read_stats(const ChaosOptions *opt, RunFigures *fig)
{
	char line[LINE_MAX_LEN];
	int i;

	for (i = 0; i < opt->workers; i++)
	{
		FILE *f = open_log(opt, i);
		WorkerStats s;
		WorkerStats *t = &fig->totals;

		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f))
		{
			if (line[0] != 'S' ||
				sscanf(
					line + 1,
					"%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld",
					&s.attempts, &s.busy, &s.grants, &s.frozen, &s.frozen_past_lease,
					&s.late_writes, &s.late_accepted, &s.stale, &s.accepted, &s.releases,
					&s.overruns, &s.errors, &s.lb_accepted, &s.lb_stale, &s.lb_late_accepted,
					&s.set_row_acked, &s.set_row_stale, &s.set_lease_acked,
					&s.set_lease_stale) != 19)
				continue;
			t->attempts += s.attempts;
			t->busy += s.busy;
			t->grants += s.grants;
			t->frozen += s.frozen;
			t->frozen_past_lease += s.frozen_past_lease;
			t->late_writes += s.late_writes;
			t->late_accepted += s.late_accepted;
			t->stale += s.stale;
			t->accepted += s.accepted;
			t->releases += s.releases;
			t->overruns += s.overruns;
			t->errors += s.errors;
			t->lb_accepted += s.lb_accepted;
			t->lb_stale += s.lb_stale;
			t->lb_late_accepted += s.lb_late_accepted;
			t->set_row_acked += s.set_row_acked;
			t->set_row_stale += s.set_row_stale;
			t->set_lease_acked += s.set_lease_acked;
			t->set_lease_stale += s.set_lease_stale;
			fig->workers_reported++;
		}
		fclose(f);
	}
}

/* COPY the complete lines tagged TAG from every worker's log into a table. */
static bool
copy_lines(PGconn *conn, const ChaosOptions *opt, char tag, const char *copy_sql)
{
	PGresult *res = PQexec(conn, copy_sql);
	char line[LINE_MAX_LEN];
	bool ok = PQresultStatus(res) == PGRES_COPY_IN;
	int i;

	PQclear(res);
	for (i = 0; ok && i < opt->workers; i++)
	{
		FILE *f = open_log(opt, i);

		if (f == NULL)
			continue;
		while (ok && fgets(line, sizeof(line), f))
		{
			size_t len = strlen(line);

			/* A worker killed mid-line leaves it without its newline: skip it. */
			if (len < 3 || line[len - 1] != '\n' || line[0] != tag || line[1] != '\t')
				continue;
			ok = PQputCopyData(conn, line + 2, (int) (len - 2)) == 1;
		}
		fclose(f);
	}
	if (PQputCopyEnd(conn, ok ? NULL : "reading the workers' logs failed") != 1)
		ok = false;
	while ((res = PQgetResult(conn)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			chaos_warn("chaos: %s: %s", copy_sql, PQresultErrorMessage(res));
			ok = false;
		}
		PQclear(res);
	}
	return ok;
}

bool
load_worker_logs(PGconn *conn, const ChaosOptions *opt, RunFigures *fig)
{
	read_stats(opt, fig);
	return copy_lines(conn, opt, 'G',
					  "COPY chaos_grant (resource, fence, owner, pre, post, ttl_ms) FROM STDIN") &&
		   copy_lines(conn, opt, 'A', "COPY chaos_ack (resource, fence, owner, seq) FROM STDIN") &&
		   copy_lines(
			   conn, opt, 'R',
			   "COPY chaos_release (resource, fence, owner, released, pre, post) FROM STDIN") &&
		   copy_lines(conn, opt, 'L',
					  "COPY chaos_leased_ack (resource, fence, owner, seq) FROM STDIN") &&
		   copy_lines(conn, opt, 'P', "COPY chaos_set_row_ack (resource, elem) FROM STDIN") &&
		   copy_lines(conn, opt, 'Q', "COPY chaos_set_lease_ack (resource, elem) FROM STDIN") &&
		   exec_ok(conn,
				   "ANALYZE chaos_history, chaos_grant, chaos_ack, chaos_release, "
				   "chaos_leased_history, chaos_leased_ack, chaos_set_row_ack, chaos_set_lease_ack",
				   "ANALYZE");
}

/* One audit: the query returns the rows that break the guarantee. */
typedef struct Check
{
	const char *name;
	const char *sql;
} Check;

static const Check checks[] = {
	{"fence went back in commit order",
	 "SELECT resource, id, fence, prev_fence FROM ("
	 "  SELECT resource, id, fence,"
	 "         lag(fence) OVER (PARTITION BY resource ORDER BY id) AS prev_fence"
	 "    FROM chaos_history) s"
	 " WHERE fence < prev_fence ORDER BY id"},
	{"fence accepted from two owners",
	 "SELECT resource, fence, string_agg(DISTINCT owner, ',') FROM chaos_history"
	 " GROUP BY resource, fence HAVING count(DISTINCT owner) > 1 ORDER BY 1, 2"},
	{"acknowledged write missing from history",
	 "SELECT a.resource, a.fence, a.owner, a.seq FROM chaos_ack a"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_history h WHERE h.owner = a.owner"
	 "   AND h.seq = a.seq AND h.resource = a.resource AND h.fence = a.fence)"
	 " ORDER BY a.owner, a.seq"},
	{"business row disagrees with history",
	 "SELECT a.resource, a.counter, coalesce(h.n, 0) AS history_rows, a.last_fence,"
	 "       h.last_fence AS last_history_fence"
	 "  FROM chaos_account a LEFT JOIN ("
	 "    SELECT resource, count(*) AS n, (array_agg(fence ORDER BY id DESC))[1] AS last_fence"
	 "      FROM chaos_history GROUP BY resource) h USING (resource)"
	 " WHERE a.counter <> coalesce(h.n, 0) OR a.last_fence <> coalesce(h.last_fence, 0)"
	 " ORDER BY 1"},
	{"write accepted under a fence not granted to its owner",
	 "SELECT h.id, h.resource, h.fence, h.owner FROM chaos_history h"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_grant g WHERE g.resource = h.resource"
	 "   AND g.fence = h.fence AND g.owner = h.owner)"
	 " ORDER BY h.id"},
	{"fence granted to two owners",
	 "SELECT resource, fence, string_agg(DISTINCT owner, ',') FROM chaos_grant"
	 " GROUP BY resource, fence HAVING count(DISTINCT owner) > 1 ORDER BY 1, 2"},

	/*
	 * A grant's call started at PRE and answered by POST.  The next fence was granted by its POST;
	 * the previous lease lasted at least until its last PRE + TTL, unless released, which happened
	 * no earlier than the release call's PRE.  Granted before both: two live leases at once.
	 */
	{"lease granted while the previous one was live",
	 "WITH f AS ("
	 "  SELECT resource, fence, min(post) AS granted_by,"
	 "         max(pre) + max(ttl_ms) * interval '1 millisecond' AS live_until_at_least"
	 "    FROM chaos_grant GROUP BY resource, fence),"
	 " r AS ("
	 "  SELECT resource, fence, min(pre) AS released_from FROM chaos_release WHERE released"
	 "   GROUP BY resource, fence),"
	 " s AS ("
	 "  SELECT f.resource, f.fence, f.granted_by,"
	 "         lag(f.fence) OVER w AS prev_fence,"
	 "         lag(f.live_until_at_least) OVER w AS prev_live_until,"
	 "         lag(r.released_from) OVER w AS prev_released_from"
	 "    FROM f LEFT JOIN r USING (resource, fence)"
	 "  WINDOW w AS (PARTITION BY f.resource ORDER BY f.fence))"
	 "SELECT resource, prev_fence, fence, granted_by, prev_live_until, prev_released_from"
	 "  FROM s WHERE granted_by < prev_live_until"
	 "   AND (prev_released_from IS NULL OR granted_by < prev_released_from)"
	 " ORDER BY 1, 3"},
	{"higher fence granted before a lower one",
	 "WITH f AS ("
	 "  SELECT resource, fence, min(pre) AS first_pre, min(post) AS first_post"
	 "    FROM chaos_grant GROUP BY resource, fence),"
	 " s AS ("
	 "  SELECT resource, fence, first_post,"
	 "         max(first_pre) OVER (PARTITION BY resource ORDER BY fence"
	 "             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS lower_started"
	 "    FROM f)"
	 "SELECT resource, fence, first_post, lower_started FROM s"
	 " WHERE first_post < lower_started ORDER BY 1, 2"},
	/*
	 * The lease-bound table.  A write's history row is inserted after its UPDATE row-locked the
	 * lease; a grant's UPDATE of that row waits for the write's commit, so its POST comes later.
	 * A newer grant whose POST precedes the history row means a write under a superseded lease
	 * committed.
	 */
	{"lease-bound write committed after a newer grant",
	 "SELECT h.id, h.resource, h.fence, h.owner, h.committed_at, g.fence AS newer_fence, g.post"
	 "  FROM chaos_leased_history h"
	 "  JOIN chaos_grant g ON g.resource = h.resource AND g.fence > h.fence"
	 "   AND g.post < h.committed_at"
	 " ORDER BY h.id"},
	{"acknowledged lease-bound write missing from history",
	 "SELECT a.resource, a.fence, a.owner, a.seq FROM chaos_leased_ack a"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_leased_history h WHERE h.owner = a.owner"
	 "   AND h.seq = a.seq AND h.resource = a.resource AND h.fence = a.fence)"
	 " ORDER BY a.owner, a.seq"},
	{"lease-bound write accepted under a fence not granted to its owner",
	 "SELECT h.id, h.resource, h.fence, h.owner FROM chaos_leased_history h"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_grant g WHERE g.resource = h.resource"
	 "   AND g.fence = h.fence AND g.owner = h.owner)"
	 " ORDER BY h.id"},
	{"acknowledged add lost from the lease-bound set",
	 "SELECT a.resource, a.elem FROM chaos_set_lease_ack a JOIN chaos_set_lease s USING (resource)"
	 " WHERE a.elem <> ALL (s.v) ORDER BY 1, 2"},
	{"current_fence() behind a granted fence",
	 "SELECT resource, fencelock.current_fence(resource), max(fence) FROM chaos_grant"
	 " GROUP BY resource"
	 " HAVING coalesce(fencelock.current_fence(resource), 0) < max(fence) ORDER BY 1"},
};

#define NCHECKS ((int) (sizeof(checks) / sizeof(checks[0])))

/* Run one check; print it with a few of its offending rows.  Returns the count, -1 on error. */
static long
run_check(PGconn *conn, const Check *c)
{
	PGresult *res = PQexec(conn, c->sql);
	long n;
	int row;
	int col;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		chaos_warn("chaos: audit \"%s\" failed: %s", c->name, PQerrorMessage(conn));
		PQclear(res);
		return -1;
	}
	n = PQntuples(res);
	printf("  %-56s %ld\n", c->name, n);
	for (row = 0; row < n && row < EXAMPLES; row++)
	{
		printf("    e.g.");
		for (col = 0; col < PQnfields(res); col++)
			printf(" %s=%s", PQfname(res, col),
				   PQgetisnull(res, row, col) ? "NULL" : PQgetvalue(res, row, col));
		printf("\n");
	}
	PQclear(res);
	return n;
}

/* A single count(*) style figure, or -1. */
static long
figure(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	long v = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	else
		chaos_warn("chaos: %s: %s", sql, PQerrorMessage(conn));
	PQclear(res);
	return v;
}

/*
 * Takeovers after expiry: consecutive fences of a resource where the new one went to another
 * owner and the previous holder had not released its lease, which therefore had run out.
 */
static const char SQL_TAKEOVERS[] =
	"WITH f AS (SELECT resource, fence, min(owner) AS owner FROM chaos_grant"
	"            GROUP BY resource, fence),"
	" s AS (SELECT resource, fence, owner,"
	"              lag(owner) OVER w AS prev_owner, lag(fence) OVER w AS prev_fence"
	"         FROM f WINDOW w AS (PARTITION BY resource ORDER BY fence))"
	"SELECT count(*) FROM s"
	" WHERE prev_owner <> owner AND NOT EXISTS (SELECT 1 FROM chaos_release r"
	"   WHERE r.released AND r.resource = s.resource AND r.fence = s.prev_fence)";

/* Acknowledged adds the per-row fenced set lost: what per-row fencing does not prevent. */
static const char SQL_SET_ROW_LOST[] =
	"SELECT count(*) FROM chaos_set_row_ack a JOIN chaos_set_row s USING (resource)"
	" WHERE a.elem <> ALL (s.v)";

static const char SQL_UNACKED[] =
	"SELECT count(*) FROM chaos_history h"
	" WHERE NOT EXISTS (SELECT 1 FROM chaos_ack a WHERE a.owner = h.owner AND a.seq = h.seq)";

int
audit_and_report(PGconn *conn, const ChaosOptions *opt, RunFigures *fig)
{
	const WorkerStats *t = &fig->totals;
	long violations = 0;
	long history_rows;
	long takeovers;
	long unacked;
	long set_row_lost;
	bool audit_failed = false;
	bool pass;
	int i;

	history_rows = figure(conn, "SELECT count(*) FROM chaos_history");
	takeovers = figure(conn, SQL_TAKEOVERS);
	unacked = figure(conn, SQL_UNACKED);
	set_row_lost = figure(conn, SQL_SET_ROW_LOST);
	if (history_rows < 0 || takeovers < 0 || unacked < 0 || set_row_lost < 0)
		audit_failed = true;

	printf("\n== fencelock chaos summary (seed %llu) ==\n", (unsigned long long) opt->seed);
	printf("workers                       %d (failed %d, summaries %d)\n", opt->workers,
		   fig->workers_failed, fig->workers_reported);
	printf("resources, ttl                %d, %d ms\n", opt->resources, opt->ttl_ms);
	printf("duration                      %.1f s\n", fig->elapsed_s);
	printf("acquire calls                 %ld (busy %ld)\n", t->attempts, t->busy);
	printf("grants                        %ld\n", t->grants);
	printf("takeovers after expiry        %ld\n", takeovers);
	printf("freezes injected              %ld (at write %ld, at random %ld)\n",
		   fig->frozen_at_write + fig->frozen_at_random, fig->frozen_at_write,
		   fig->frozen_at_random);
	printf("frozen past the lease         %ld of %ld freezes at write\n", t->frozen_past_lease,
		   t->frozen);
	printf("writes past the lease         %ld (accepted %ld, not accepted %ld)\n", t->late_writes,
		   t->late_accepted, t->late_writes - t->late_accepted);
	printf("stale rejections (FL001)      %ld\n", t->stale);
	printf("acknowledged writes           %ld\n", t->accepted);
	printf("history rows                  %ld (never acknowledged %ld)\n", history_rows, unacked);
	printf("overrun releases              %ld of %ld\n", t->overruns, t->releases);
	printf("lease-bound table             %ld accepted (%ld sent past the lease), %ld refused "
		   "(FL001)\n",
		   t->lb_accepted, t->lb_late_accepted, t->lb_stale);
	printf(
		"per-row set (read-modify-write) %ld adds acknowledged, %ld refused, %ld acknowledged adds "
		"lost\n",
		t->set_row_acked, t->set_row_stale, set_row_lost);
	printf("lease-bound set               %ld adds acknowledged, %ld refused (losses: audited "
		   "below)\n",
		   t->set_lease_acked, t->set_lease_stale);
	printf("unexpected errors             %ld\n", t->errors);
	printf("violations:\n");
	for (i = 0; i < NCHECKS; i++)
	{
		long n = run_check(conn, &checks[i]);

		if (n < 0)
			audit_failed = true;
		else
			violations += n;
	}
	printf("violations                    %ld\n", violations);

	pass = !audit_failed && violations == 0 && t->errors == 0 && fig->workers_failed == 0 &&
		   fig->workers_reported == opt->workers;
	if (t->stale == 0 && !opt->allow_no_stale)
	{
		printf("no stale write was rejected: the freezes did not straddle a lease boundary "
			   "(run longer, or pass -z)\n");
		pass = false;
	}
	if (fig->cut_short)
	{
		printf("the run was cut short\n");
		pass = false;
	}
	printf("result                        %s\n", pass ? "PASS" : "FAIL");
	return pass ? 0 : 1;
}
