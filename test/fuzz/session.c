/*
 * lease/session.c — the fuzzer's sessions: what a slot sends next, and what its answers mean.
 *
 * A slot's statement is a call of an entry point (gen.c builds it), a read of a view, a write to a
 * fenced table, a transaction's BEGIN, SAVEPOINT, ROLLBACK TO, COMMIT, ROLLBACK or PREPARE, a
 * COMMIT or ROLLBACK PREPARED, a SET, or (the role with CREATE) a scratch table with a fence
 * trigger of random arguments.  The grants a call returns wait in the transaction's list until it
 * commits (then check.c records them), or are dropped with a rollback.  A success of a
 * non-grantee on a reserved name, an XX error and a lost connection are violations, printed with
 * the session's statements.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

/* Note a statement in the session's history (the last FZ_HIST). */
static void
remember(Slot *s, const char *state)
{
	if (s->nhist == FZ_HIST)
	{
		memmove(s->hist[0], s->hist[1], sizeof(s->hist[0]) * (FZ_HIST - 1));
		memmove(s->hist_state[0], s->hist_state[1], sizeof(s->hist_state[0]) * (FZ_HIST - 1));
		s->nhist--;
	}
	snprintf(s->hist[s->nhist], sizeof(s->hist[0]), "%s", s->sql);
	snprintf(s->hist_state[s->nhist], sizeof(s->hist_state[0]), "%s", state);
	s->nhist++;
}

/* Where a violation happened: the role, the session, the statement and those before it. */
static void
print_context(const Slot *s)
{
	static int printed;
	int from = s->nhist - 1 > 6 && ++printed > 3 ? s->nhist - 1 - 6 : 0;

	printf("  role %s, slot %d, session %d, statement %d of the session\n", cat.role_name[s->role],
		   s->id, s->session, s->statement);
	printf("  statement: %.1500s\n", s->sql);
	/* the whole session for the first three, the last six statements after */
	printf("  the session's statements before it (%s, [answer] statement):\n",
		   from == 0 ? "all of them" : "the last six");
	for (int i = from; i < s->nhist - 1; i++)
		printf("    [%s] %s\n", s->hist_state[i], s->hist[i]);
	printf("  replay: test/fuzz/fuzz -S %llu -c %d (same statements per slot; timing differs)\n",
		   (unsigned long long) opt.seed, opt.slots);
}

void
fz_free_grants(FzGrant *g, int n)
{
	for (int i = 0; i < n; i++)
	{
		free(g[i].resource);
		free(g[i].owner);
	}
}

static void
discard_pending(Slot *s, int keep)
{
	st.grants_rolled_back += s->npending - keep;
	fz_free_grants(s->pending + keep, s->npending - keep);
	s->npending = keep;
}

static void
commit_pending(Slot *s)
{
	fz_commit_grants(&cat, s->pending, s->npending, &st);
	fz_free_grants(s->pending, s->npending);
	s->npending = 0;
}

/* Start a session for the slot: connect, become its role, set the first statement_timeout. */
bool
fz_session_start(Slot *s)
{
	char app[64];
	char sql[256];
	uint64_t seed = opt.seed ^ ((uint64_t) (s->id + 1) * UINT64_C(0x9E3779B97F4A7C15)) ^
					((uint64_t) (s->session + 1) * UINT64_C(0xD1B54A32D192ED03));

	s->session++;
	s->rng = seed;
	fz_rng(&s->rng);
	snprintf(app, sizeof(app), "fuzz-slot%d-session%d", s->id, s->session);
	s->conn = connect_retrying(app);
	if (s->conn == NULL)
		return false;
	snprintf(sql, sizeof(sql),
			 "SET standard_conforming_strings = on; SET fencelock.history = on;%s%s%s",
			 s->role == ROLE_SUPER ? "" : " SET SESSION AUTHORIZATION ",
			 s->role == ROLE_SUPER ? "" : cat.role_name[s->role], "");
	if (!fz_exec_ok(s->conn, sql, "starting a session"))
		return false;
	s->statement = 0;
	s->nhist = 0;
	s->budget = (int) fz_range(&s->rng, 5, 200);
	s->nsavepoints = 0;
	s->tx_left = 0;
	s->npending = 0;
	/* a third of the sessions start under a tiny timeout: the first checks get cancelled */
	if (fz_chance(&s->rng, 33))
	{
		snprintf(sql, sizeof(sql), "SET statement_timeout = '%dms'", (int) fz_range(&s->rng, 1, 3));
		s->tiny_left = (int) fz_range(&s->rng, 1, 3);
		st.tiny_timeouts++;
	}
	else
	{
		snprintf(sql, sizeof(sql), "SET statement_timeout = '4s'");
		s->tiny_left = 0;
	}
	snprintf(s->sql, sizeof(s->sql), "%s", sql);
	s->statement++;
	remember(s, fz_exec_ok(s->conn, sql, "setting statement_timeout") ? "ok" : "error");
	return true;
}

void
fz_session_end(Slot *s)
{
	discard_pending(s, 0);
	PQfinish(s->conn);
	s->conn = NULL;
}

/* A function, weighted: the guarded entry points more often, the admin and trigger ones less. */
static const FzFunc *
pick_function(Slot *s)
{
	int total = 0;
	int w[FZ_MAX_FUNCS];
	int k;

	for (int i = 0; i < cat.nfuncs; i++)
	{
		const FzFunc *f = &cat.funcs[i];

		w[i] = f->kind != KIND_OTHER ? 9 : 3;
		if (f->trigger || strcmp(f->name, "raise_fences") == 0 || strcmp(f->name, "purge") == 0 ||
			strcmp(f->name, "revoke") == 0 || strcmp(f->name, "stats_reset") == 0 ||
			strcmp(f->name, "resource_stats_reset") == 0)
			w[i] = 1;
		total += w[i];
	}
	k = (int) fz_range(&s->rng, 0, total - 1);
	for (int i = 0; i < cat.nfuncs; i++)
	{
		if (k < w[i])
			return &cat.funcs[i];
		k -= w[i];
	}
	return &cat.funcs[0];
}

static void
pick_setting(Slot *s)
{
	static const char *const user[] = {
		"fencelock.lock_delay = '0'",
		"fencelock.lock_delay = '20ms'",
		"fencelock.lock_delay = '-1'",
		"fencelock.lock_delay = '2d'",
		"fencelock.max_waiters = 1",
		"fencelock.max_waiters = 0",
		"fencelock.default_ttl = '50ms'",
		"fencelock.default_ttl = '0'",
		"fencelock.wait_recheck = '10ms'",
		"fencelock.claim_recheck = '10ms'",
		"statement_timeout = '1ms'",
		"statement_timeout = '4s'",
		"statement_timeout = '30ms'",
		"transaction_isolation = 'repeatable read'",
		"lock_timeout = '5ms'",
		"fencelock.nosuch = 1",
	};
	static const char *const super[] = {
		"fencelock.direct_path = off",   "fencelock.direct_path = on", "fencelock.notify = on",
		"fencelock.log_level = 'debug'", "fencelock.max_ttl = '1s'",   "fencelock.history = on",
	};

	if (s->role == ROLE_SUPER && fz_chance(&s->rng, 40))
		snprintf(s->sql, SQL_LEN, "SET %s", super[fz_range(&s->rng, 0, 5)]);
	else
		snprintf(s->sql, SQL_LEN, "SET %s", user[fz_range(&s->rng, 0, 15)]);
	if (strstr(s->sql, "statement_timeout = '1ms'") || strstr(s->sql, "'30ms'"))
		s->tiny_left = (int) fz_range(&s->rng, 1, 2);
}

/* The creator's scratch table: a fence trigger with random, often hostile, arguments. */
static void
build_scratch(Slot *s)
{
	static const char *const args[] = {
		"'last_fence'",
		"'last_fence', 'lease=fz-app:r0'",
		"'last_fence', 'lease=fz:r1'",
		"'last_fence', 'lease_column=res'",
		"'last_fence', 'strict', 'lease=fz:r1'",
		"'nosuch'",
		"'res'",
		"'last_fence', 'lease='",
		"'last_fence', 'bogus'",
		"'last_fence', 'allow_unfenced', 'lease=fz-ops:r0'",
	};
	static const char *const how[] = {
		"BEFORE INSERT OR UPDATE OR DELETE",
		"BEFORE UPDATE OF last_fence",
		"AFTER UPDATE",
		"BEFORE UPDATE",
		"BEFORE INSERT OR UPDATE",
	};
	const char *each = fz_chance(&s->rng, 85) ? "ROW" : "STATEMENT";

	snprintf(s->sql, SQL_LEN,
			 "DROP TABLE IF EXISTS fuzz_ws.x_%d; "
			 "CREATE TABLE fuzz_ws.x_%d (id integer, last_fence bigint, res text); "
			 "CREATE TRIGGER fence %s ON fuzz_ws.x_%d FOR EACH %s %s "
			 "EXECUTE FUNCTION fencelock.fence_trigger(%s); "
			 "INSERT INTO fuzz_ws.x_%d VALUES (1, 1, 'fz:r1'); "
			 "UPDATE fuzz_ws.x_%d SET last_fence = last_fence + 1",
			 s->id, s->id, how[fz_range(&s->rng, 0, 4)], s->id, each,
			 fz_chance(&s->rng, 10) ? "WHEN (true)" : "", args[fz_range(&s->rng, 0, 9)], s->id,
			 s->id);
}

/* Choose and send the slot's next statement. */
void
fz_send_next(Slot *s)
{
	PGTransactionStatusType ts = PQtransactionStatus(s->conn);
	int k;

	s->func = NULL;
	s->judged[0] = '\0';
	memset(&s->info, 0, sizeof(s->info));
	if (s->tiny_left < 0 && ts != PQTRANS_INERROR)
	{
		s->act = ACT_SET;
		snprintf(s->sql, SQL_LEN, "SET statement_timeout = '4s'");
	}
	else if (ts == PQTRANS_INERROR)
	{
		k = (int) fz_range(&s->rng, 0, 99);
		if (s->nsavepoints > 0 && k < 70)
		{
			s->act = ACT_ROLLBACK_TO;
			snprintf(s->sql, SQL_LEN, "ROLLBACK TO SAVEPOINT s%d", s->nsavepoints);
		}
		else if (k < 90)
		{
			s->act = ACT_ROLLBACK;
			snprintf(s->sql, SQL_LEN, "ROLLBACK");
		}
		else
		{
			s->act = ACT_COMMIT; /* answered ROLLBACK */
			snprintf(s->sql, SQL_LEN, "COMMIT");
		}
	}
	else if (ts == PQTRANS_INTRANS && s->tx_left <= 0)
	{
		k = (int) fz_range(&s->rng, 0, 99);
		if (k < 20 && s->gid[0] == '\0' && outstanding_prepared < 4)
		{
			s->act = ACT_PREPARE;
			snprintf(s->gid, sizeof(s->gid), "fz_%llu_%d_%d", (unsigned long long) opt.seed, s->id,
					 ++s->gids);
			snprintf(s->sql, SQL_LEN, "PREPARE TRANSACTION '%s'", s->gid);
		}
		else if (k < 80)
		{
			s->act = ACT_COMMIT;
			snprintf(s->sql, SQL_LEN, "COMMIT");
		}
		else
		{
			s->act = ACT_ROLLBACK;
			snprintf(s->sql, SQL_LEN, "ROLLBACK");
		}
	}
	else if (ts == PQTRANS_IDLE && s->gid[0] != '\0' && fz_chance(&s->rng, 30))
	{
		s->act = ACT_FINISH_PREPARED;
		s->commit_it = fz_chance(&s->rng, 70);
		snprintf(s->sql, SQL_LEN, "%s PREPARED '%s'", s->commit_it ? "COMMIT" : "ROLLBACK", s->gid);
	}
	else
	{
		k = (int) fz_range(&s->rng, 0, 99);
		if (s->tiny_left > 0 && k < 80)
			k = 0; /* the first statements of a session under a tiny timeout: calls */
		if (k < 58)
		{
			s->act = ACT_CALL;
			s->func = pick_function(s);
			fz_build_call(&cat, s->func, s->role, &s->rng, s->sql, SQL_LEN, &s->info);
		}
		else if (k < 64)
		{
			s->act = ACT_VIEW;
			snprintf(s->sql, SQL_LEN,
					 "SELECT pg_catalog.count(*) FROM (SELECT * FROM fencelock.%s LIMIT 50) AS v",
					 cat.views[fz_range(&s->rng, 0, cat.nviews - 1)]);
		}
		else if (k < 77)
		{
			s->act = ACT_WRITE;
			fz_build_write(&cat, s->role, &s->rng, s->sql, SQL_LEN, s->judged, sizeof(s->judged));
		}
		else if (k < 82 && ts == PQTRANS_IDLE)
		{
			static const char *const levels[] = {"", "", "", " ISOLATION LEVEL REPEATABLE READ",
												 " ISOLATION LEVEL SERIALIZABLE"};

			s->act = ACT_BEGIN;
			snprintf(s->sql, SQL_LEN, "BEGIN%s", levels[fz_range(&s->rng, 0, 4)]);
		}
		else if (k < 82 && s->nsavepoints < 15)
		{
			s->act = ACT_SAVEPOINT;
			snprintf(s->sql, SQL_LEN, "SAVEPOINT s%d", s->nsavepoints + 1);
		}
		else if (k < 86 && s->nsavepoints > 0)
		{
			s->act = ACT_ROLLBACK_TO;
			snprintf(s->sql, SQL_LEN, "ROLLBACK TO SAVEPOINT s%d",
					 (int) fz_range(&s->rng, 1, s->nsavepoints));
		}
		else if (k < 90)
		{
			s->act = ACT_SET;
			pick_setting(s);
		}
		else if (k < 93 && s->role == ROLE_CREATE)
		{
			s->act = ACT_SCRATCH;
			build_scratch(s);
		}
		else
		{
			s->act = ACT_CALL;
			s->func = pick_function(s);
			fz_build_call(&cat, s->func, s->role, &s->rng, s->sql, SQL_LEN, &s->info);
		}
	}
	if (ts != PQTRANS_IDLE)
		s->tx_left--;
	s->statement++;
	s->budget--;
	st.statements++;
	st.by_role[s->role]++;
	if (opt.verbose)
		printf("slot %d %s: %.300s\n", s->id, cat.role_name[s->role], s->sql);
	if (!PQsendQuery(s->conn, s->sql))
	{
		/* the connection is gone: handled as a lost result */
		s->busy = true;
		return;
	}
	s->busy = true;
	s->sent_at = fz_now_us();
}

/* The grants a successful call returned: into the transaction's pending ones. */
static void
note_grants(Slot *s, const PGresult *res)
{
	const char *v;
	int64_t fences[FZ_CALL_RES];
	int n = 0;
	static long uuid_owner;

	if (s->func == NULL || (s->func->kind != KIND_GRANT && s->func->kind != KIND_GRANT_ALL) ||
		res == NULL || PQntuples(res) != 1 || PQgetisnull(res, 0, 0) || s->info.res_unknown)
		return;
	v = PQgetvalue(res, 0, 0);
	if (s->func->kind == KIND_GRANT)
	{
		if (s->info.nres != 1)
			return;
		fences[n++] = strtoll(v, NULL, 10);
	}
	else
	{
		const char *p = v + (v[0] == '{');

		while (*p && *p != '}' && n < FZ_CALL_RES)
		{
			fences[n++] = strtoll(p, (char **) &p, 10);
			if (*p == ',')
				p++;
		}
		if (n != s->info.nres)
			return;
	}
	for (int i = 0; i < n && s->npending < FZ_MAX_PENDING; i++)
	{
		FzGrant *g = &s->pending[s->npending++];
		char owner[64];

		g->resource = fz_strdup(s->info.res[i]);
		if (s->info.owner_unknown)
		{
			snprintf(owner, sizeof(owner), "(uuid %ld)", ++uuid_owner);
			g->owner = fz_strdup(owner);
		}
		else
			g->owner = fz_strdup(s->info.owner);
		g->fence = fences[i];
		fz_note_fence(g->resource, g->fence);
	}
}

/* A non-grantee's call on a reserved name answered without an error: the check was skipped. */
static void
judge_reserved(Slot *s, const PGresult *res)
{
	const char *name = NULL;
	const char *answer;
	char shown[80];
	bool effect;

	if (s->role == ROLE_SUPER)
		return;
	if (s->act == ACT_WRITE)
	{
		if (s->judged[0] && fz_name_judged(s->judged) &&
			!fz_role_may_use(&cat, s->role, s->judged) && atol(PQcmdTuples((PGresult *) res)) > 0)
		{
			fz_violation(V_RESERVED,
						 "%s wrote %s row(s) bound to lease \"%s\", which is reserved to "
						 "other roles",
						 cat.role_name[s->role], PQcmdTuples((PGresult *) res),
						 fz_printable(s->judged, shown, sizeof(shown)));
			print_context(s);
		}
		return;
	}
	if (s->func == NULL || s->func->kind == KIND_OTHER)
		return;
	for (int i = 0; i < s->info.nres; i++)
		if (fz_name_judged(s->info.res[i]) && !fz_role_may_use(&cat, s->role, s->info.res[i]))
			name = s->info.res[i];
	if (name == NULL)
		return;
	answer = PQntuples(res) == 1 ? (PQgetisnull(res, 0, 0) ? "NULL" : PQgetvalue(res, 0, 0)) : "?";
	effect = !(strcmp(answer, "f") == 0 || strcmp(answer, "NULL") == 0 ||
			   strcmp(answer, "0") == 0 || strcmp(answer, "{}") == 0);
	fz_violation(V_RESERVED,
				 "%s called %s on \"%s\" (reserved to other roles) and was answered %s%s "
				 "instead of 42501",
				 cat.role_name[s->role], s->func->name, fz_printable(name, shown, sizeof(shown)),
				 answer[0] ? answer : "(void)", effect ? " (it took effect)" : "");
	print_context(s);
}

/* A statement's results are all in: account for them. */
void
fz_finish_statement(Slot *s, PGresult *last, PGresult *error, bool lost)
{
	const char *state = error ? fz_sqlstate(error) : "";
	const char *tag = last ? PQcmdStatus(last) : "";

	s->busy = false;
	if (opt.verbose)
		printf("slot %d answer: %s\n", s->id, lost ? "lost" : error ? state : tag);
	if (lost)
	{
		if (strcmp(state, "57P01") != 0 && strcmp(state, "57P02") != 0 &&
			strcmp(state, "57P03") != 0)
		{
			fz_violation(V_LOST_BACKEND, "the server closed %s's connection: %s",
						 cat.role_name[s->role], PQerrorMessage(s->conn));
			print_context(s);
		}
		remember(s, "lost");
		/* a COMMIT or PREPARE whose answer was lost: its grants are unknown, not judged */
		fz_session_end(s);
		s->nsavepoints = 0;
		if (s->act == ACT_PREPARE)
			s->gid[0] = '\0'; /* rolled back at the end if it was prepared */
		return;
	}
	if (error)
	{
		st.errors++;
		fz_count_state(&st, state);
		if (strcmp(state, "57014") == 0)
			st.timeouts++;
		if (strcmp(state, "42501") == 0)
			st.refused++;
		if (strncmp(state, "XX", 2) == 0)
		{
			fz_violation(V_INTERNAL, "%s: %s", state, PQresultErrorMessage(error));
			print_context(s);
		}
		remember(s, state);
		if (s->act == ACT_PREPARE)
			s->gid[0] = '\0';
		/* a failed COMMIT / ROLLBACK PREPARED keeps its gid: tried again later, or at the end */
	}
	else
	{
		st.ok++;
		remember(s, "ok");
		switch (s->act)
		{
			case ACT_CALL:
				judge_reserved(s, last);
				note_grants(s, last);
				break;
			case ACT_WRITE:
				judge_reserved(s, last);
				if (atol(PQcmdTuples(last)) > 0)
					st.writes_ok++;
				break;
			case ACT_BEGIN:
				s->tx_left = (int) fz_range(&s->rng, 1, 8);
				s->nsavepoints = 0;
				break;
			case ACT_SAVEPOINT:
				s->marks[s->nsavepoints++] = s->npending;
				break;
			case ACT_ROLLBACK_TO:
			{
				int n = atoi(strrchr(s->sql, 's') + 1);

				if (n >= 1 && n <= s->nsavepoints)
				{
					discard_pending(s, s->marks[n - 1]);
					s->nsavepoints = n;
				}
				st.savepoints_rolled_back++;
				break;
			}
			case ACT_COMMIT:
				if (strcmp(tag, "COMMIT") == 0)
					commit_pending(s);
				break;
			case ACT_PREPARE:
				if (strcmp(tag, "PREPARE TRANSACTION") == 0)
				{
					memcpy(s->prepared, s->pending, sizeof(FzGrant) * s->npending);
					s->nprepared = s->npending;
					s->npending = 0;
					outstanding_prepared++;
					st.prepared++;
				}
				else
					s->gid[0] = '\0';
				break;
			case ACT_FINISH_PREPARED:
				if (s->commit_it)
				{
					fz_commit_grants(&cat, s->prepared, s->nprepared, &st);
					st.commit_prepared++;
				}
				else
				{
					st.grants_rolled_back += s->nprepared;
					st.rollback_prepared++;
				}
				fz_free_grants(s->prepared, s->nprepared);
				s->nprepared = 0;
				s->gid[0] = '\0';
				outstanding_prepared--;
				break;
			default:
				break;
		}
	}
	/* the transaction as the server sees it now */
	switch (PQtransactionStatus(s->conn))
	{
		case PQTRANS_IDLE:
			if (s->npending > 0)
			{
				/* ended: by autocommit (committed), by an error or a rollback (not) */
				if (!error && s->act != ACT_ROLLBACK && s->act != ACT_COMMIT &&
					s->act != ACT_PREPARE)
					commit_pending(s);
				else
					discard_pending(s, 0);
			}
			s->nsavepoints = 0;
			break;
		default:
			break;
	}
	if (s->tiny_left > 0 && --s->tiny_left == 0)
		s->tiny_left = -1;
	else if (s->tiny_left < 0 && s->act == ACT_SET && !error)
		s->tiny_left = 0;
}

/* Read what is there for a busy slot; finish the statement when its results are all in. */
void
fz_poll_slot(Slot *s, PGresult **last, PGresult **error)
{
	PGresult *res;

	if (!PQconsumeInput(s->conn))
	{
		fz_finish_statement(s, *last, *error, true);
		return;
	}
	while (!PQisBusy(s->conn))
	{
		res = PQgetResult(s->conn);
		if (res == NULL)
		{
			fz_finish_statement(s, *last, *error, PQstatus(s->conn) == CONNECTION_BAD);
			if (*last)
				PQclear(*last);
			if (*error)
				PQclear(*error);
			*last = *error = NULL;
			return;
		}
		if (PQresultStatus(res) == PGRES_FATAL_ERROR || PQresultStatus(res) == PGRES_NONFATAL_ERROR)
		{
			if (*error == NULL)
				*error = res;
			else
				PQclear(res);
		}
		else
		{
			if (*last)
				PQclear(*last);
			*last = res;
		}
	}
}
