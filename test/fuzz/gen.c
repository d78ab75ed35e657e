/*
 * gen.c — what the fuzzer calls: the extension's entry points read from the catalog, and
 * statements built from them with valid and hostile arguments.
 *
 * Every function of the extension (pg_depend's 'e' entries) is an entry point; its arguments'
 * names and types come from pg_proc, so a new function is fuzzed without a change here.  Values
 * are chosen by type, refined by the argument's name where the name says what it is (resource,
 * owner, fence, ttl, wait, permits, ...).  Statements are SQL text with literals (never
 * parameters), so a violation prints a statement that can be pasted into psql.
 *
 * Resource names come from a pool whose reservations the fuzzer set up (fz_role_may_use judges
 * them) and from hostile strings; names under 'fz-tmp:' and the prefixes grant_resources and
 * revoke_resources are given are never judged, since those calls change their reservations.
 */
#include "fuzz.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The judged pool: open names, the application's, the creator's (a longer prefix inside the
 * application's) and names reserved to a role no fuzzing role is a member of. */
static const char *const pool[] = {
	"fz:r0",     "fz:r1",        "fz:r2",        "fz:r3",     "fz-app:r0", "fz-app:r1",
	"fz-app:r2", "fz-app:cr:r0", "fz-app:cr:r1", "fz-ops:r0", "fz-ops:r1", "fz-tmp:r0",
};
#define POOL_SIZE ((int) (sizeof(pool) / sizeof(pool[0])))

static int64_t pool_fence[POOL_SIZE];

/* Tables of schema fuzz_ws that lease-bound writes go to, and the lease each is bound to. */
static const struct
{
	const char *table;
	const char *lease; /* NULL: lease_column=res, the row's name */
} bound[] = {
	{"lb_app", "fz-app:r0"}, {"lb_cr", "fz-app:cr:r0"}, {"lb_ops", "fz-ops:r0"},
	{"lb_open", "fz:r0"},    {"c_app", "fz-app:r1"},    {"c_ops", "fz-ops:r1"},
	{"lb_col", NULL},
};
#define NBOUND ((int) (sizeof(bound) / sizeof(bound[0])))

const char *
fz_pool_resource(int i)
{
	return pool[i];
}

int
fz_pool_size(void)
{
	return POOL_SIZE;
}

void
fz_note_fence(const char *resource, int64_t fence)
{
	for (int i = 0; i < POOL_SIZE; i++)
		if (strcmp(pool[i], resource) == 0 && fence > pool_fence[i])
			pool_fence[i] = fence;
}

/* Names under 'fz-tmp:' may be reserved at any moment by the fuzzed grant_resources. */
bool
fz_name_judged(const char *name)
{
	return strncmp(name, "fz-tmp:", 7) != 0;
}

/* Whether ROLE may use NAME by the judged reservations (the longest covering prefix decides). */
bool
fz_role_may_use(const FzCatalog *cat, FzRole role, const char *name)
{
	int best = -1;
	size_t best_len = 0;

	if (role == ROLE_SUPER)
		return true;
	for (int i = 0; i < cat->nprefixes; i++)
	{
		size_t l = strlen(cat->prefixes[i]);

		if (l > best_len && strncmp(name, cat->prefixes[i], l) == 0)
		{
			best = i;
			best_len = l;
		}
	}
	return best < 0 || cat->prefix_allows[best][role];
}

/*
 * Read the entry points: every function and view the extension owns.  Arguments are the
 * input ones (IN, INOUT, VARIADIC) in order.
 */
bool
fz_read_catalog(PGconn *conn, FzCatalog *cat)
{
	PGresult *res = PQexec(
		conn,
		"SELECT p.proname, p.pronargdefaults, p.proretset, p.provariadic <> 0, "
		"       pg_catalog.format_type(p.prorettype, NULL), "
		"       (SELECT pg_catalog.string_agg(COALESCE(u.n, '') || ' ' || "
		"               pg_catalog.format_type(u.t, NULL), ';' ORDER BY u.i) "
		"          FROM ROWS FROM (pg_catalog.unnest(COALESCE(p.proallargtypes, "
		"                   CAST(p.proargtypes AS pg_catalog.oid[]))), "
		"                   pg_catalog.unnest(p.proargnames), pg_catalog.unnest(p.proargmodes)) "
		"               WITH ORDINALITY AS u(t, n, m, i) "
		"         WHERE COALESCE(u.m, 'i') IN ('i', 'b', 'v')) "
		"  FROM pg_catalog.pg_depend AS d "
		"  JOIN pg_catalog.pg_proc AS p ON p.oid = d.objid "
		" WHERE d.classid = CAST('pg_catalog.pg_proc' AS pg_catalog.regclass) "
		"   AND d.refclassid = CAST('pg_catalog.pg_extension' AS pg_catalog.regclass) "
		"   AND d.deptype = 'e' "
		"   AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'fencelock') "
		" ORDER BY p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)");

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "fuzz: reading the entry points failed: %s", PQerrorMessage(conn));
		PQclear(res);
		return false;
	}
	cat->nfuncs = 0;
	for (int r = 0; r < PQntuples(res) && cat->nfuncs < FZ_MAX_FUNCS; r++)
	{
		FzFunc *f = &cat->funcs[cat->nfuncs++];
		char *args = fz_strdup(PQgetvalue(res, r, 5));
		char *save = NULL;

		memset(f, 0, sizeof(*f));
		snprintf(f->name, sizeof(f->name), "%s", PQgetvalue(res, r, 0));
		f->ndefaults = atoi(PQgetvalue(res, r, 1));
		f->retset = PQgetvalue(res, r, 2)[0] == 't';
		f->variadic = PQgetvalue(res, r, 3)[0] == 't';
		snprintf(f->ret, sizeof(f->ret), "%s", PQgetvalue(res, r, 4));
		f->trigger = strcmp(f->ret, "trigger") == 0 || strcmp(f->ret, "event_trigger") == 0;
		for (char *a = strtok_r(args, ";", &save); a && f->nargs < FZ_MAX_ARGS;
			 a = strtok_r(NULL, ";", &save))
		{
			FzArg *arg = &f->args[f->nargs++];
			char *sp = strchr(a, ' ');

			*sp = '\0';
			snprintf(arg->name, sizeof(arg->name), "%s", a);
			snprintf(arg->type, sizeof(arg->type), "%s", sp + 1);
		}
		free(args);
		if (strcmp(f->name, "acquire_all") == 0)
			f->kind = KIND_GRANT_ALL;
		else if (strncmp(f->name, "acquire", 7) == 0)
			f->kind = KIND_GRANT;
		else if (strcmp(f->name, "renew") == 0 || strcmp(f->name, "release") == 0 ||
				 strcmp(f->name, "release_all") == 0 || strcmp(f->name, "set_value") == 0 ||
				 strcmp(f->name, "assert_fence") == 0)
			f->kind = KIND_GUARDED;
	}
	PQclear(res);

	res = PQexec(conn, "SELECT c.relname FROM pg_catalog.pg_depend AS d "
					   "  JOIN pg_catalog.pg_class AS c ON c.oid = d.objid "
					   " WHERE d.classid = CAST('pg_catalog.pg_class' AS pg_catalog.regclass) "
					   "   AND d.deptype = 'e' AND c.relkind = 'v' "
					   "   AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension "
					   "                      WHERE extname = 'fencelock') "
					   " ORDER BY c.relname");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "fuzz: reading the views failed: %s", PQerrorMessage(conn));
		PQclear(res);
		return false;
	}
	cat->nviews = 0;
	for (int r = 0; r < PQntuples(res) && cat->nviews < FZ_MAX_VIEWS; r++)
		snprintf(cat->views[cat->nviews++], FZ_NAME_LEN, "%s", PQgetvalue(res, r, 0));
	PQclear(res);
	return cat->nfuncs > 0;
}

/* A growing buffer of SQL text. */
typedef struct Sql
{
	char *buf;
	size_t len;
	size_t used;
} Sql;

static void
add(Sql *s, const char *text)
{
	size_t n = strlen(text);

	if (s->used + n + 1 > s->len)
		n = s->len - s->used - 1;
	memcpy(s->buf + s->used, text, n);
	s->used += n;
	s->buf[s->used] = '\0';
}

/* A string literal: quotes doubled (standard_conforming_strings is on). */
static void
add_literal(Sql *s, const char *text)
{
	add(s, "'");
	for (const char *p = text; *p; p++)
		add(s, *p == '\'' ? "''" : (char[2]){*p, '\0'});
	add(s, "'");
}

static void addf(Sql *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
addf(Sql *s, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	add(s, tmp);
}

/* A string of N copies of C, then TAIL (the caller frees it). */
static char *
repeat(const char *head, char c, int n, const char *tail)
{
	size_t hl = strlen(head);
	size_t tl = strlen(tail);
	char *r = malloc(hl + n + tl + 1);

	memcpy(r, head, hl);
	memset(r + hl, c, n);
	memcpy(r + hl + n, tail, tl + 1);
	return r;
}

/* A resource name: from the pool mostly, else hostile.  *IDX: its pool index or -1. */
/* Record NAME among the resources of the call being built (NULL: an expression). */
static void
note_resource(FzCallInfo *info, const char *name)
{
	if (info == NULL)
		return;
	if (name == NULL || info->nres == FZ_CALL_RES)
		info->res_unknown = true;
	else
		snprintf(info->res[info->nres++], FZ_RES_LEN, "%s", name);
}

static void
add_resource(Sql *s, uint64_t *rng, int *idx, FzCallInfo *info)
{
	int k = (int) fz_range(rng, 0, 99);
	char *r;

	*idx = -1;
	if (k < 82)
	{
		*idx = (int) fz_range(rng, 0, POOL_SIZE - 1);
		add_literal(s, pool[*idx]);
		note_resource(info, pool[*idx]);
		return;
	}
	switch (k - 82)
	{
		case 0:
			add(s, "NULL::text"); /* refused (22004): nothing to judge */
			return;
		case 1:
			r = fz_strdup("");
			break;
		case 2: /* 1024 bytes under the application's prefix: the longest name there is */
			r = repeat("fz-app:", 'a', 1024 - 7, "");
			break;
		case 3: /* 1025 bytes */
			r = repeat("fz-app:", 'a', 1025 - 7, "");
			break;
		case 4: /* multibyte, a 4-byte character last at byte 1024 */
			r = repeat("fz-ops:", 'b', 1024 - 7 - 4, "\xf0\x9d\x84\x9e");
			break;
		case 5:
			r = fz_strdup("fz-app:\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e");
			break;
		case 6: /* the prefix itself is under it */
			r = fz_strdup("fz-app:");
			break;
		case 7: /* not under it: case and the colon matter */
			r = fz_strdup(fz_chance(rng, 50) ? "FZ-APP:r0" : "fz-app");
			break;
		case 8:
			r = fz_strdup("fz-app:cr"); /* the application's: not under 'fz-app:cr:' */
			break;
		case 9:
			r = fz_strdup(" fz-app:r0");
			break;
		case 10:
			r = fz_strdup("fz-app:r0\n");
			break;
		case 11:
			r = fz_strdup("fz-ops:'; SELECT 1; --");
			break;
		case 12:
			add(s, "fencelock.key('fz-app', 'r0')");
			note_resource(info, "fz-app:r0");
			return;
		case 13:
			add(s, "fencelock.key('fz-app:r0')");
			note_resource(info, "fz-app\\:r0"); /* the colon escaped */
			return;
		case 14:
			r = fz_strdup("fz:\\x00");
			break;
		case 15:
			add(s, "(SELECT pg_catalog.min(resource) FROM fencelock.leases)");
			note_resource(info, NULL);
			return;
		default:
			r = fz_strdup("fz-tmp:x");
			break;
	}
	add_literal(s, r);
	note_resource(info, r);
	free(r);
}

static const char *const owners[] = {"o0", "o1", "o2", "o3", "o4", "o5"};

static void
add_owner(Sql *s, uint64_t *rng, FzCallInfo *info)
{
	int k = (int) fz_range(rng, 0, 99);
	char *r;

	if (k < 88)
	{
		r = fz_strdup(owners[fz_range(rng, 0, 5)]);
		add_literal(s, r);
		snprintf(info->owner, sizeof(info->owner), "%s", r);
		free(r);
		return;
	}
	switch (k - 88)
	{
		case 0:
			add(s, "NULL::text");
			return;
		case 1:
			add(s, "''");
			return;
		case 2:
			r = repeat("", 'o', 256, "");
			break;
		case 3:
			r = repeat("", 'o', 257, "");
			break;
		case 4:
			r = repeat("", 'o', 253, "\xe2\x82\xac"); /* 256 bytes, multibyte last */
			break;
		case 5:
			r = fz_strdup("o0 ");
			break;
		case 6:
			add(s, "pg_catalog.gen_random_uuid()::text");
			info->owner_unknown = true;
			return;
		default:
			r = fz_strdup("\xc3\xb6wner");
			break;
	}
	add_literal(s, r);
	snprintf(info->owner, sizeof(info->owner), "%s", r);
	free(r);
}

/* An interval for an argument named NAME. */
static void
add_interval(Sql *s, uint64_t *rng, const char *name)
{
	static const char *const hostile[] = {
		"NULL::interval",    "'0'",
		"'-1 second'",       "'1 day -1 hour'",
		"'1 microsecond'",   "'2 days'",
		"'1 mon'",           "'-2147483648 days'",
		"'2147483647 days'", "'infinity'",
		"'-infinity'",       "'1 day -86399.999999 seconds'",
		"'178000000 years'", "'-1 microsecond'",
		"'PT0.0005S'",       "'1 week 1 microsecond'",
	};
	int k = (int) fz_range(rng, 0, 99);

	if (k < 25)
	{
		add(s, hostile[fz_range(rng, 0, sizeof(hostile) / sizeof(hostile[0]) - 1)]);
		if (s->buf[s->used - 1] == '\'')
			add(s, "::interval");
		return;
	}
	if (strcmp(name, "wait") == 0)
	{
		if (k < 70)
			add(s, "'0'::interval");
		else
			addf(s, "'%d ms'::interval", (int) fz_range(rng, 1, 400));
	}
	else if (strcmp(name, "ttl") == 0)
		addf(s, "'%d ms'::interval", (int) fz_range(rng, 20, 2500));
	else
		addf(s, "'%d ms'::interval", (int) fz_range(rng, 0, 5000));
}

/* A fence for the resource at pool index IDX (-1: none known). */
static void
add_fence(Sql *s, uint64_t *rng, int idx)
{
	static const char *const hostile[] = {
		"NULL::bigint", "0", "-1", "9223372036854775807", "(-9223372036854775807 - 1)", "1",
	};
	int64_t f = idx >= 0 ? pool_fence[idx] : 0;
	int k = (int) fz_range(rng, 0, 99);

	if (k < 55 && f > 0)
		addf(s, "%lld::bigint", (long long) f);
	else if (k < 75 && f > 0)
		addf(s, "%lld::bigint", (long long) (f + (fz_chance(rng, 50) ? 1 : -1)));
	else if (k < 85 && f > 0)
		addf(s, "%lld::bigint", (long long) fz_range(rng, 1, f + 2));
	else if (f == 0 && k < 60) /* a task row's fence, or a resource the fuzzer has not seen */
		addf(s, "%d::bigint", (int) fz_range(rng, 1, 10));
	else
		add(s, hostile[fz_range(rng, 0, sizeof(hostile) / sizeof(hostile[0]) - 1)]);
}

static int64_t
max_fence(void)
{
	int64_t m = 0;

	for (int i = 0; i < POOL_SIZE; i++)
		if (pool_fence[i] > m)
			m = pool_fence[i];
	return m;
}

static void
add_int(Sql *s, uint64_t *rng, const char *name, bool big)
{
	static const char *const hostile[] = {
		"NULL", "0", "-1", "1024", "1025", "2147483647", "(-2147483647 - 1)",
	};
	int k = (int) fz_range(rng, 0, 99);

	if (k < 20)
		add(s, hostile[fz_range(rng, 0, sizeof(hostile) / sizeof(hostile[0]) - 1)]);
	else if (strcmp(name, "permits") == 0)
		addf(s, "%d", (int) fz_range(rng, 1, 3));
	else if (strcmp(name, "above") == 0)
		addf(s, "%lld", (long long) (max_fence() + fz_range(rng, 0, 3)));
	else
		addf(s, "%d", (int) fz_range(rng, 1, 20));
	add(s, big ? "::bigint" : "::integer");
}

static void
add_jsonb(Sql *s, uint64_t *rng)
{
	static const char *const values[] = {
		"NULL::jsonb",     "'{}'::jsonb",   "'{\"addr\": \"10.0.0.1\"}'::jsonb", "'\"x\"'::jsonb",
		"'[1, 2]'::jsonb", "'null'::jsonb", "'{\"\\u00e9\": 1}'::jsonb",
	};
	int k = (int) fz_range(rng, 0, 99);

	if (k < 3) /* 100 kB */
		add(s, "pg_catalog.jsonb_build_object('big', pg_catalog.repeat('v', 100000))");
	else
		add(s, values[fz_range(rng, 0, sizeof(values) / sizeof(values[0]) - 1)]);
}

/* A text[] of resources (acquire_all, release_all). */
static void
add_resource_array(Sql *s, uint64_t *rng, FzCallInfo *info)
{
	int k = (int) fz_range(rng, 0, 99);
	int n;
	int idx;

	if (k < 4)
	{
		add(s, k < 2 ? "NULL::text[]" : "'{}'::text[]");
		return;
	}
	if (k < 6)
	{
		add(s, "ARRAY(SELECT 'fz-tmp:' || i FROM pg_catalog.generate_series(1, 1001) AS i)");
		note_resource(info, NULL);
		return;
	}
	n = (int) fz_range(rng, 1, 4);
	add(s, "ARRAY[");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			add(s, ", ");
		if (fz_chance(rng, 4))
			add(s, "NULL");
		else
			add_resource(s, rng, &idx, info);
	}
	add(s, "]::text[]");
}

static const char *const tables_any[] = {
	"fuzz_ws.jobs",   "fuzz_ws.rows",  "fuzz_ws.lb_app",
	"fuzz_ws.lb_col", "fuzz_ws.c_app", "fuzz_ws.nosuch",
};
/* Never handed to the superuser: it may do anything to them. */
static const char *const tables_guarded[] = {"fencelock.lease", "fencelock.resource_grants",
											 "pg_catalog.pg_class"};

static void
add_regclass(Sql *s, uint64_t *rng, FzRole role)
{
	if (role != ROLE_SUPER && fz_chance(rng, 15))
		add_literal(s, tables_guarded[fz_range(rng, 0, 2)]);
	else if (fz_chance(rng, 5))
	{
		add(s, "NULL::regclass");
		return;
	}
	else /* the task table half of the time */
		add_literal(s, tables_any[fz_chance(rng, 50) ? 0 : fz_range(rng, 1, 5)]);
	add(s, "::regclass");
}

static void
add_text(Sql *s, uint64_t *rng, const FzArg *a, const FzCatalog *cat, FzCallInfo *info)
{
	if (strcmp(a->name, "prefix") == 0)
	{
		/* never a prefix of a judged name: 'fz-tmp:' and hostile ones only */
		static const char *const prefixes[] = {"'fz-tmp:'", "'fz-tmp:r'", "'zz'",
											   "''",        "NULL::text", "'\xc3\xa9\xe2\x82\xac'"};
		int k = (int) fz_range(rng, 0, 6);

		if (k == 6)
		{
			char *r = repeat("z", 'z', 1024, "");

			add_literal(s, r);
			free(r);
		}
		else
			add(s, prefixes[k]);
		return;
	}
	if (strcmp(a->name, "owner") == 0 || strcmp(a->name, "worker") == 0)
	{
		add_owner(s, rng, info);
		return;
	}
	if (strcmp(a->name, "lease") == 0)
	{
		int idx;

		add_resource(s, rng, &idx, NULL);
		return;
	}
	{
		static const char *const any[] = {
			"'equal'", "'full'", "'none'", "'bogus'", "''", "NULL::text", "'state'", "'x:y\\z'",
		};
		int k = (int) fz_range(rng, 0, 8);

		if (k == 8)
			add_literal(s, cat->role_name[fz_range(rng, 0, FZ_NROLES - 1)]);
		else
			add(s, any[k]);
	}
}

/* One argument's value. */
static void
add_value(Sql *s, const FzCatalog *cat, const FzArg *a, FzRole role, uint64_t *rng, int *res_idx,
		  FzCallInfo *info)
{
	const char *t = a->type;

	if (fz_chance(rng, 3)) /* NULL for anything */
	{
		if (strncmp(t, "any", 3) == 0)
			add(s, "NULL");
		else
			addf(s, "NULL::%s", t);
		return;
	}
	if (strcmp(t, "text") == 0)
	{
		if (strcmp(a->name, "resource") == 0)
			add_resource(s, rng, res_idx, info);
		else
			add_text(s, rng, a, cat, info);
	}
	else if (strcmp(t, "interval") == 0)
		add_interval(s, rng, a->name);
	else if (strcmp(t, "bigint") == 0)
	{
		if (strcmp(a->name, "fence") == 0)
			add_fence(s, rng, *res_idx);
		else
			add_int(s, rng, a->name, true);
	}
	else if (strcmp(t, "integer") == 0 || strcmp(t, "smallint") == 0)
		add_int(s, rng, a->name, false);
	else if (strcmp(t, "boolean") == 0)
		add(s, fz_chance(rng, 30) ? "true" : "false");
	else if (strcmp(t, "jsonb") == 0)
		add_jsonb(s, rng);
	else if (strcmp(t, "text[]") == 0)
		add_resource_array(s, rng, info);
	else if (strcmp(t, "bigint[]") == 0)
		add(s, fz_chance(rng, 50) ? "ARRAY[1, 2]::bigint[]" : "ARRAY[NULL, -1]::bigint[]");
	else if (strcmp(t, "regclass") == 0)
		add_regclass(s, rng, role);
	else if (strcmp(t, "regrole") == 0)
	{
		int k = (int) fz_range(rng, 0, FZ_NROLES + 1);

		if (k < FZ_NROLES)
			add_literal(s, cat->role_name[k]);
		else
			add(s, k == FZ_NROLES ? "'fz_nobody'" : "'pg_read_all_stats'");
		add(s, "::regrole");
	}
	else if (strcmp(t, "anyelement") == 0)
	{
		static const char *const rows[] = {"NULL::fuzz_ws.jobs", "NULL::fuzz_ws.rows",
										   "NULL::integer", "NULL::fencelock.lease"};

		add(s, rows[fz_range(rng, 0, role == ROLE_SUPER ? 2 : 3)]);
	}
	else if (strcmp(t, "anycompatible") == 0)
		addf(s, "%d", (int) fz_range(rng, -1, 12));
	else if (strcmp(t, "anyarray") == 0 || strcmp(t, "anycompatiblearray") == 0)
		add(s, fz_chance(rng, 80) ? "ARRAY[1, 2, 3]" : "ARRAY[NULL]::integer[]");
	else if (strcmp(t, "name") == 0)
	{
		static const char *const cols[] = {"'state'", "'fence'", "'nosuch'", "'id'", "''"};

		add(s, cols[fz_range(rng, 0, 4)]);
		add(s, "::name");
	}
	else
		addf(s, "NULL::%s", t);
}

/* A call of F as ROLE: SELECT fencelock.f(positional..., name => value...). */
void
fz_build_call(const FzCatalog *cat, const FzFunc *f, FzRole role, uint64_t *rng, char *buf,
			  size_t len, FzCallInfo *info)
{
	Sql s = {buf, len, 0};
	int required = f->nargs - f->ndefaults;
	int positional;
	int res_idx = -1;
	bool first = true;

	buf[0] = '\0';
	memset(info, 0, sizeof(*info));
	if (f->retset)
		addf(&s, "SELECT pg_catalog.count(*) FROM fencelock.%s(", f->name);
	else
		addf(&s, "SELECT fencelock.%s(", f->name);
	if (f->variadic)
	{
		/* key(VARIADIC parts): zero to four parts, hostile ones among them */
		static const char *const parts[] = {"'fz-app'", "'r0'",       "''",       "':'",
											"'\\'",     "NULL::text", "'fz-tmp'", "'\xc3\xa9'"};
		int n = (int) fz_range(rng, 0, 4);

		for (int i = 0; i < n; i++)
			addf(&s, "%s%s", i ? ", " : "", parts[fz_range(rng, 0, 7)]);
		add(&s, ")");
		return;
	}
	positional = (int) fz_range(rng, required, f->nargs);
	if (required > 0 && fz_chance(rng, 2))
		positional = required - 1; /* one missing: no such function */
	for (int i = 0; i < positional; i++)
	{
		if (!first)
			add(&s, ", ");
		first = false;
		add_value(&s, cat, &f->args[i], role, rng, &res_idx, info);
	}
	/* some of the remaining defaults by name, skipping others */
	for (int i = positional; i < f->nargs; i++)
	{
		if (f->args[i].name[0] == '\0' || i < required || !fz_chance(rng, 40))
			continue;
		if (!first)
			add(&s, ", ");
		first = false;
		addf(&s, "%s => ", f->args[i].name);
		add_value(&s, cat, &f->args[i], role, rng, &res_idx, info);
	}
	add(&s, ")");
}

/*
 * A write to a fenced table of fuzz_ws.  JUDGED_NAME: the lease a lease-bound write is checked
 * against ("" for a table the invariants do not judge).
 */
void
fz_build_write(const FzCatalog *cat, FzRole role, uint64_t *rng, char *buf, size_t len,
			   char *judged_name, size_t judged_len)
{
	Sql s = {buf, len, 0};
	int t = (int) fz_range(rng, 0, NBOUND + 1);
	int idx = -1;

	(void) cat;
	(void) role;
	buf[0] = '\0';
	judged_name[0] = '\0';
	if (t == NBOUND) /* the per-row fenced table */
	{
		add(&s, "UPDATE fuzz_ws.rows SET last_fence = ");
		add_fence(&s, rng, (int) fz_range(rng, 0, POOL_SIZE - 1));
		addf(&s, " WHERE id = %d", (int) fz_range(rng, 1, 5));
		return;
	}
	if (t == NBOUND + 1) /* work for the task functions */
	{
		addf(&s,
			 "INSERT INTO fuzz_ws.jobs (id, payload) VALUES (%d, '{}') ON CONFLICT (id) DO UPDATE "
			 "SET state = 'ready', fence = fuzz_ws.jobs.fence + 1",
			 (int) fz_range(rng, 1, 12));
		return;
	}
	if (bound[t].lease == NULL)
	{
		add(&s, "INSERT INTO fuzz_ws.lb_col (res, last_fence) VALUES (");
		/* a pool name, so the name is known: judged by it */
		idx = (int) fz_range(rng, 0, POOL_SIZE - 1);
		add_literal(&s, pool[idx]);
		add(&s, ", ");
		add_fence(&s, rng, idx);
		add(&s, ")");
		snprintf(judged_name, judged_len, "%s", pool[idx]);
		return;
	}
	for (int i = 0; i < POOL_SIZE; i++)
		if (strcmp(pool[i], bound[t].lease) == 0)
			idx = i;
	snprintf(judged_name, judged_len, "%s", bound[t].lease);
	switch (fz_range(rng, 0, 2))
	{
		case 0:
			addf(&s, "INSERT INTO fuzz_ws.%s (last_fence, v) VALUES (", bound[t].table);
			add_fence(&s, rng, idx);
			add(&s, ", 'w')");
			break;
		case 1:
			addf(&s, "UPDATE fuzz_ws.%s SET last_fence = ", bound[t].table);
			add_fence(&s, rng, idx);
			addf(&s, ", v = v || '+' WHERE id = (SELECT pg_catalog.min(id) FROM fuzz_ws.%s)",
				 bound[t].table);
			break;
		default:
			addf(&s,
				 "DELETE FROM fuzz_ws.%s WHERE id = (SELECT pg_catalog.min(id) FROM fuzz_ws.%s)",
				 bound[t].table, bound[t].table);
			break;
	}
}
