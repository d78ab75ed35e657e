/*
 * worker.c — one chaos worker: acquire, maybe get frozen, write with the fence, release.
 *
 * Every grant, acknowledged write and release goes to the worker's log (one line each, written
 * through before the next step), so the parent can audit what the database kept against what
 * the worker was told:
 *   G resource fence owner pre post ttl_ms mode slot
 *                                               acquire() (acquire_shared, acquire_permit) granted
 *                                               FENCE between PRE and POST; SLOT: permits only
 *   A resource fence owner seq                  COMMIT of write SEQ succeeded
 *   R resource fence owner t|f pre post         release() answered t or f between PRE and POST
 *   L resource fence owner seq                  COMMIT of write SEQ to the lease-bound table
 *   P resource element                          the per-row fenced set acknowledged ELEMENT's add
 *   Q resource element                          the lease-bound set acknowledged ELEMENT's add
 *   W resource fence owner seq                  shared and permit workloads: COMMIT of write SEQ
 *                                               to the lease-bound log succeeded
 *   S counters...                               the WorkerStats, once, at exit
 * PRE and POST are the server's clock_timestamp() just before and just after the call.
 */
#include "chaos.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define TS_LEN             64
#define MAX_PRINTED_ERRORS 5

/* The target list is evaluated left to right, so the two clock readings bracket the call. */
static const char SQL_ACQUIRE[] =
	"SELECT pg_catalog.clock_timestamp(), fencelock.acquire($1, $2, $3::pg_catalog.interval), "
	"pg_catalog.clock_timestamp()";
/* The shared and permit workloads: readers, writers (who wait) and permit holders. */
static const char SQL_ACQUIRE_SHARED[] =
	"SELECT pg_catalog.clock_timestamp(), fencelock.acquire_shared($1, $2, "
	"$3::pg_catalog.interval, "
	"$4::pg_catalog.interval), pg_catalog.clock_timestamp()";
static const char SQL_ACQUIRE_WAIT[] =
	"SELECT pg_catalog.clock_timestamp(), fencelock.acquire($1, $2, $3::pg_catalog.interval, "
	"$4::pg_catalog.interval), pg_catalog.clock_timestamp()";
static const char SQL_ACQUIRE_PERMIT[] =
	"SELECT pg_catalog.clock_timestamp(), fencelock.acquire_permit($1, $2, "
	"$3::pg_catalog.interval, "
	"$5::pg_catalog.int4, $4::pg_catalog.interval), pg_catalog.clock_timestamp()";
/*
 * After the grant committed: the moment from which the holder was surely in the group, and (for
 * a permit) its slot.  A separate statement: the grant's own could not see its holder row.
 */
static const char SQL_LIVE_FROM[] = "SELECT pg_catalog.clock_timestamp(), NULL::pg_catalog.int4";
static const char SQL_LIVE_FROM_SLOT[] =
	"SELECT pg_catalog.clock_timestamp(), (SELECT h.slot FROM fencelock.lease_holders h"
	" WHERE h.resource = $1 AND h.owner = $2 AND h.fence = $3::pg_catalog.int8)";
/* The write: a row of the lease-bound log, then its history row (timestamped under the lock). */
static const char SQL_GROUP_WRITE[] = "INSERT INTO chaos_group_write (resource, owner, fence, "
									  "mode, slot) VALUES ($1, $2, $3, $4, $5)";
static const char SQL_GROUP_HISTORY[] =
	"INSERT INTO chaos_group_history (resource, owner, fence, mode, slot, seq, live_from)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7)";
static const char SQL_RELEASE[] = "SELECT pg_catalog.clock_timestamp(), fencelock.release($1, $2), "
								  "pg_catalog.clock_timestamp()";
static const char SQL_UPDATE[] =
	"UPDATE chaos_account SET last_fence = $1, counter = counter + 1, last_owner = $2 "
	"WHERE resource = $3";
static const char SQL_HISTORY[] =
	"INSERT INTO chaos_history (resource, owner, fence, seq) VALUES ($1, $2, $3, $4)";
/* The same write to the lease-bound table, bound to the lease its row names. */
static const char SQL_LB_UPDATE[] =
	"UPDATE chaos_leased SET last_fence = $1, counter = counter + 1, last_owner = $2 "
	"WHERE resource = $3";
static const char SQL_LB_HISTORY[] =
	"INSERT INTO chaos_leased_history (resource, owner, fence, seq) VALUES ($1, $2, $3, $4)";
/* The read-modify-write sets: read both before the handshake, write each after it. */
static const char SQL_SET_READ[] = "SELECT (SELECT v FROM chaos_set_row WHERE resource = $1),"
								   " (SELECT v FROM chaos_set_lease WHERE resource = $1)";
static const char SQL_SET_ROW[] =
	"UPDATE chaos_set_row SET v = $1::text[] || $2::text, last_fence = $3 WHERE resource = $4";
static const char SQL_SET_LEASE[] =
	"UPDATE chaos_set_lease SET v = $1::text[] || $2::text, last_fence = $3 WHERE resource = $4";

typedef enum WriteOutcome
{
	WRITE_ACCEPTED,
	WRITE_STALE,
	WRITE_FAILED
} WriteOutcome;

typedef struct Worker
{
	const ChaosOptions *opt;
	int id;
	char owner[CHAOS_NAME_LEN];
	char ttl_text[32];
	PGconn *conn;
	FILE *log;
	uint64_t rng;
	int to_parent;
	int from_parent;
	long seq;
	int errors_printed;
	WorkerStats st;
} Worker;

static volatile sig_atomic_t stop_requested = 0;

static void
on_sigterm(int signo)
{
	(void) signo;
	stop_requested = 1;
}

static void worker_exit(Worker *w, int code) __attribute__((noreturn));

static void
worker_exit(Worker *w, int code)
{
	const WorkerStats *s = &w->st;

	if (w->log)
	{
		fprintf(w->log,
				"S\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld"
				"\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\n",
				s->attempts, s->busy, s->grants, s->frozen, s->frozen_past_lease, s->late_writes,
				s->late_accepted, s->stale, s->accepted, s->releases, s->overruns, s->errors,
				s->lb_accepted, s->lb_stale, s->lb_late_accepted, s->set_row_acked,
				s->set_row_stale, s->set_lease_acked, s->set_lease_stale, s->reader_grants,
				s->reader_accepted, s->reader_stale, s->slot_unknown);
		fclose(w->log);
	}
	if (w->conn)
		PQfinish(w->conn);
	_exit(code);
}

/* Count and (the first few times) print an unexpected failure; reconnect if the link broke. */
static void
worker_error(Worker *w, const char *what, const PGresult *res)
{
	const char *msg =
		(res && PQresultErrorMessage(res)[0]) ? PQresultErrorMessage(res) : PQerrorMessage(w->conn);

	w->st.errors++;
	if (w->errors_printed++ < MAX_PRINTED_ERRORS)
		chaos_warn("%s: %s: %s", w->owner, what, msg);
	if (PQstatus(w->conn) == CONNECTION_BAD)
	{
		PQreset(w->conn);
		if (PQstatus(w->conn) != CONNECTION_OK)
		{
			chaos_warn("%s: connection lost: %s", w->owner, PQerrorMessage(w->conn));
			worker_exit(w, 3);
		}
	}
}

/*
 * Run one of the SQL_ACQUIRE* statements.  Returns the fence, 0 when busy (another owner holds a
 * live lease, or all permits are taken), -1 on error.  PRE and POST receive the server's clock
 * around the call.
 */
static int64_t
acquire_call(Worker *w, const char *sql, int nparams, const char *const *params, char *pre,
			 char *post)
{
	PGresult *res;
	int64_t fence;

	res = PQexecParams(w->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		worker_error(w, "acquire", res);
		PQclear(res);
		return -1;
	}
	if (PQgetisnull(res, 0, 1))
		fence = 0;
	else
	{
		fence = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		if (fence <= 0)
		{
			worker_error(w, "acquire returned a fence below 1", res);
			fence = -1;
		}
	}
	snprintf(pre, TS_LEN, "%s", PQgetvalue(res, 0, 0));
	snprintf(post, TS_LEN, "%s", PQgetvalue(res, 0, 2));
	PQclear(res);
	return fence;
}

/* The exclusive workload's acquire(resource, owner, ttl). */
static int64_t
acquire(Worker *w, const char *resource, char *pre, char *post)
{
	const char *params[3];

	params[0] = resource;
	params[1] = w->owner;
	params[2] = w->ttl_text;
	return acquire_call(w, SQL_ACQUIRE, 3, params, pre, post);
}

/* Tell the parent we are about to write and wait for its answer; it may freeze us first. */
static bool
handshake(Worker *w)
{
	ChaosMsg msg;
	char reply;
	ssize_t n;

	msg.worker = w->id;
	msg.kind = MSG_ABOUT_TO_WRITE;
	if (write(w->to_parent, &msg, sizeof(msg)) != (ssize_t) sizeof(msg))
		worker_exit(w, 4); /* parent gone */
	do
		n = read(w->from_parent, &reply, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		worker_exit(w, 4);
	return reply == REPLY_FROZEN;
}

static void
rollback(Worker *w)
{
	PQclear(PQexec(w->conn, "ROLLBACK"));
}

/* Run one statement of the write transaction; false (after ROLLBACK) if it failed. */
static bool
write_step(Worker *w, const char *sql, int nparams, const char *const *params, const char *what,
		   WriteOutcome *outcome)
{
	PGresult *res = PQexecParams(w->conn, sql, nparams, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		if (strcmp(result_sqlstate(res), SQLSTATE_STALE_FENCE) == 0)
			*outcome = WRITE_STALE;
		else
		{
			worker_error(w, what, res);
			*outcome = WRITE_FAILED;
		}
		PQclear(res);
		rollback(w);
		return false;
	}
	if ((sql == SQL_UPDATE || sql == SQL_LB_UPDATE) && strcmp(PQcmdTuples(res), "1") != 0)
	{
		w->st.errors++;
		chaos_warn("%s: business row for %s is missing", w->owner, params[2]);
		*outcome = WRITE_FAILED;
		PQclear(res);
		rollback(w);
		return false;
	}
	PQclear(res);
	return true;
}

/*
 * Commit the write transaction; WRITE_ACCEPTED, logged with TAG, once the commit is acknowledged
 * (the database must keep it), else WRITE_STALE (a deferred fence check refused it) or
 * WRITE_FAILED.
 */
static WriteOutcome
commit_write(Worker *w, char tag, const char *resource, long long fence)
{
	PGresult *res = PQexec(w->conn, "COMMIT");
	WriteOutcome outcome = WRITE_FAILED;

	if (PQresultStatus(res) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(res), "COMMIT") != 0)
	{
		if (strcmp(result_sqlstate(res), SQLSTATE_STALE_FENCE) == 0)
			outcome = WRITE_STALE;
		else
			worker_error(w, "COMMIT", res);
		PQclear(res);
		return outcome;
	}
	PQclear(res);
	fprintf(w->log, "%c\t%s\t%lld\t%s\t%ld\n", tag, resource, fence, w->owner, w->seq);
	return WRITE_ACCEPTED;
}

/*
 * BEGIN; fenced UPDATE of the business row; INSERT into history; COMMIT.  UPD and HIST name the
 * per-row table (log tag A) or the lease-bound one (L).
 */
static WriteOutcome
write_fenced(Worker *w, const char *resource, int64_t fence, const char *upd_sql,
			 const char *hist_sql, char tag)
{
	char fence_text[24];
	char seq_text[24];
	const char *upd[3];
	const char *hist[4];
	WriteOutcome outcome = WRITE_FAILED;

	w->seq++;
	snprintf(fence_text, sizeof(fence_text), "%lld", (long long) fence);
	snprintf(seq_text, sizeof(seq_text), "%ld", w->seq);
	upd[0] = fence_text;
	upd[1] = w->owner;
	upd[2] = resource;
	hist[0] = resource;
	hist[1] = w->owner;
	hist[2] = fence_text;
	hist[3] = seq_text;

	if (!write_step(w, "BEGIN", 0, NULL, "BEGIN", &outcome) ||
		!write_step(w, upd_sql, 3, upd, "fenced UPDATE", &outcome) ||
		!write_step(w, hist_sql, 4, hist, "history INSERT", &outcome))
		return outcome;
	return commit_write(w, tag, resource, (long long) fence);
}

/* Read both sets (before the handshake); false on error.  Each gets a malloc'd text[] literal. */
static bool
read_sets(Worker *w, const char *resource, char **row_v, char **lease_v)
{
	const char *params[1];
	PGresult *res;

	params[0] = resource;
	res = PQexecParams(w->conn, SQL_SET_READ, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQgetisnull(res, 0, 0) ||
		PQgetisnull(res, 0, 1))
	{
		worker_error(w, "reading the sets", res);
		PQclear(res);
		return false;
	}
	*row_v = strdup(PQgetvalue(res, 0, 0));
	*lease_v = strdup(PQgetvalue(res, 0, 1));
	PQclear(res);
	if (*row_v == NULL || *lease_v == NULL)
	{
		chaos_warn("%s: out of memory", w->owner);
		worker_exit(w, 2);
	}
	return true;
}

/* Write READ_V plus this round's element back, in autocommit; log the add if acknowledged. */
static WriteOutcome
write_set(Worker *w, const char *sql, char tag, const char *resource, const char *read_v,
		  int64_t fence)
{
	char fence_text[24];
	char elem[CHAOS_NAME_LEN + 24];
	const char *params[4];
	PGresult *res;
	WriteOutcome outcome;

	snprintf(fence_text, sizeof(fence_text), "%lld", (long long) fence);
	snprintf(elem, sizeof(elem), "%s:%ld", w->owner, w->seq);
	params[0] = read_v;
	params[1] = elem;
	params[2] = fence_text;
	params[3] = resource;
	res = PQexecParams(w->conn, sql, 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_COMMAND_OK && strcmp(PQcmdTuples(res), "1") == 0)
	{
		fprintf(w->log, "%c\t%s\t%s\n", tag, resource, elem);
		outcome = WRITE_ACCEPTED;
	}
	else if (strcmp(result_sqlstate(res), SQLSTATE_STALE_FENCE) == 0)
		outcome = WRITE_STALE;
	else
	{
		worker_error(w, "set UPDATE", res);
		outcome = WRITE_FAILED;
	}
	PQclear(res);
	return outcome;
}

static void
release(Worker *w, const char *resource, int64_t fence)
{
	const char *params[2];
	PGresult *res;
	bool released;

	params[0] = resource;
	params[1] = w->owner;
	res = PQexecParams(w->conn, SQL_RELEASE, 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQgetisnull(res, 0, 1))
	{
		worker_error(w, "release", res);
		PQclear(res);
		return;
	}
	released = PQgetvalue(res, 0, 1)[0] == 't';
	w->st.releases++;
	if (!released)
		w->st.overruns++;
	fprintf(w->log, "R\t%s\t%lld\t%s\t%c\t%s\t%s\n", resource, (long long) fence, w->owner,
			released ? 't' : 'f', PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 2));
	PQclear(res);
}

/*
 * Whether an acquire's FENCE is a grant (counted); else back off: briefly after an error (-1),
 * after a busy answer (0) for a random time up to a tenth of the TTL.
 */
static bool
granted_or_back_off(Worker *w, int64_t fence, int64_t ttl_us)
{
	if (fence < 0)
	{
		sleep_us(10000);
		return false;
	}
	if (fence == 0)
	{
		w->st.busy++;
		sleep_us(rng_range(&w->rng, 1000, ttl_us / 10 > 2000 ? ttl_us / 10 : 2000));
		return false;
	}
	w->st.grants++;
	return true;
}

/* One round: acquire a random resource; if granted, write under the fence and release. */
static void
one_round(Worker *w)
{
	const ChaosOptions *opt = w->opt;
	int64_t ttl_us = (int64_t) opt->ttl_ms * 1000;
	char resource[CHAOS_NAME_LEN];
	char pre[TS_LEN];
	char post[TS_LEN];
	int64_t fence;
	int64_t granted_at;
	bool frozen;
	bool late;
	WriteOutcome outcome;
	char *row_v = NULL;
	char *lease_v = NULL;
	bool have_sets;

	resource_name(resource, sizeof(resource), (int) rng_range(&w->rng, 0, opt->resources - 1));
	w->st.attempts++;
	fence = acquire(w, resource, pre, post);
	if (!granted_or_back_off(w, fence, ttl_us))
		return;
	/* Local time after the answer: the server granted the lease no later than this. */
	granted_at = now_us();
	fprintf(w->log, "G\t%s\t%lld\t%s\t%s\t%s\t%d\texclusive\t\\N\n", resource, (long long) fence,
			w->owner, pre, post, opt->ttl_ms);

	/* Some work under the lease (reading the sets), then ask the parent; it may freeze us. */
	have_sets = read_sets(w, resource, &row_v, &lease_v);
	sleep_us(rng_range(&w->rng, 0, ttl_us / 30));
	frozen = handshake(w);
	late = now_us() - granted_at > ttl_us;
	if (frozen)
	{
		w->st.frozen++;
		if (late)
			w->st.frozen_past_lease++;
	}

	outcome = write_fenced(w, resource, fence, SQL_UPDATE, SQL_HISTORY, 'A');
	if (outcome == WRITE_ACCEPTED)
		w->st.accepted++;
	else if (outcome == WRITE_STALE)
		w->st.stale++;
	if (late)
	{
		w->st.late_writes++;
		if (outcome == WRITE_ACCEPTED)
			w->st.late_accepted++;
	}

	/* The same write to the lease-bound table, then an add to each set. */
	outcome = write_fenced(w, resource, fence, SQL_LB_UPDATE, SQL_LB_HISTORY, 'L');
	if (outcome == WRITE_ACCEPTED)
	{
		w->st.lb_accepted++;
		if (late)
			w->st.lb_late_accepted++;
	}
	else if (outcome == WRITE_STALE)
		w->st.lb_stale++;
	if (have_sets)
	{
		outcome = write_set(w, SQL_SET_ROW, 'P', resource, row_v, fence);
		if (outcome == WRITE_ACCEPTED)
			w->st.set_row_acked++;
		else if (outcome == WRITE_STALE)
			w->st.set_row_stale++;
		outcome = write_set(w, SQL_SET_LEASE, 'Q', resource, lease_v, fence);
		if (outcome == WRITE_ACCEPTED)
			w->st.set_lease_acked++;
		else if (outcome == WRITE_STALE)
			w->st.set_lease_stale++;
		free(row_v);
		free(lease_v);
	}
	release(w, resource, fence);
}

/*
 * The shared and permit workloads' write: BEGIN; a row of the lease-bound log (its trigger checks
 * the fence against the resource's lease and share-locks the lease row); the history row, whose
 * timestamp is taken while that lock is held; COMMIT.  SLOT is NULL but for permits.
 */
static WriteOutcome
write_group(Worker *w, const char *resource, int64_t fence, const char *mode, const char *slot,
			const char *live_from)
{
	char fence_text[24];
	char seq_text[24];
	const char *params[7];
	WriteOutcome outcome = WRITE_FAILED;

	w->seq++;
	snprintf(fence_text, sizeof(fence_text), "%lld", (long long) fence);
	snprintf(seq_text, sizeof(seq_text), "%ld", w->seq);
	params[0] = resource;
	params[1] = w->owner;
	params[2] = fence_text;
	params[3] = mode;
	params[4] = slot;
	params[5] = seq_text;
	params[6] = live_from;

	if (!write_step(w, "BEGIN", 0, NULL, "BEGIN", &outcome) ||
		!write_step(w, SQL_GROUP_WRITE, 5, params, "lease-bound INSERT", &outcome) ||
		!write_step(w, SQL_GROUP_HISTORY, 7, params, "history INSERT", &outcome))
		return outcome;
	return commit_write(w, 'W', resource, (long long) fence);
}

/*
 * Read the clock (and the permit's slot) right after a grant.  False on error; SLOT is left empty
 * when the holder's row was no longer in the group (a freeze right after the grant).
 */
static bool
read_live_from(Worker *w, const char *resource, int64_t fence, char *live_from, char *slot,
			   size_t slot_len)
{
	char fence_text[24];
	const char *params[3];
	bool permit = w->opt->mode == MODE_PERMIT;
	PGresult *res;

	snprintf(fence_text, sizeof(fence_text), "%lld", (long long) fence);
	params[0] = resource;
	params[1] = w->owner;
	params[2] = fence_text;
	res = PQexecParams(w->conn, permit ? SQL_LIVE_FROM_SLOT : SQL_LIVE_FROM, permit ? 3 : 0, NULL,
					   permit ? params : NULL, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		worker_error(w, "reading the clock after the grant", res);
		PQclear(res);
		return false;
	}
	snprintf(live_from, TS_LEN, "%s", PQgetvalue(res, 0, 0));
	slot[0] = '\0';
	if (!PQgetisnull(res, 0, 1))
		snprintf(slot, slot_len, "%s", PQgetvalue(res, 0, 1));
	PQclear(res);
	return true;
}

/*
 * One round of the shared or the permit workload: a reader's acquire_shared, a writer's acquire
 * (waiting up to a TTL, so that with the preload it queues and readers yield to it) or an
 * acquire_permit; if granted, one write to the lease-bound log under the fence, and release.
 * About half the reader and permit calls wait too, up to half a TTL.
 */
static void
group_round(Worker *w)
{
	const ChaosOptions *opt = w->opt;
	int64_t ttl_us = (int64_t) opt->ttl_ms * 1000;
	char resource[CHAOS_NAME_LEN];
	char pre[TS_LEN];
	char post[TS_LEN];
	char live_from[TS_LEN];
	char slot[16];
	char wait_text[32];
	char permits_text[16];
	const char *params[5];
	const char *sql;
	const char *mode;
	bool reader = false;
	int64_t fence;
	int64_t granted_at;
	bool frozen;
	bool late;
	WriteOutcome outcome;

	resource_name(resource, sizeof(resource), (int) rng_range(&w->rng, 0, opt->resources - 1));
	if (opt->mode == MODE_PERMIT)
	{
		sql = SQL_ACQUIRE_PERMIT;
		mode = "permit";
	}
	else if (rng_range(&w->rng, 0, 99) < opt->writer_pct)
	{
		sql = SQL_ACQUIRE_WAIT;
		mode = "exclusive";
	}
	else
	{
		sql = SQL_ACQUIRE_SHARED;
		mode = "shared";
		reader = true;
	}
	snprintf(wait_text, sizeof(wait_text), "%d milliseconds",
			 sql == SQL_ACQUIRE_WAIT    ? opt->ttl_ms
			 : rng_range(&w->rng, 0, 1) ? opt->ttl_ms / 2
										: 0);
	snprintf(permits_text, sizeof(permits_text), "%d", opt->permits);
	params[0] = resource;
	params[1] = w->owner;
	params[2] = w->ttl_text;
	params[3] = wait_text;
	params[4] = permits_text;

	w->st.attempts++;
	fence = acquire_call(w, sql, sql == SQL_ACQUIRE_PERMIT ? 5 : 4, params, pre, post);
	if (!granted_or_back_off(w, fence, ttl_us))
		return;
	granted_at = now_us();
	if (reader)
		w->st.reader_grants++;
	if (!read_live_from(w, resource, fence, live_from, slot, sizeof(slot)))
	{
		release(w, resource, fence);
		return;
	}
	if (opt->mode == MODE_PERMIT && slot[0] == '\0')
		w->st.slot_unknown++;
	fprintf(w->log, "G\t%s\t%lld\t%s\t%s\t%s\t%d\t%s\t%s\n", resource, (long long) fence, w->owner,
			pre, post, opt->ttl_ms, mode, slot[0] ? slot : "\\N");

	/* Some work under the lease, then ask the parent; it may freeze us past the lease. */
	sleep_us(rng_range(&w->rng, 0, ttl_us / 30));
	frozen = handshake(w);
	late = now_us() - granted_at > ttl_us;
	if (frozen)
	{
		w->st.frozen++;
		if (late)
			w->st.frozen_past_lease++;
	}

	outcome = write_group(w, resource, fence, mode, slot[0] ? slot : NULL, live_from);
	if (outcome == WRITE_ACCEPTED)
	{
		w->st.accepted++;
		if (reader)
			w->st.reader_accepted++;
	}
	else if (outcome == WRITE_STALE)
	{
		w->st.stale++;
		if (reader)
			w->st.reader_stale++;
	}
	if (late)
	{
		w->st.late_writes++;
		if (outcome == WRITE_ACCEPTED)
			w->st.late_accepted++;
	}
	release(w, resource, fence);
}

static void
worker_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigterm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGINT, SIG_IGN); /* the parent decides when a run ends */
	signal(SIGPIPE, SIG_IGN);
#ifdef __linux__
	prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

void
worker_main(const ChaosOptions *opt, int id, int to_parent, int from_parent, int64_t deadline)
{
	Worker w;
	char path[512];
	char appname[64];
	char timeout[32];
	const char *params[1];
	PGresult *res;
	uint64_t seed_state;

	memset(&w, 0, sizeof(w));
	w.opt = opt;
	w.id = id;
	w.to_parent = to_parent;
	w.from_parent = from_parent;
	owner_name(w.owner, sizeof(w.owner), id);
	snprintf(w.ttl_text, sizeof(w.ttl_text), "%d milliseconds", opt->ttl_ms);
	seed_state = opt->seed ^ (UINT64_C(0x5851F42D4C957F2D) * (uint64_t) (id + 1));
	w.rng = rng_next(&seed_state);
	worker_signals();

	snprintf(path, sizeof(path), "%s/w%d.log", opt->logdir, id);
	w.log = fopen(path, "w");
	if (w.log == NULL)
	{
		chaos_warn("%s: cannot open %s: %s", w.owner, path, strerror(errno));
		_exit(2);
	}
	setvbuf(w.log, NULL, _IOLBF, 0); /* every line reaches the kernel before the next step */

	snprintf(appname, sizeof(appname), "fencelock-chaos-%s", w.owner);
	w.conn = chaos_connect(opt->conninfo, appname);
	if (w.conn == NULL)
		worker_exit(&w, 3);
	/* A safety net only: waits on a frozen worker's row lock last a few TTLs at most. */
	snprintf(timeout, sizeof(timeout), "%d", opt->ttl_ms * 20 > 30000 ? opt->ttl_ms * 20 : 30000);
	params[0] = timeout;
	res = PQexecParams(w.conn, "SELECT pg_catalog.set_config('statement_timeout', $1, false)", 1,
					   NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		worker_error(&w, "set statement_timeout", res);
	PQclear(res);

	while (!stop_requested && now_us() < deadline)
	{
		if (opt->mode == MODE_EXCLUSIVE)
			one_round(&w);
		else
			group_round(&w);
	}
	worker_exit(&w, 0);
}
