/*
 * fuzz.c — fencelock's SQL fuzzer: options, setup, the event loop over the sessions, the end.
 *
 * Each slot is one connection playing one of the four roles (the superuser, fuzz_app, fuzz_creator,
 * fuzz_plain), sending one statement at a time asynchronously; the loop waits on every busy
 * connection at once, so a waiting acquire or a row lock blocks only its own slot.  A slot's
 * statements come from its own random stream (the seed, the slot, the session), so a seed replays
 * the same statements; what the server answers, and so what follows from it, depends on timing.
 *
 * A fresh session sets a tiny statement_timeout for its first statements a third of the time (so
 * its first privilege check may be cancelled), then a normal one.  Transactions take savepoints,
 * roll back to them, commit, roll back or PREPARE; prepared ones are committed or rolled back
 * later by their slot, or at the end.  Sessions end after a random number of statements and a new
 * one starts.  lease/session.c chooses the statements and reads their answers, gen.c builds the calls,
 * check.c holds the invariants; doc/testing.md, "The fuzzer", says how to run it.
 */
#include "fuzz.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

FzOptions opt;
FzCatalog cat;
FzStats st;
int outstanding_prepared;
static Slot slots[FZ_MAX_SLOTS];
static volatile sig_atomic_t interrupted;

static const char *const role_names[FZ_NROLES] = {NULL, "fuzz_app", "fuzz_creator", "fuzz_plain"};

static void
on_signal(int signo)
{
	(void) signo;
	interrupted = 1;
}

static void usage(FILE *out) __attribute__((noreturn));

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: fuzz [options]\n"
			"Calls every SQL entry point of fencelock from four roles with hostile arguments,\n"
			"tiny statement timeouts, savepoints and 2PC, and checks its invariants.  Exit 0\n"
			"only if no invariant was violated.\n\n"
			"  -d CONNINFO  connection string or URI (default: the libpq environment); the user\n"
			"               must be a superuser, the database must have fencelock\n"
			"  -s SECONDS   duration (default 60)\n"
			"  -c N         connections (default 8, at most %d), spread over the four roles\n"
			"  -S SEED      random seed (default: from the clock; printed at start)\n"
			"  -l FILE      the server log, scanned for crashes and failed assertions\n"
			"  -v           print every statement\n",
			FZ_MAX_SLOTS);
	exit(out == stdout ? 0 : 2);
}

static void
parse_options(int argc, char **argv)
{
	bool seeded = false;
	int c;
	char *end;

	opt.seconds = 60;
	opt.slots = 8;
	while ((c = getopt(argc, argv, "d:s:c:S:l:vh")) != -1)
	{
		switch (c)
		{
			case 'd':
				opt.conninfo = optarg;
				break;
			case 's':
				opt.seconds = (int) strtol(optarg, &end, 10);
				if (*end || opt.seconds < 1)
					usage(stderr);
				break;
			case 'c':
				opt.slots = (int) strtol(optarg, &end, 10);
				if (*end || opt.slots < 1 || opt.slots > FZ_MAX_SLOTS)
					usage(stderr);
				break;
			case 'S':
				errno = 0;
				opt.seed = strtoull(optarg, &end, 0);
				if (errno || *end || end == optarg)
					usage(stderr);
				seeded = true;
				break;
			case 'l':
				opt.server_log = optarg;
				break;
			case 'v':
				opt.verbose = true;
				break;
			case 'h':
				usage(stdout);
			default:
				usage(stderr);
		}
	}
	if (optind < argc)
		usage(stderr);
	if (!seeded)
	{
		uint64_t s = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32) ^ (uint64_t) fz_now_us();

		opt.seed = fz_rng(&s) % UINT64_C(1000000000000);
	}
}

/* Notices (DROP ... IF EXISTS, the fuzzed functions' own) are not the fuzzer's business. */
static void
no_notices(void *arg, const char *message)
{
	(void) arg;
	(void) message;
}

static PGconn *
connect_as(const char *appname)
{
	const char *const keys[] = {"dbname", "application_name", NULL};
	const char *values[] = {opt.conninfo, appname, NULL};
	PGconn *conn = PQconnectdbParams(keys, values, 1);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "fuzz: %s could not connect: %s", appname, PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	PQsetNoticeProcessor(conn, no_notices, NULL);
	return conn;
}

/* The admin connection again after a crash: up to 60 s. */
PGconn *
connect_retrying(const char *appname)
{
	for (int i = 0; i < 120; i++)
	{
		PGconn *c = connect_as(appname);

		if (c)
			return c;
		usleep(500000);
	}
	return NULL;
}

/* The roles, the reservations, the fenced tables; the judged prefixes into cat. */
static bool
setup(PGconn *admin)
{
	static const char *const script =
		"SET client_min_messages = warning;"
		"DO $$ BEGIN"
		"  IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN"
		"    RAISE EXCEPTION 'the fuzzer must connect as a superuser';"
		"  END IF;"
		"  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'fuzz_app') THEN"
		"    CREATE ROLE fuzz_app; END IF;"
		"  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'fuzz_creator') THEN"
		"    CREATE ROLE fuzz_creator; END IF;"
		"  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'fuzz_plain') THEN"
		"    CREATE ROLE fuzz_plain; END IF;"
		"  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'fuzz_ops') THEN"
		"    CREATE ROLE fuzz_ops; END IF;"
		"END $$;"
		"SELECT pg_catalog.count(fencelock.revoke_resources(p.prefix, p.grantee))"
		"  FROM fencelock.resource_privileges AS p WHERE p.prefix LIKE 'fz%' OR p.prefix LIKE 'zz%'"
		"    OR p.prefix = '' OR p.prefix NOT SIMILAR TO '[ -~]*';"
		"SELECT fencelock.grant_resources('fz-app:', 'fuzz_app'),"
		"       fencelock.grant_resources('fz-app:cr:', 'fuzz_creator'),"
		"       fencelock.grant_resources('fz-ops:', 'fuzz_ops');"
		"DROP SCHEMA IF EXISTS fuzz_ws CASCADE;"
		"CREATE SCHEMA fuzz_ws;"
		"GRANT USAGE ON SCHEMA fuzz_ws TO PUBLIC;"
		"GRANT CREATE ON SCHEMA fuzz_ws TO fuzz_creator;"
		"CREATE TABLE fuzz_ws.lb_app (id bigserial PRIMARY KEY, last_fence bigint, v text NOT NULL "
		"  DEFAULT '');"
		"CREATE TABLE fuzz_ws.lb_cr (LIKE fuzz_ws.lb_app INCLUDING ALL);"
		"CREATE TABLE fuzz_ws.lb_ops (LIKE fuzz_ws.lb_app INCLUDING ALL);"
		"CREATE TABLE fuzz_ws.lb_open (LIKE fuzz_ws.lb_app INCLUDING ALL);"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.lb_app FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=fz-app:r0');"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.lb_cr FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=fz-app:cr:r0');"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.lb_ops FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=fz-ops:r0');"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.lb_open FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=fz:r0');"
		"CREATE TABLE fuzz_ws.lb_col (id bigserial PRIMARY KEY, res text NOT NULL, last_fence "
		"  bigint);"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.lb_col FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease_column=res');"
		"CREATE TABLE fuzz_ws.rows (id integer PRIMARY KEY, last_fence bigint NOT NULL DEFAULT 0);"
		"CREATE TRIGGER fence BEFORE UPDATE ON fuzz_ws.rows FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence');"
		"INSERT INTO fuzz_ws.rows (id) SELECT pg_catalog.generate_series(1, 5);"
		"CREATE TABLE fuzz_ws.jobs (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'ready',"
		"  lease_owner text, lease_until timestamptz, attempt integer NOT NULL DEFAULT 0,"
		"  fence bigint NOT NULL DEFAULT 0, run_after timestamptz NOT NULL DEFAULT now(),"
		"  max_attempts integer DEFAULT 5, last_error text, finished_at timestamptz,"
		"  payload jsonb, result jsonb);"
		"SELECT fencelock.enable_tasks('fuzz_ws.jobs');"
		"INSERT INTO fuzz_ws.jobs (id, payload) SELECT i, '{}' FROM pg_catalog.generate_series(1, "
		"12) "
		"  AS i;"
		"GRANT ALL ON ALL TABLES IN SCHEMA fuzz_ws TO PUBLIC;"
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA fuzz_ws TO PUBLIC;"
		"SET ROLE fuzz_creator;"
		"CREATE TABLE fuzz_ws.c_app (id bigserial PRIMARY KEY, last_fence bigint, v text NOT NULL "
		"  DEFAULT '');"
		"CREATE TABLE fuzz_ws.c_ops (LIKE fuzz_ws.c_app INCLUDING ALL);"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.c_app FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=fz-app:r1');"
		"CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fuzz_ws.c_ops FOR EACH ROW "
		"  EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=fz-ops:r1');"
		"GRANT ALL ON fuzz_ws.c_app, fuzz_ws.c_ops TO PUBLIC;"
		"GRANT ALL ON SEQUENCE fuzz_ws.c_app_id_seq TO PUBLIC;"
		"RESET ROLE;";
	PGresult *res;
	const char *me;

	/* prepared transactions a killed run left */
	res = PQexec(admin, "SELECT gid FROM pg_catalog.pg_prepared_xacts WHERE gid LIKE 'fz\\_%' "
						"AND database = pg_catalog.current_database()");
	for (int r = 0; PQresultStatus(res) == PGRES_TUPLES_OK && r < PQntuples(res); r++)
	{
		char sql[128];

		snprintf(sql, sizeof(sql), "ROLLBACK PREPARED '%s'", PQgetvalue(res, r, 0));
		fz_exec_ok(admin, sql, "rolling back a prepared transaction of an earlier run");
	}
	PQclear(res);
	if (!fz_exec_ok(admin, script, "setup"))
		return false;
	me = PQparameterStatus(admin, "session_authorization");
	snprintf(cat.role_name[ROLE_SUPER], FZ_NAME_LEN, "%s", me ? me : "postgres");
	for (int r = 1; r < FZ_NROLES; r++)
		snprintf(cat.role_name[r], FZ_NAME_LEN, "%s", role_names[r]);

	/* Every reservation there is, judged for each role by membership. */
	res = PQexec(admin,
				 "SELECT p.prefix, "
				 "  pg_catalog.bool_or(pg_catalog.pg_has_role('fuzz_app', r.oid, 'MEMBER')), "
				 "  pg_catalog.bool_or(pg_catalog.pg_has_role('fuzz_creator', r.oid, 'MEMBER')), "
				 "  pg_catalog.bool_or(pg_catalog.pg_has_role('fuzz_plain', r.oid, 'MEMBER')) "
				 "  FROM fencelock.resource_privileges AS p "
				 "  LEFT JOIN pg_catalog.pg_roles AS r ON r.rolname = p.grantee "
				 "  GROUP BY p.prefix ORDER BY 1");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "fuzz: reading resource_privileges failed: %s", PQerrorMessage(admin));
		PQclear(res);
		return false;
	}
	cat.nprefixes = 0;
	for (int r = 0; r < PQntuples(res) && cat.nprefixes < FZ_MAX_PREFIX; r++)
	{
		int i = cat.nprefixes++;

		snprintf(cat.prefixes[i], FZ_NAME_LEN, "%s", PQgetvalue(res, r, 0));
		cat.prefix_allows[i][ROLE_SUPER] = true;
		for (int k = 1; k < FZ_NROLES; k++)
			cat.prefix_allows[i][k] = PQgetvalue(res, r, k)[0] == 't';
	}
	PQclear(res);
	return fz_read_catalog(admin, &cat);
}

/* At the end: every prepared transaction a slot left is committed or rolled back. */
static void
resolve_prepared(PGconn *admin)
{
	uint64_t rng = opt.seed ^ UINT64_C(0xABCDEF);

	for (int i = 0; i < opt.slots; i++)
	{
		Slot *s = &slots[i];
		char sql[128];
		bool commit = fz_chance(&rng, 60);
		PGresult *res;

		if (s->gid[0] == '\0')
			continue;
		snprintf(sql, sizeof(sql), "%s PREPARED '%s'", commit ? "COMMIT" : "ROLLBACK", s->gid);
		res = PQexec(admin, sql);
		if (PQresultStatus(res) == PGRES_COMMAND_OK && commit)
			fz_commit_grants(&cat, s->prepared, s->nprepared, &st);
		PQclear(res);
		fz_free_grants(s->prepared, s->nprepared);
		s->nprepared = 0;
		s->gid[0] = '\0';
	}
	/* any other (a PREPARE whose answer was lost): rolled back, its grants never judged */
	{
		PGresult *res =
			PQexec(admin, "SELECT gid FROM pg_catalog.pg_prepared_xacts "
						  "WHERE gid LIKE 'fz\\_%' AND database = pg_catalog.current_database()");

		for (int r = 0; PQresultStatus(res) == PGRES_TUPLES_OK && r < PQntuples(res); r++)
		{
			char sql[128];

			snprintf(sql, sizeof(sql), "ROLLBACK PREPARED '%s'", PQgetvalue(res, r, 0));
			fz_exec_ok(admin, sql, "rolling back a prepared transaction");
		}
		PQclear(res);
	}
}

static void
print_summary(double elapsed, bool amcheck_ran)
{
	long total = 0;

	printf("\n== fencelock fuzz summary (seed %llu) ==\n", (unsigned long long) opt.seed);
	printf("%-34s %.1f s, %d connections\n", "duration", elapsed, opt.slots);
	printf("%-34s %d functions, %d views\n", "entry points", cat.nfuncs, cat.nviews);
	printf("%-34s %ld (superuser %ld, app %ld, creator %ld, plain %ld)\n", "statements",
		   st.statements, st.by_role[ROLE_SUPER], st.by_role[ROLE_APP], st.by_role[ROLE_CREATE],
		   st.by_role[ROLE_PLAIN]);
	printf("%-34s %ld ok, %ld errors (57014 timeouts %ld, 42501 refused %ld)\n", "answers", st.ok,
		   st.errors, st.timeouts, st.refused);
	printf("%-34s", "errors by SQLSTATE");
	for (int i = 0; i < st.ntop; i++)
		printf(" %s:%ld", st.top_states[i], st.top_counts[i]);
	printf("\n");
	printf("%-34s %ld committed, %ld rolled back\n", "grants seen", st.grants_committed,
		   st.grants_rolled_back);
	printf("%-34s %ld (committed %ld, rolled back %ld)\n", "prepared transactions", st.prepared,
		   st.commit_prepared, st.rollback_prepared);
	printf("%-34s %ld\n", "rollbacks to a savepoint", st.savepoints_rolled_back);
	printf("%-34s %ld (started under a tiny timeout %ld)\n", "sessions", st.reconnects,
		   st.tiny_timeouts);
	printf("%-34s %ld\n", "fenced writes that changed rows", st.writes_ok);
	printf("%-34s %ld rounds, %ld current_fence values\n", "running checks", st.checks,
		   st.observations);
	printf("%-34s %s\n", "amcheck", amcheck_ran ? "ran" : "skipped (not installed)");
	if (fz_first_violation_us)
		printf("%-34s %.1f s into the run\n", "first violation",
			   (double) (fz_first_violation_us - fz_started_us) / 1e6);
	printf("violations:\n");
	for (int v = 0; v < FZ_NVIOLATIONS; v++)
	{
		printf("  %-48s %ld\n", fz_violation_name((FzViolation) v), fz_violations((FzViolation) v));
		total += fz_violations((FzViolation) v);
	}
	printf("fuzz: seed %llu, %ld statements in %.0f s, %ld violations: %s\n",
		   (unsigned long long) opt.seed, st.statements, elapsed, total, total ? "FAIL" : "PASS");
}

int
main(int argc, char **argv)
{
	PGconn *admin;
	int64_t started;
	int64_t deadline;
	int64_t next_check;
	PGresult *lasts[FZ_MAX_SLOTS] = {0};
	PGresult *errors[FZ_MAX_SLOTS] = {0};
	char start_time[64] = "";
	long log_offset;
	bool amcheck_ran = false;
	long total = 0;
	PGresult *res;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_options(argc, argv);
	fz_seed = opt.seed;
	printf("fencelock fuzz: seed %llu, %d s, %d connections\n", (unsigned long long) opt.seed,
		   opt.seconds, opt.slots);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	log_offset = fz_log_offset(opt.server_log);
	admin = connect_as("fuzz-admin");
	if (admin == NULL || !setup(admin))
		return 2;
	res = PQexec(admin, "SELECT pg_catalog.pg_postmaster_start_time()");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		snprintf(start_time, sizeof(start_time), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	fz_exec_ok(admin, "SET statement_timeout = '20s'", "SET statement_timeout");
	fz_check_init();
	printf("entry points: %d functions, %d views; judged prefixes:", cat.nfuncs, cat.nviews);
	for (int i = 0; i < cat.nprefixes; i++)
		printf(" '%s'", cat.prefixes[i]);
	printf("\n");

	for (int i = 0; i < opt.slots; i++)
	{
		slots[i].id = i;
		slots[i].role = (FzRole) (i % FZ_NROLES);
		if (!fz_session_start(&slots[i]))
			return 2;
		st.reconnects++;
	}

	started = fz_now_us();
	fz_started_us = started;
	deadline = started + (int64_t) opt.seconds * 1000000;
	next_check = started;
	for (;;)
	{
		struct pollfd fds[FZ_MAX_SLOTS];
		int map[FZ_MAX_SLOTS];
		int nfds = 0;
		int64_t now = fz_now_us();
		bool ending;
		int busy = 0;

		if (interrupted && deadline > now)
			deadline = now; /* Ctrl-C: end as at the deadline */
		ending = now >= deadline;

		for (int i = 0; i < opt.slots; i++)
		{
			Slot *s = &slots[i];

			if (!s->busy && !ending)
			{
				if (s->conn == NULL ||
					(s->budget <= 0 && PQtransactionStatus(s->conn) == PQTRANS_IDLE))
				{
					if (s->conn)
						fz_session_end(s);
					if (!fz_session_start(s))
					{
						fz_violation(V_LOST_BACKEND, "slot %d could not reconnect", s->id);
						ending = true;
						break;
					}
					st.reconnects++;
				}
				fz_send_next(s);
			}
			if (s->busy)
			{
				if (PQstatus(s->conn) == CONNECTION_BAD)
				{
					fz_finish_statement(s, NULL, NULL, true);
					continue;
				}
				fds[nfds].fd = PQsocket(s->conn);
				fds[nfds].events = POLLIN;
				map[nfds++] = i;
				busy++;
			}
		}
		if (ending && busy == 0)
			break;
		if (ending && now > deadline + 20 * 1000000)
		{
			/* a statement still running 20 s after the end: cancel it */
			for (int i = 0; i < opt.slots; i++)
				if (slots[i].busy)
				{
					PGcancel *c = PQgetCancel(slots[i].conn);
					char err[256];

					if (c)
					{
						PQcancel(c, err, sizeof(err));
						PQfreeCancel(c);
					}
				}
			deadline = now; /* once more after another 20 s */
		}
		if (nfds > 0 && poll(fds, (nfds_t) nfds, 50) > 0)
			for (int j = 0; j < nfds; j++)
				if (fds[j].revents)
					fz_poll_slot(&slots[map[j]], &lasts[map[j]], &errors[map[j]]);
		if (fz_now_us() >= next_check && !ending)
		{
			if (PQstatus(admin) == CONNECTION_BAD)
			{
				PQfinish(admin);
				admin = connect_retrying("fuzz-admin");
				if (admin == NULL)
					break;
			}
			fz_observe(admin, &st);
			next_check = fz_now_us() + 250000;
		}
	}

	/* the end: sessions closed (their open transactions roll back), prepared ones resolved */
	for (int i = 0; i < opt.slots; i++)
		if (slots[i].conn)
			fz_session_end(&slots[i]);
	if (PQstatus(admin) == CONNECTION_BAD)
	{
		PQfinish(admin);
		admin = connect_retrying("fuzz-admin");
		if (admin == NULL)
		{
			fz_violation(V_LOST_BACKEND, "the server does not accept connections after the run");
			print_summary((double) (fz_now_us() - started) / 1e6, false);
			return 1;
		}
	}
	resolve_prepared(admin);
	fz_final_audit(admin, &st, &amcheck_ran);
	res = PQexec(admin, "SELECT pg_catalog.pg_postmaster_start_time()");
	if (PQresultStatus(res) == PGRES_TUPLES_OK && start_time[0] &&
		strcmp(start_time, PQgetvalue(res, 0, 0)) != 0)
		fz_violation(V_SERVER_LOG, "the server restarted during the run (started %s, now %s)",
					 start_time, PQgetvalue(res, 0, 0));
	PQclear(res);
	fz_scan_log(opt.server_log, log_offset);
	PQfinish(admin);
	print_summary((double) (fz_now_us() - started) / 1e6, amcheck_ran);
	for (int v = 0; v < FZ_NVIOLATIONS; v++)
		total += fz_violations((FzViolation) v);
	if (interrupted)
		return 1;
	return total > 0 ? 1 : 0;
}
