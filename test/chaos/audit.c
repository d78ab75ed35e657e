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
 *   chaos_group_write  the shared and permit workloads' lease-bound log: one row per accepted
 *                  write, each bound to the lease of the resource it names
 *   chaos_group_history  one row per row of that log, inserted after it in the same transaction:
 *                  mode, slot, when the holder was surely in the group (live_from, read after
 *                  the grant committed) and a timestamp taken under the lease row's share lock
 *   chaos_run      the run's mode, permits and TTL, for the audit's queries
 *   chaos_grant, chaos_ack, chaos_release, chaos_leased_ack, chaos_set_row_ack,
 *   chaos_set_lease_ack, chaos_group_ack   what the workers were told (from their logs)
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
	"  chaos_set_row_ack, chaos_set_lease_ack, chaos_group_write, chaos_group_history,"
	"  chaos_group_ack, chaos_run;"
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
	"  pre timestamptz, post timestamptz, ttl_ms integer, mode text, slot integer);"
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
	"CREATE TABLE chaos_group_write (resource text NOT NULL, owner text NOT NULL,"
	"  fence bigint NOT NULL, mode text NOT NULL, slot integer);"
	"CREATE TABLE chaos_group_history ("
	"  id bigserial PRIMARY KEY,"
	"  resource text NOT NULL,"
	"  owner text NOT NULL,"
	"  fence bigint NOT NULL,"
	"  mode text NOT NULL,"
	"  slot integer,"
	"  seq bigint NOT NULL,"
	"  live_from timestamptz NOT NULL,"
	"  committed_at timestamptz NOT NULL DEFAULT clock_timestamp());"
	"CREATE TABLE chaos_group_ack (LIKE chaos_ack);"
	"CREATE TABLE chaos_run (mode text, permits integer, writer_pct integer, ttl_ms integer);"
	"RESET client_min_messages;";

/* After the rows exist (no lease has been granted yet): the lease-bound triggers. */
static const char SQL_LEASE_BOUND[] =
	"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON chaos_leased FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=resource');"
	"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON chaos_set_lease FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=resource');"
	"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON chaos_group_write FOR EACH ROW"
	"  EXECUTE FUNCTION fencelock.fence_trigger('fence', 'lease_column=resource');";

/* The run's parameters, for the audit's queries and for whoever examines the tables later. */
static bool
record_run(PGconn *conn, const ChaosOptions *opt)
{
	char permits[16];
	char writer_pct[16];
	char ttl_ms[16];
	const char *params[4];
	PGresult *res;
	bool ok;

	snprintf(permits, sizeof(permits), "%d", opt->permits);
	snprintf(writer_pct, sizeof(writer_pct), "%d", opt->writer_pct);
	snprintf(ttl_ms, sizeof(ttl_ms), "%d", opt->ttl_ms);
	params[0] = mode_name(opt->mode);
	params[1] = permits;
	params[2] = writer_pct;
	params[3] = ttl_ms;
	res = PQexecParams(conn, "INSERT INTO chaos_run VALUES ($1, $2, $3, $4)", 4, NULL, params, NULL,
					   NULL, 0);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		chaos_warn("chaos: recording the run: %s", PQerrorMessage(conn));
	PQclear(res);
	return ok;
}

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
	if (!exec_ok(conn, SQL_LEASE_BOUND, "creating the lease-bound triggers"))
		return false;
	return record_run(conn, opt);
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
				sscanf(line + 1,
					   "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld "
					   "%ld %ld %ld"
					   " %ld %ld",
					   &s.attempts, &s.busy, &s.grants, &s.frozen, &s.frozen_past_lease,
					   &s.late_writes, &s.late_accepted, &s.stale, &s.accepted, &s.releases,
					   &s.overruns, &s.errors, &s.lb_accepted, &s.lb_stale, &s.lb_late_accepted,
					   &s.set_row_acked, &s.set_row_stale, &s.set_lease_acked, &s.set_lease_stale,
					   &s.reader_grants, &s.reader_accepted, &s.reader_stale,
					   &s.slot_unknown) != WORKER_STATS_FIELDS)
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
			t->reader_grants += s.reader_grants;
			t->reader_accepted += s.reader_accepted;
			t->reader_stale += s.reader_stale;
			t->slot_unknown += s.slot_unknown;
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
					  "COPY chaos_grant (resource, fence, owner, pre, post, ttl_ms, mode, slot) "
					  "FROM STDIN") &&
		   copy_lines(conn, opt, 'A', "COPY chaos_ack (resource, fence, owner, seq) FROM STDIN") &&
		   copy_lines(
			   conn, opt, 'R',
			   "COPY chaos_release (resource, fence, owner, released, pre, post) FROM STDIN") &&
		   copy_lines(conn, opt, 'L',
					  "COPY chaos_leased_ack (resource, fence, owner, seq) FROM STDIN") &&
		   copy_lines(conn, opt, 'P', "COPY chaos_set_row_ack (resource, elem) FROM STDIN") &&
		   copy_lines(conn, opt, 'Q', "COPY chaos_set_lease_ack (resource, elem) FROM STDIN") &&
		   copy_lines(conn, opt, 'W',
					  "COPY chaos_group_ack (resource, fence, owner, seq) FROM STDIN") &&
		   exec_ok(
			   conn,
			   "ANALYZE chaos_history, chaos_grant, chaos_ack, chaos_release, "
			   "chaos_leased_history, chaos_leased_ack, chaos_set_row_ack, chaos_set_lease_ack, "
			   "chaos_group_write, chaos_group_history, chaos_group_ack",
			   "ANALYZE");
}

/* One audit: the query returns the rows that break the guarantee. */
typedef struct Check
{
	const char *name;
	int modes; /* MODE_BIT()s of the workloads it audits */
	const char *sql;
} Check;

static const Check checks[] = {
	{"fence went back in commit order", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT resource, id, fence, prev_fence FROM ("
	 "  SELECT resource, id, fence,"
	 "         lag(fence) OVER (PARTITION BY resource ORDER BY id) AS prev_fence"
	 "    FROM chaos_history) s"
	 " WHERE fence < prev_fence ORDER BY id"},
	{"fence accepted from two owners", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT resource, fence, string_agg(DISTINCT owner, ',') FROM chaos_history"
	 " GROUP BY resource, fence HAVING count(DISTINCT owner) > 1 ORDER BY 1, 2"},
	{"acknowledged write missing from history", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT a.resource, a.fence, a.owner, a.seq FROM chaos_ack a"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_history h WHERE h.owner = a.owner"
	 "   AND h.seq = a.seq AND h.resource = a.resource AND h.fence = a.fence)"
	 " ORDER BY a.owner, a.seq"},
	{"business row disagrees with history", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT a.resource, a.counter, coalesce(h.n, 0) AS history_rows, a.last_fence,"
	 "       h.last_fence AS last_history_fence"
	 "  FROM chaos_account a LEFT JOIN ("
	 "    SELECT resource, count(*) AS n, (array_agg(fence ORDER BY id DESC))[1] AS last_fence"
	 "      FROM chaos_history GROUP BY resource) h USING (resource)"
	 " WHERE a.counter <> coalesce(h.n, 0) OR a.last_fence <> coalesce(h.last_fence, 0)"
	 " ORDER BY 1"},
	{"write accepted under a fence not granted to its owner", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT h.id, h.resource, h.fence, h.owner FROM chaos_history h"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_grant g WHERE g.resource = h.resource"
	 "   AND g.fence = h.fence AND g.owner = h.owner)"
	 " ORDER BY h.id"},
	{"fence granted to two owners", MODES_ALL,
	 "SELECT resource, fence, string_agg(DISTINCT owner, ',') FROM chaos_grant"
	 " GROUP BY resource, fence HAVING count(DISTINCT owner) > 1 ORDER BY 1, 2"},

	/*
	 * A grant's call started at PRE and answered by POST.  The next fence was granted by its POST;
	 * the previous lease lasted at least until its last PRE + TTL, unless released, which happened
	 * no earlier than the release call's PRE.  Granted before both: two live leases at once.
	 */
	{"lease granted while the previous one was live", MODE_BIT(MODE_EXCLUSIVE),
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
	{"higher fence granted before a lower one", MODES_ALL,
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
	{"lease-bound write committed after a newer grant", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT h.id, h.resource, h.fence, h.owner, h.committed_at, g.fence AS newer_fence, g.post"
	 "  FROM chaos_leased_history h"
	 "  JOIN chaos_grant g ON g.resource = h.resource AND g.fence > h.fence"
	 "   AND g.post < h.committed_at"
	 " ORDER BY h.id"},
	{"acknowledged lease-bound write missing from history", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT a.resource, a.fence, a.owner, a.seq FROM chaos_leased_ack a"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_leased_history h WHERE h.owner = a.owner"
	 "   AND h.seq = a.seq AND h.resource = a.resource AND h.fence = a.fence)"
	 " ORDER BY a.owner, a.seq"},
	{"lease-bound write accepted under a fence not granted to its owner", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT h.id, h.resource, h.fence, h.owner FROM chaos_leased_history h"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_grant g WHERE g.resource = h.resource"
	 "   AND g.fence = h.fence AND g.owner = h.owner)"
	 " ORDER BY h.id"},
	{"acknowledged add lost from the lease-bound set", MODE_BIT(MODE_EXCLUSIVE),
	 "SELECT a.resource, a.elem FROM chaos_set_lease_ack a JOIN chaos_set_lease s USING (resource)"
	 " WHERE a.elem <> ALL (s.v) ORDER BY 1, 2"},

	/*
	 * The shared and permit workloads' lease-bound log (chaos_group_history: one row per accepted
	 * write, with the holder's mode and slot).  A holder's write is accepted while the holder is
	 * in the resource's current group: a grant that supersedes it (an exclusive grant, any grant
	 * after an exclusive holder's, a new group, or its slot given to another holder) updates the
	 * lease row, so it waits for the share lock an accepted write holds until its commit; a
	 * superseding grant whose POST precedes the history row's timestamp means a superseded
	 * holder's write committed.  A grant certainly started a new group when its call began after
	 * every earlier grant's deadline (at most its POST + TTL: the harness sets no lock_delay).
	 */
	{"acknowledged write missing from history", MODES_GROUP,
	 "SELECT a.resource, a.fence, a.owner, a.seq FROM chaos_group_ack a"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_group_history h WHERE h.owner = a.owner"
	 "   AND h.seq = a.seq AND h.resource = a.resource AND h.fence = a.fence)"
	 " ORDER BY a.owner, a.seq"},
	{"lease-bound log disagrees with history", MODES_GROUP,
	 "SELECT resource, owner, fence, w.n AS log_rows, h.n AS history_rows"
	 "  FROM (SELECT resource, owner, fence, count(*) AS n FROM chaos_group_write"
	 "         GROUP BY 1, 2, 3) w"
	 "  FULL JOIN (SELECT resource, owner, fence, count(*) AS n FROM chaos_group_history"
	 "         GROUP BY 1, 2, 3) h USING (resource, owner, fence)"
	 " WHERE w.n IS DISTINCT FROM h.n ORDER BY 1, 3"},
	{"write accepted under a fence, mode or slot not granted to its owner", MODES_GROUP,
	 "SELECT h.id, h.resource, h.fence, h.owner, h.mode, h.slot FROM chaos_group_history h"
	 " WHERE NOT EXISTS (SELECT 1 FROM chaos_grant g WHERE g.resource = h.resource"
	 "   AND g.fence = h.fence AND g.owner = h.owner AND g.mode = h.mode"
	 "   AND g.slot IS NOT DISTINCT FROM h.slot)"
	 " ORDER BY h.id"},
	{"write committed after a grant that superseded it", MODES_GROUP,
	 "WITH f AS ("
	 "  SELECT resource, fence, mode, slot, min(post) AS post, min(pre) AS pre,"
	 "         max(post) + max(ttl_ms) * interval '1 millisecond' AS dead_by"
	 "    FROM chaos_grant GROUP BY resource, fence, mode, slot),"
	 " g AS ("
	 "  SELECT resource, fence, mode, slot, post,"
	 "         coalesce(pre > max(dead_by) OVER (PARTITION BY resource ORDER BY fence"
	 "             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS new_group"
	 "    FROM f)"
	 "SELECT DISTINCT ON (h.id) h.id, h.resource, h.fence, h.owner, h.mode, h.slot,"
	 "       h.committed_at, g.fence AS newer_fence, g.mode AS newer_mode, g.slot AS newer_slot,"
	 "       g.new_group, g.post AS newer_granted_by"
	 "  FROM chaos_group_history h"
	 "  JOIN g ON g.resource = h.resource AND g.fence > h.fence AND g.post < h.committed_at"
	 " WHERE h.mode = 'exclusive' OR g.mode = 'exclusive' OR g.new_group"
	 "    OR (h.mode = 'permit' AND g.slot = h.slot)"
	 " ORDER BY h.id, g.fence"},
	/*
	 * Grants in conflict (either is exclusive, or two permits of one slot): the later one was
	 * answered (POST) before the earlier one could have expired (its PRE + TTL) and before the
	 * earlier one's release began.  One row per later grant, with the first such earlier one.
	 */
	{"grant while a conflicting holder was live", MODES_GROUP,
	 "SELECT DISTINCT ON (b.resource, b.fence, b.owner) b.resource, b.fence, b.owner, b.mode,"
	 "       b.slot, b.post AS granted_by, a.fence AS live_fence, a.mode AS live_mode,"
	 "       a.slot AS live_slot, a.pre + a.ttl_ms * interval '1 millisecond' AS "
	 "live_until_at_least"
	 "  FROM chaos_grant b JOIN chaos_grant a ON a.resource = b.resource AND a.fence < b.fence"
	 "   AND b.post < a.pre + a.ttl_ms * interval '1 millisecond'"
	 " WHERE (a.mode = 'exclusive' OR b.mode = 'exclusive'"
	 "        OR (a.mode = 'permit' AND b.mode = 'permit' AND a.slot = b.slot))"
	 "   AND NOT EXISTS (SELECT 1 FROM chaos_release r WHERE r.released"
	 "     AND r.resource = a.resource AND r.fence = a.fence AND r.pre <= b.post)"
	 " ORDER BY b.resource, b.fence, b.owner, a.fence"},
	/*
	 * Permits.  An accepted write's holder was in the group, holding its slot, from LIVE_FROM (read
	 * after its grant committed) to the write's timestamp: at no moment may more of these
	 * intervals overlap than there are permits (an end sorts before a start at the same moment).
	 */
	{"more holders writing at once than permits", MODE_BIT(MODE_PERMIT),
	 "WITH e AS ("
	 "  SELECT resource, live_from AS t, 1 AS d FROM chaos_group_history WHERE mode = 'permit'"
	 "  UNION ALL"
	 "  SELECT resource, committed_at, -1 FROM chaos_group_history WHERE mode = 'permit'),"
	 " s AS ("
	 "  SELECT resource, t, d, sum(d) OVER (PARTITION BY resource ORDER BY t, d"
	 "      ROWS UNBOUNDED PRECEDING) AS writing FROM e)"
	 "SELECT resource, t, writing, (SELECT permits FROM chaos_run) AS permits FROM s"
	 " WHERE d = 1 AND writing > (SELECT permits FROM chaos_run) ORDER BY 1, 2"},
	{"slot's fence went back in commit order", MODE_BIT(MODE_PERMIT),
	 "SELECT resource, slot, id, fence, prev_fence FROM ("
	 "  SELECT resource, slot, id, fence,"
	 "         lag(fence) OVER (PARTITION BY resource, slot ORDER BY id) AS prev_fence"
	 "    FROM chaos_group_history WHERE mode = 'permit') s"
	 " WHERE fence < prev_fence ORDER BY id"},
	{"permit granted outside slots 1..permits", MODE_BIT(MODE_PERMIT),
	 "SELECT resource, fence, owner, slot FROM chaos_grant"
	 " WHERE mode = 'permit' AND (slot < 1 OR slot > (SELECT permits FROM chaos_run))"
	 " ORDER BY 1, 2"},
	/* The holder's row had left the group when the worker read its slot right after the grant. */
	{"write accepted from a permit holder gone from the group", MODE_BIT(MODE_PERMIT),
	 "SELECT id, resource, fence, owner, live_from, committed_at FROM chaos_group_history"
	 " WHERE mode = 'permit' AND slot IS NULL ORDER BY id"},
	{"current_fence() behind a granted fence", MODES_ALL,
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

/*
 * Shared and permit workloads.  Writer grants that ended a reader group: exclusive grants whose
 * previous fence was a shared holder's.  Slot reuses after expiry: permit grants whose slot's
 * previous fence went to another owner that had not released it.
 */
static const char SQL_GROUP_UNACKED[] =
	"SELECT count(*) FROM chaos_group_history h WHERE NOT EXISTS (SELECT 1 FROM chaos_group_ack a"
	" WHERE a.owner = h.owner AND a.seq = h.seq)";
static const char SQL_WRITER_TAKEOVERS[] =
	"SELECT count(*) FROM (SELECT mode, lag(mode) OVER (PARTITION BY resource ORDER BY fence) AS"
	" prev_mode FROM (SELECT DISTINCT resource, fence, mode FROM chaos_grant) f) s"
	" WHERE mode = 'exclusive' AND prev_mode = 'shared'";
#define SQL_SLOT_REUSES_FROM                                                                       \
	"WITH f AS (SELECT DISTINCT resource, fence, owner, slot FROM chaos_grant"                     \
	"            WHERE mode = 'permit' AND slot IS NOT NULL),"                                     \
	" s AS (SELECT resource, fence, owner,"                                                        \
	"              lag(owner) OVER w AS prev_owner, lag(fence) OVER w AS prev_fence"               \
	"         FROM f WINDOW w AS (PARTITION BY resource, slot ORDER BY fence))"                    \
	"SELECT count(*) FROM s"                                                                       \
	" WHERE prev_owner <> owner AND NOT EXISTS (SELECT 1 FROM chaos_release r"                     \
	"   WHERE r.released AND r.resource = s.resource AND r.fence = s.prev_fence)"
static const char SQL_SLOT_REUSES[] = SQL_SLOT_REUSES_FROM;
/* ... of which the previous holder never had a write accepted: its late write was refused. */
static const char SQL_SLOT_REUSES_REFUSED[] =
	SQL_SLOT_REUSES_FROM " AND NOT EXISTS (SELECT 1 FROM chaos_group_history h"
						 "   WHERE h.resource = s.resource AND h.fence = s.prev_fence)";
/* The most shared or permit holders whose accepted writes' intervals overlapped (see checks). */
static const char SQL_MOST_AT_ONCE[] =
	"WITH e AS ("
	"  SELECT resource, live_from AS t, 1 AS d FROM chaos_group_history WHERE mode <> 'exclusive'"
	"  UNION ALL"
	"  SELECT resource, committed_at, -1 FROM chaos_group_history WHERE mode <> 'exclusive')"
	"SELECT coalesce(max(n), 0) FROM (SELECT sum(d) OVER (PARTITION BY resource ORDER BY t, d"
	"    ROWS UNBOUNDED PRECEDING) AS n FROM e) s";

/* The exclusive workload's figures; false if one could not be computed. */
static bool
report_exclusive(PGconn *conn, const RunFigures *fig)
{
	const WorkerStats *t = &fig->totals;
	long history_rows = figure(conn, "SELECT count(*) FROM chaos_history");
	long takeovers = figure(conn, SQL_TAKEOVERS);
	long unacked = figure(conn, SQL_UNACKED);
	long set_row_lost = figure(conn, SQL_SET_ROW_LOST);

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
	return history_rows >= 0 && takeovers >= 0 && unacked >= 0 && set_row_lost >= 0;
}

/* The shared or permit workload's figures; false if one could not be computed. */
static bool
report_group(PGconn *conn, const ChaosOptions *opt, const RunFigures *fig)
{
	const WorkerStats *t = &fig->totals;
	bool shared = opt->mode == MODE_SHARED;
	long history_rows = figure(conn, "SELECT count(*) FROM chaos_group_history");
	long unacked = figure(conn, SQL_GROUP_UNACKED);
	long takeovers = figure(conn, shared ? SQL_WRITER_TAKEOVERS : SQL_SLOT_REUSES);
	long reuses_refused = shared ? 0 : figure(conn, SQL_SLOT_REUSES_REFUSED);
	long most = figure(conn, SQL_MOST_AT_ONCE);

	printf("acquire calls                 %ld (busy %ld)\n", t->attempts, t->busy);
	if (shared)
	{
		printf("grants                        %ld (readers %ld, writers %ld)\n", t->grants,
			   t->reader_grants, t->grants - t->reader_grants);
		printf("writers ending a reader group %ld\n", takeovers);
	}
	else
	{
		printf("grants                        %ld (slot unknown %ld)\n", t->grants,
			   t->slot_unknown);
		printf("slot reuses after expiry      %ld (the frozen holder's write refused: %ld)\n",
			   takeovers, reuses_refused);
	}
	printf("freezes injected              %ld (at write %ld, at random %ld)\n",
		   fig->frozen_at_write + fig->frozen_at_random, fig->frozen_at_write,
		   fig->frozen_at_random);
	printf("frozen past the lease         %ld of %ld freezes at write\n", t->frozen_past_lease,
		   t->frozen);
	printf("writes past the lease         %ld (accepted %ld, not accepted %ld)\n", t->late_writes,
		   t->late_accepted, t->late_writes - t->late_accepted);
	if (shared)
	{
		printf("stale rejections (FL001)      %ld (readers %ld)\n", t->stale, t->reader_stale);
		printf("acknowledged writes           %ld (readers %ld)\n", t->accepted,
			   t->reader_accepted);
	}
	else
	{
		printf("stale rejections (FL001)      %ld\n", t->stale);
		printf("acknowledged writes           %ld\n", t->accepted);
	}
	printf("history rows                  %ld (never acknowledged %ld)\n", history_rows, unacked);
	if (shared)
		printf("most readers writing at once  %ld\n", most);
	else
		printf("most holders writing at once  %ld of %d permits\n", most, opt->permits);
	printf("overrun releases              %ld of %ld\n", t->overruns, t->releases);
	return history_rows >= 0 && unacked >= 0 && takeovers >= 0 && reuses_refused >= 0 && most >= 0;
}

int
audit_and_report(PGconn *conn, const ChaosOptions *opt, RunFigures *fig)
{
	const WorkerStats *t = &fig->totals;
	long violations = 0;
	bool audit_failed = false;
	bool pass;
	int i;

	printf("\n== fencelock chaos summary (seed %llu) ==\n", (unsigned long long) opt->seed);
	if (opt->mode == MODE_SHARED)
		printf("workload                      shared (%d%% of rounds writers)\n", opt->writer_pct);
	else if (opt->mode == MODE_PERMIT)
		printf("workload                      permit (%d permits)\n", opt->permits);
	printf("workers                       %d (failed %d, summaries %d)\n", opt->workers,
		   fig->workers_failed, fig->workers_reported);
	printf("resources, ttl                %d, %d ms\n", opt->resources, opt->ttl_ms);
	printf("duration                      %.1f s\n", fig->elapsed_s);
	if (!(opt->mode == MODE_EXCLUSIVE ? report_exclusive(conn, fig) : report_group(conn, opt, fig)))
		audit_failed = true;
	printf("unexpected errors             %ld\n", t->errors);
	printf("violations:\n");
	for (i = 0; i < NCHECKS; i++)
	{
		long n;

		if (!(checks[i].modes & MODE_BIT(opt->mode)))
			continue;
		n = run_check(conn, &checks[i]);
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
