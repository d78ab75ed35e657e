/*
 * claim/sql.c — a task table's statements, built once per table and backend from its columns
 * (claim/cache.c keeps them): claim's, claim_dead's, the helpers', purge_tasks' and complete_all's.
 *
 * Every identifier is quoted and schema-qualified (the key's equality operator too), every value
 * a parameter, every operator OPERATOR(pg_catalog....): the statements run as the caller, whose
 * search_path must not change what they do.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "catalog/pg_operator.h"
#include "claim/claim.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/*
 * The largest fence claim issues.  The one value above it is kept for the bump that makes a row
 * dead (fail, a lapsed last attempt, a row claim cannot raise), so that bump never overflows.
 */
#define TASK_MAX_CLAIM_FENCE (PG_INT64_MAX - 1)

/* The claim order over alias a: priority (lowest first), then run_after, then the primary key. */
static void
append_order(StringInfo buf, const SqlParts *p, const char *a)
{
	const char *sep = "";

	appendStringInfoString(buf, " ORDER BY ");
	if (p->col[COL_PRIORITY])
	{
		appendStringInfo(buf, "%s.%s", a, p->col[COL_PRIORITY]);
		sep = ", ";
	}
	if (p->col[COL_RUN_AFTER])
	{
		appendStringInfo(buf, "%s%s.%s", sep, a, p->col[COL_RUN_AFTER]);
		sep = ", ";
	}
	for (int i = 0; i < p->npk; i++)
	{
		appendStringInfo(buf, "%s%s.%s", sep, a, p->pk[i]);
		sep = ", ";
	}
}

/* The rows claim may take ($1 now), over alias a: ready (and due), or running with a lapsed lease.
 */
static void
append_claimable(StringInfo buf, const SqlParts *p, const char *a)
{
	appendStringInfo(buf, "((%s.%s OPERATOR(pg_catalog.=) 'ready'", a, p->col[COL_STATE]);
	if (p->col[COL_RUN_AFTER])
		appendStringInfo(buf, " AND (%s.%s IS NULL OR %s.%s OPERATOR(pg_catalog.<=) $1)", a,
						 p->col[COL_RUN_AFTER], a, p->col[COL_RUN_AFTER]);
	appendStringInfo(buf,
					 ") OR (%s.%s OPERATOR(pg_catalog.=) 'running' AND (%s.%s IS NULL OR %s.%s "
					 "OPERATOR(pg_catalog.<=) $1)))",
					 a, p->col[COL_STATE], a, p->col[COL_LEASE_UNTIL], a, p->col[COL_LEASE_UNTIL]);
}

/* Whether the row used up its attempts (never null); false without a max_attempts column. */
static void
append_attempts_used(StringInfo buf, const SqlParts *p, const char *a)
{
	if (p->col[COL_MAX_ATTEMPTS] == NULL)
		appendStringInfoString(buf, "false");
	else
		appendStringInfo(buf, "COALESCE(COALESCE(%s.%s, 0) OPERATOR(pg_catalog.>=) %s.%s, false)",
						 a, p->col[COL_ATTEMPT], a, p->col[COL_MAX_ATTEMPTS]);
}

/*
 * Whether claim cannot take the row without an overflow (never null): its fence is at the largest
 * fence claim issues, or its attempt at its type's maximum.
 */
static void
append_exhausted(StringInfo buf, const SqlParts *p, const char *a)
{
	appendStringInfo(buf,
					 "COALESCE(%s.%s OPERATOR(pg_catalog.>=) " INT64_FORMAT
					 "::pg_catalog.int8, false) OR COALESCE(%s.%s OPERATOR(pg_catalog.>=) %s, "
					 "false)",
					 a, p->col[COL_FENCE], (int64) TASK_MAX_CLAIM_FENCE, a, p->col[COL_ATTEMPT],
					 p->attempt_max);
}

/*
 * The fence of a row that becomes dead, from its fence f: above f, so its last worker's writes
 * are refused, yet never past the type's maximum (a row already there keeps it).
 */
static const char *
dead_fence(const char *f)
{
	return psprintf("LEAST(%s, " INT64_FORMAT "::pg_catalog.int8) OPERATOR(pg_catalog.+) 1", f,
					(int64) TASK_MAX_CLAIM_FENCE);
}

/*
 * The start of "WHERE ..." for rows picked by a subquery over alias c: the rows whose key is among
 * the subquery's, which selects the keys and then, after this, names the table and its condition
 * (append_keys_end closes it).  A single-column key is collected into an array that an InitPlan
 * builds once, so the outer statement finds the rows by "key = ANY (...)" on the primary key: a
 * generic plan that is right for every limit.  A composite key uses IN (the statement is then
 * planned on every call).
 */
static void
append_keys_begin(StringInfo buf, const SqlParts *p)
{
	if (p->npk == 1)
		appendStringInfo(buf, "t.%s %s ANY (ARRAY(SELECT c.%s", p->pk[0], p->pkeq[0], p->pk[0]);
	else
	{
		appendStringInfoString(buf, "(");
		for (int i = 0; i < p->npk; i++)
			appendStringInfo(buf, "%st.%s", i > 0 ? ", " : "", p->pk[i]);
		appendStringInfoString(buf, ") IN (SELECT ");
		for (int i = 0; i < p->npk; i++)
			appendStringInfo(buf, "%sc.%s", i > 0 ? ", " : "", p->pk[i]);
	}
	appendStringInfo(buf, " FROM %s AS c WHERE ", p->table);
}

/* The end of append_keys_begin's subquery: up to limit rows, locked, skipping locked ones. */
static void
append_keys_end(StringInfo buf, const SqlParts *p, const char *limit)
{
	appendStringInfo(buf, " LIMIT %s FOR UPDATE OF c SKIP LOCKED)%s", limit,
					 p->npk == 1 ? ")" : "");
}

/*
 * The rows claim takes, for "WHERE ...": the keys of up to $5 claimable rows in claim order (and,
 * with bad, only those that claim cannot take: claim_dead's), locked, skipping rows that other
 * workers hold.
 */
static void
append_claim_keys(StringInfo buf, const SqlParts *p, bool bad)
{
	append_keys_begin(buf, p);
	append_claimable(buf, p, "c");
	if (bad)
	{
		appendStringInfoString(buf, " AND (");
		append_exhausted(buf, p, "c");
		appendStringInfoString(buf, " OR ");
		append_attempts_used(buf, p, "c");
		appendStringInfoString(buf, ")");
	}
	append_order(buf, p, "c");
	append_keys_end(buf, p, "$5");
}

/*
 * claim: lock up to $5 claimable rows in claim order, and give each that claim can take the
 * caller's lease ($2 worker, $3 deadline), the next attempt and a fence above every fence it had
 * before ($4 timeline base).  A row that used up its attempts, or that claim cannot raise without
 * an overflow (exhausted), stays locked and unchanged: claim_dead makes it dead.  Returns the
 * relation each claimed row is in (the table or a partition), then its columns, in no particular
 * order (claim_sort puts them into claim order).
 */
static char *
build_claim(const SqlParts *p)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf,
					 "UPDATE %s AS t SET %s = 'running', %s = $2, %s = $3, "
					 "%s = COALESCE(t.%s, 0) OPERATOR(pg_catalog.+) 1, "
					 "%s = GREATEST(t.%s, $4) OPERATOR(pg_catalog.+) 1 WHERE ",
					 p->table, p->col[COL_STATE], p->col[COL_LEASE_OWNER], p->col[COL_LEASE_UNTIL],
					 p->col[COL_ATTEMPT], p->col[COL_ATTEMPT], p->col[COL_FENCE],
					 p->col[COL_FENCE]);
	append_claim_keys(&buf, p, false);
	appendStringInfoString(&buf, " AND NOT (");
	append_exhausted(&buf, p, "t");
	appendStringInfoString(&buf, " OR ");
	append_attempts_used(&buf, p, "t");
	appendStringInfoString(&buf, ") RETURNING t.tableoid, t.*");
	return buf.data;
}

/*
 * After a claim that returned fewer rows than asked: make dead up to $5 claimable rows that claim
 * cannot take (those the claim locked and left, first), their fence raised all the same where the
 * type allows, their lease ended.  Returns the relation each is in, its columns, and whether it
 * was exhausted (its fence now at the type's maximum, or its attempt at its type's).
 */
static char *
build_claim_dead(const SqlParts *p)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s AS t SET %s = 'dead', %s = NULL, %s = %s", p->table,
					 p->col[COL_STATE], p->col[COL_LEASE_UNTIL], p->col[COL_FENCE],
					 dead_fence(psprintf("GREATEST(t.%s, $4)", p->col[COL_FENCE])));
	if (p->col[COL_FINISHED_AT])
		appendStringInfo(&buf, ", %s = pg_catalog.statement_timestamp()", p->col[COL_FINISHED_AT]);
	if (p->col[COL_LAST_ERROR])
	{
		appendStringInfo(&buf, ", %s = CASE WHEN ", p->col[COL_LAST_ERROR]);
		append_exhausted(&buf, p, "t");
		appendStringInfo(&buf, " THEN 'fence or attempt at its maximum' ELSE t.%s END",
						 p->col[COL_LAST_ERROR]);
	}
	appendStringInfoString(&buf, " WHERE ");
	append_claim_keys(&buf, p, true);
	appendStringInfoString(&buf, " AND (");
	append_exhausted(&buf, p, "t");
	appendStringInfoString(&buf, " OR ");
	append_attempts_used(&buf, p, "t");
	appendStringInfo(
		&buf,
		") RETURNING t.tableoid, t.*, COALESCE(t.%s OPERATOR(pg_catalog.=) " INT64_FORMAT
		"::pg_catalog.int8, false) OR COALESCE(t.%s OPERATOR(pg_catalog.>=) %s, false)",
		p->col[COL_FENCE], PG_INT64_MAX, p->col[COL_ATTEMPT], p->attempt_max);
	return buf.data;
}

/*
 * heartbeat, complete and fail: the row with key $1 if it is running under exactly the fence $2.
 * Each returns the relation the row is in; fail also the new state.
 */
static char *
build_row_update(const SqlParts *p, TaskStmt stmt)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s AS t SET ", p->table);
	switch (stmt)
	{
		case STMT_HEARTBEAT:
			appendStringInfo(&buf, "%s = $3, %s = $2", p->col[COL_LEASE_UNTIL], p->col[COL_FENCE]);
			break;
		case STMT_COMPLETE:
			appendStringInfo(&buf, "%s = 'done', %s = NULL, %s = $2", p->col[COL_STATE],
							 p->col[COL_LEASE_UNTIL], p->col[COL_FENCE]);
			if (p->col[COL_FINISHED_AT])
				appendStringInfo(&buf, ", %s = pg_catalog.statement_timestamp()",
								 p->col[COL_FINISHED_AT]);
			break;
		default:
			/*
			 * A row that goes dead gets a fence above its last worker's, so nothing that worker
			 * still sends (complete, a late result) is accepted.
			 */
			appendStringInfo(&buf, "%s = CASE WHEN ", p->col[COL_STATE]);
			append_attempts_used(&buf, p, "t");
			appendStringInfo(&buf, " THEN 'dead' ELSE 'ready' END, %s = CASE WHEN ",
							 p->col[COL_FENCE]);
			append_attempts_used(&buf, p, "t");
			appendStringInfo(&buf, " THEN %s ELSE $2 END, %s = NULL", dead_fence("$2"),
							 p->col[COL_LEASE_UNTIL]);
			/*
			 * run_after: the explicit backoff ($3), else the table's policy ($5 now, NULL without
			 * one): min($7, $6 * 2^(attempt - 1)) seconds, of which the share $8 is random.
			 * (OPERATOR(...) binds all alike, left to right: every operation has its parentheses.)
			 */
			if (p->col[COL_RUN_AFTER])
				appendStringInfo(&buf,
								 ", %s = COALESCE($3, $5 OPERATOR(pg_catalog.+) "
								 "pg_catalog.make_interval(secs => LEAST($7, $6 "
								 "OPERATOR(pg_catalog.*) pg_catalog.power(2::pg_catalog.float8, "
								 "LEAST(GREATEST(COALESCE(t.%s, 1), 1) OPERATOR(pg_catalog.-) 1, "
								 "60)::pg_catalog.float8)) OPERATOR(pg_catalog.*) "
								 "((1 OPERATOR(pg_catalog.-) $8) OPERATOR(pg_catalog.+) ($8 "
								 "OPERATOR(pg_catalog.*) pg_catalog.random()))), t.%s)",
								 p->col[COL_RUN_AFTER], p->col[COL_ATTEMPT], p->col[COL_RUN_AFTER]);
			if (p->col[COL_LAST_ERROR])
				appendStringInfo(&buf, ", %s = $4", p->col[COL_LAST_ERROR]);
			if (p->col[COL_FINISHED_AT])
			{
				appendStringInfo(&buf, ", %s = CASE WHEN ", p->col[COL_FINISHED_AT]);
				append_attempts_used(&buf, p, "t");
				appendStringInfoString(&buf, " THEN pg_catalog.statement_timestamp() END");
			}
			break;
	}
	appendStringInfo(&buf,
					 " WHERE t.%s %s $1 AND t.%s OPERATOR(pg_catalog.=) $2 AND t.%s "
					 "OPERATOR(pg_catalog.=) 'running' RETURNING t.tableoid",
					 p->pk[0], p->pkeq[0], p->col[COL_FENCE], p->col[COL_STATE]);
	if (stmt == STMT_FAIL)
		appendStringInfo(&buf, ", t.%s", p->col[COL_STATE]);
	return buf.data;
}

/* Whether the row (alias a) is done, or dead with $3, and finished before $1. */
static void
append_finished(StringInfo buf, const SqlParts *p, const char *a)
{
	appendStringInfo(buf,
					 "(%s.%s OPERATOR(pg_catalog.=) 'done' OR ($3 AND %s.%s "
					 "OPERATOR(pg_catalog.=) 'dead')) AND %s.%s OPERATOR(pg_catalog.<) $1",
					 a, p->col[COL_STATE], a, p->col[COL_STATE], a, p->col[COL_FINISHED_AT]);
}

/*
 * purge_tasks: delete up to $2 rows that are done (and, with $3, dead) and finished before $1,
 * skipping rows locked by anyone else.  Returns the relation each deleted row was in.
 */
static char *
build_purge(const SqlParts *p)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "DELETE FROM %s AS t WHERE ", p->table);
	append_keys_begin(&buf, p);
	append_finished(&buf, p, "c");
	append_keys_end(&buf, p, "$2");
	appendStringInfoString(&buf, " AND ");
	append_finished(&buf, p, "t");
	appendStringInfoString(&buf, " RETURNING t.tableoid");
	return buf.data;
}

/*
 * complete_all: complete every row whose key is in $1 that is running under exactly the fence at
 * the same place in $2 (arrays of the key's type and of bigint); returns each row's relation.
 */
static char *
build_complete_all(const SqlParts *p)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s AS t SET %s = 'done', %s = NULL, %s = u.f", p->table,
					 p->col[COL_STATE], p->col[COL_LEASE_UNTIL], p->col[COL_FENCE]);
	if (p->col[COL_FINISHED_AT])
		appendStringInfo(&buf, ", %s = pg_catalog.statement_timestamp()", p->col[COL_FINISHED_AT]);
	appendStringInfo(&buf,
					 " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(k, f) "
					 "WHERE t.%s %s u.k AND t.%s OPERATOR(pg_catalog.=) u.f AND t.%s "
					 "OPERATOR(pg_catalog.=) 'running' RETURNING t.tableoid",
					 p->pk[0], p->pkeq[0], p->col[COL_FENCE], p->col[COL_STATE]);
	return buf.data;
}

/* The rows of $1 after complete_all: relation, the key's place in $1, fence and state. */
static char *
build_read_all(const SqlParts *p)
{
	return psprintf("SELECT t.tableoid, u.n, t.%s, t.%s FROM ROWS FROM (pg_catalog.unnest($1)) "
					"WITH ORDINALITY AS u(k, n), %s AS t WHERE t.%s %s u.k",
					p->col[COL_FENCE], p->col[COL_STATE], p->table, p->pk[0], p->pkeq[0]);
}

/* The row with key $1, when a helper's UPDATE matched nothing: its relation, fence and state. */
static char *
build_read(const SqlParts *p)
{
	return psprintf("SELECT t.tableoid, t.%s, t.%s FROM %s AS t WHERE t.%s %s $1",
					p->col[COL_FENCE], p->col[COL_STATE], p->table, p->pk[0], p->pkeq[0]);
}

/* OPERATOR(schema.name) for the equality of a key column's btree opfamily. */
const char *
fl_task_key_equality(Oid opfamily, Oid opcintype)
{
	Oid opno = get_opfamily_member(opfamily, opcintype, opcintype, BTEqualStrategyNumber);
	HeapTuple tuple;
	Form_pg_operator op;
	char *result;

	if (!OidIsValid(opno))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("the key's btree operator family has no equality operator for type %s",
						format_type_be(opcintype)),
				 errhint("Give the key column an operator class with an equality operator.")));
	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tuple);
	result = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)),
					  NameStr(op->oprname));
	ReleaseSysCache(tuple);
	return result;
}

/*
 * Every statement the table can have: claim's two always, the helpers' with a single-column key,
 * purge_tasks' with a finished_at column (the others stay NULL).
 */
void
fl_task_build_sql(const SqlParts *p, char *sql[NUM_TASK_STMTS])
{
	sql[STMT_CLAIM] = build_claim(p);
	sql[STMT_CLAIM_DEAD] = build_claim_dead(p);
	if (p->npk == 1)
	{
		for (int s = STMT_HEARTBEAT; s <= STMT_FAIL; s++)
			sql[s] = build_row_update(p, s);
		sql[STMT_READ] = build_read(p);
		sql[STMT_COMPLETE_ALL] = build_complete_all(p);
		sql[STMT_READ_ALL] = build_read_all(p);
	}
	if (p->col[COL_FINISHED_AT])
		sql[STMT_PURGE] = build_purge(p);
}
