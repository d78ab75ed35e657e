/*
 * claim/cache.c — the per-backend cache of task tables (claim/claim.h lists the files): each
 * table's mapping, key and statements, built once from the catalog and fencelock.task_tables, and
 * the statements' plans, prepared on first use and kept.
 *
 * Entries are keyed by the table's OID and thrown away on a relcache invalidation of the table, of
 * one of its partitions or of fencelock.task_tables (ALTER TABLE, DROP TRIGGER, enable_tasks
 * again, ALTER EXTENSION ... UPDATE), and on any change of a schema or an operator.  A plan still
 * executing (a nested call) is not freed under it: it is retired, and freed when the last
 * execution of the table's statements ends.  The statements run as the caller; each result's
 * relation and row type are checked before anything of it is used.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "base/asowner.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "claim/claim.h"
#include "compat.h"
#include "miscadmin.h"
#include "wait/taskqueue.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

/*
 * Entries live as long as the backend: a dropped table's entry (and its kept plans) stays, marked
 * invalid, since an invalidation callback may run while a plan executes and must not free it.
 */
static HTAB *task_tables = NULL;

/*
 * With debug_discard_caches, every chance to process invalidations throws every cache entry away
 * (a callback for all relations, or all of a syscache), although nothing changed: a build that
 * took that as a reason to start over would never end.  As PostgreSQL's relcache does for its
 * own builds in progress, such a discard does not restart one; the entry is thrown away at the
 * next discard after it was built.  Invalidations of one relation or one catalog row still do.
 */
static bool
discarding(const TaskTable *tt)
{
	return tt->building && debug_discard_caches > 0;
}

static void
task_relcache_cb(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	TaskTable *tt;

	hash_seq_init(&status, task_tables);
	while ((tt = hash_seq_search(&status)) != NULL)
	{
		if (relid == InvalidOid && discarding(tt))
			continue;
		if (relid == InvalidOid || tt->relid == relid || relid == fl_task_tables_oid())
			tt->valid = false;
		for (int i = 0; tt->valid && i < tt->nparts; i++)
			if (tt->parts[i] == relid)
				tt->valid = false;
	}
}

/*
 * A schema or an operator changed: the statements name the table by its schema's name and key
 * operators by theirs, and PostgreSQL's plan cache analyses kept statements again by those names,
 * which may now lead to other objects (a schema renamed and another created under its name).
 * Such changes are rare: build every table's statements again from the catalog.
 */
static void
task_syscache_cb(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS status;
	TaskTable *tt;

	hash_seq_init(&status, task_tables);
	while ((tt = hash_seq_search(&status)) != NULL)
		if (hashvalue != 0 || !discarding(tt))
			tt->valid = false;
}

/* Free what was dropped while executions were in progress, once none is. */
static void
task_table_free_retired(TaskTable *tt)
{
	ListCell *lc;

	if (tt->busy > 0)
		return;
	foreach (lc, tt->retired_plans)
		SPI_freeplan((SPIPlanPtr) lfirst(lc));
	foreach (lc, tt->retired_cxts)
		MemoryContextDelete((MemoryContext) lfirst(lc));
	list_free(tt->retired_plans);
	list_free(tt->retired_cxts);
	tt->retired_plans = NIL;
	tt->retired_cxts = NIL;
}

/*
 * Forget what was built for a table.  Plans still executing (a nested call) are kept on the
 * retired lists and freed when the last execution ends.
 */
static void
task_table_reset(TaskTable *tt)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	for (int i = 0; i < NUM_TASK_STMTS; i++)
	{
		if (tt->plan[i] != NULL)
			tt->retired_plans = lappend(tt->retired_plans, tt->plan[i]);
		tt->plan[i] = NULL;
		tt->sql[i] = NULL;
	}
	if (tt->cxt != NULL)
		tt->retired_cxts = lappend(tt->retired_cxts, tt->cxt);
	MemoryContextSwitchTo(old);
	tt->cxt = NULL;
	tt->parts = NULL;
	tt->nparts = 0;
	task_table_free_retired(tt);
}

/* The type's largest value, as a literal, for an integer type. */
static const char *
int_type_max(Oid typid)
{
	switch (getBaseType(typid))
	{
		case INT2OID:
			return "32767";
		case INT4OID:
			return "2147483647";
		default:
			return psprintf(INT64_FORMAT, PG_INT64_MAX);
	}
}

/* A column's position among the table's live (not dropped) columns, from 1. */
static int
live_position(Relation rel, AttrNumber attnum)
{
	TupleDesc desc = RelationGetDescr(rel);
	int pos = 0;

	for (int i = 0; i < attnum; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			pos++;
	return pos;
}

/*
 * Claim order as sort keys over claim's result (each column's type's default ordering and its
 * collation, as ORDER BY uses them): priority, run_after, then the primary key.
 */
static void
task_table_sort_keys(TaskTable *tt, Relation rel, const SqlParts *p)
{
	TupleDesc desc = RelationGetDescr(rel);
	int pos[INDEX_MAX_KEYS + 2];
	int n = 0;

	if (p->col[COL_PRIORITY])
		pos[n++] = p->pos[COL_PRIORITY];
	if (p->col[COL_RUN_AFTER])
		pos[n++] = p->pos[COL_RUN_AFTER];
	for (int i = 0; i < p->npk; i++)
		pos[n++] = p->pkpos[i];
	tt->nsort = n;
	for (int i = 0; i < n; i++)
	{
		Form_pg_attribute att = NULL;
		TypeCacheEntry *tce;

		/* pos counts live columns: find the attribute. */
		for (int a = 0, live = 0; a < desc->natts; a++)
			if (!TupleDescAttr(desc, a)->attisdropped && ++live == pos[i])
			{
				att = TupleDescAttr(desc, a);
				break;
			}
		Assert(att != NULL);
		tce = lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR);
		if (!OidIsValid(tce->lt_opr))
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
							errmsg("could not identify an ordering operator for type %s",
								   format_type_be(att->atttypid))));
		tt->sortpos[i] = CLAIM_LEAD_COLS + pos[i];
		tt->sortop[i] = tce->lt_opr;
		tt->sortcoll[i] = att->attcollation;
	}
}

/* Resolve the table: its mapping, the fence trigger, the key, and the statements' text. */
static void
task_table_build(TaskTable *tt)
{
	Relation rel;
	TaskMap map;
	const char *names[NUM_TASK_COLS];
	SqlParts p;
	Relation idx;
	List *parts;
	ListCell *lc;
	MemoryContext old;

	rel = table_open(tt->relid, AccessShareLock);
	if (!fl_task_read_map(tt->relid, &map, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not enabled for claiming", RelationGetRelationName(rel)),
				 errhint("Run SELECT fencelock.enable_tasks('%s') as the table's owner.",
						 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													RelationGetRelationName(rel)))));

	/* The table may have changed since enable_tasks: check it again. */
	for (int i = 0; i < NUM_TASK_COLS; i++)
		names[i] = NameStr(map.cols[i])[0] != '\0' ? pstrdup(NameStr(map.cols[i])) : NULL;
	{
		TaskMap read = map;

		fl_task_check_columns(rel, names, false, &map);
		map.backoff_base_s = read.backoff_base_s;
		map.backoff_max_s = read.backoff_max_s;
		map.backoff_jitter = read.backoff_jitter;
	}
	tt->map = map;
	parts = fl_task_require_fence_triggers(rel, NameStr(map.cols[COL_FENCE]), AccessShareLock);
	tt->has_wake = fl_task_has_wake_trigger(rel);

	tt->cxt =
		AllocSetContextCreate(CacheMemoryContext, "fencelock task table", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(tt->cxt);

	/* A partitioned table: its partitions, at every level (a result row may come from any). */
	if (parts != NIL)
	{
		tt->parts = palloc(list_length(parts) * sizeof(Oid));
		foreach (lc, parts)
			if (lfirst_oid(lc) != tt->relid)
				tt->parts[tt->nparts++] = lfirst_oid(lc);
	}

	memset(&p, 0, sizeof(p));
	p.table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										 RelationGetRelationName(rel));
	for (int i = 0; i < NUM_TASK_COLS; i++)
	{
		Form_pg_attribute att;

		tt->has[i] = NameStr(map.cols[i])[0] != '\0';
		if (!tt->has[i])
			continue;
		p.col[i] = quote_identifier(pstrdup(NameStr(map.cols[i])));
		att = fl_task_find_column(rel, NameStr(map.cols[i]));
		p.pos[i] = live_position(rel, att->attnum);
		if (i == COL_ATTEMPT)
			p.attempt_max = int_type_max(att->atttypid);
		if (i == COL_FENCE)
			tt->fence_type = att->atttypid;
		if (i == COL_STATE)
			tt->state_type = att->atttypid;
	}

	idx = index_open(FL_PRIMARY_KEY_INDEX(rel), AccessShareLock);
	p.npk = idx->rd_index->indnkeyatts;
	for (int i = 0; i < p.npk; i++)
	{
		AttrNumber attnum = idx->rd_index->indkey.values[i];
		char *name = get_attname(tt->relid, attnum, false);

		p.pk[i] = quote_identifier(name);
		p.pkeq[i] = fl_task_key_equality(idx->rd_opfamily[i], idx->rd_opcintype[i]);
		p.pkpos[i] = live_position(rel, attnum);
		if (i == 0)
		{
			tt->pkname = name;
			tt->pktype = get_atttype(tt->relid, attnum);
		}
	}
	index_close(idx, AccessShareLock);
	tt->npk = p.npk;
	memcpy(tt->pkpos, p.pkpos, sizeof(p.pkpos));
	tt->pos_fence = p.pos[COL_FENCE];
	tt->pos_attempt = p.pos[COL_ATTEMPT];
	tt->relname = pstrdup(RelationGetRelationName(rel));

	task_table_sort_keys(tt, rel, &p);
	fl_task_build_sql(&p, tt->sql);

	MemoryContextSwitchTo(old);
	table_close(rel, NoLock);
}

TaskTable *
fl_task_table(Oid relid)
{
	TaskTable *tt;
	bool found;

	/*
	 * Before any lock: a role that may not update the table must not queue behind its writers.
	 * Checked at every call, not once when the entry is built: the entry serves every role of the
	 * session (SET ROLE, SECURITY DEFINER), and a membership revoked invalidates no relcache
	 * entry (issue 35, checks remembered without their role).
	 */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_UPDATE, ACLMASK_ANY) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
	if (task_tables == NULL)
	{
		HASHCTL ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(TaskTable);
		ctl.hcxt = TopMemoryContext;
		task_tables =
			hash_create("fencelock task tables", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(task_relcache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, task_syscache_cb, (Datum) 0);
		CacheRegisterSyscacheCallback(OPEROID, task_syscache_cb, (Datum) 0);
	}
	tt = hash_search(task_tables, &relid, HASH_ENTER, &found);
	if (!found)
	{
		memset(tt, 0, sizeof(*tt));
		tt->relid = relid;
	}
	/* What a nested call retired, or an error left behind. */
	task_table_free_retired(tt);
	/* Building may take locks and so process invalidations: repeat until it stays valid. */
	while (!tt->valid)
	{
		task_table_reset(tt);
		tt->valid = true;
		tt->building = true;
		PG_TRY();
		{
			task_table_build(tt);
		}
		PG_CATCH();
		{
			tt->building = false;
			tt->valid = false;
			task_table_reset(tt);
			PG_RE_THROW();
		}
		PG_END_TRY();
		tt->building = false;
	}
	/* A child may be added at any time, without invalidating the table (relhassubclass set). */
	fl_task_refuse_inheritance_children(relid);
	return tt;
}

/*
 * How claim's statements are planned.  With a single-column key their generic plan is right for
 * every max_rows (an InitPlan on the claim index, then the rows by key): planned once.  With a
 * composite key the best plan depends on max_rows, so the call's values are planned every time.
 * The one-row statements use the key.
 */
static int
claim_plan_options(TaskTable *tt, TaskStmt stmt)
{
	if (stmt != STMT_CLAIM && stmt != STMT_CLAIM_DEAD)
		return 0;
	return tt->npk == 1 ? CURSOR_OPT_GENERIC_PLAN : CURSOR_OPT_CUSTOM_PLAN;
}

/* The statement's plan, prepared on first use. */
static SPIPlanPtr
task_plan(TaskTable *tt, TaskStmt stmt, int nargs, const Oid *argtypes)
{
	if (tt->plan[stmt] == NULL)
		tt->plan[stmt] =
			fl_keep_plan(tt->sql[stmt], nargs, (Oid *) argtypes, claim_plan_options(tt, stmt));
	return tt->plan[stmt];
}

/* Run a table's statement as the caller; the caller is connected to SPI. */
uint64
fl_task_run(TaskTable *tt, TaskStmt stmt, int nargs, const Oid *argtypes, Datum *values,
			const char *nulls)
{
	SPIPlanPtr plan = task_plan(tt, stmt, nargs, argtypes);
	const char *sql = tt->sql[stmt]; /* kept (retired) until busy is 0 again, like the plan */
	Oid own;
	int rc;

	tt->busy++;
	/* The wake trigger ignores our statements (fail announces its rows itself). */
	own = fl_task_wait_set_own(tt->relid);
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, values, nulls, false, 0);
	}
	PG_FINALLY();
	{
		tt->busy--;
		(void) fl_task_wait_set_own(own);
	}
	PG_END_TRY();
	(void) fl_spi_result(sql, rc);
	task_table_free_retired(tt);
	return SPI_processed;
}

/*
 * Whether a result row's relation is the task table or one of its partitions.  The statements
 * name the table by its schema-qualified name, which the plan cache may resolve again to another
 * table should names change under a running statement: nothing of such a row may be used.
 */
void
fl_task_check_result_relation(TaskTable *tt, Oid tableoid)
{
	if (tableoid == tt->relid)
		return;
	for (int i = 0; i < tt->nparts; i++)
		if (tt->parts[i] == tableoid)
			return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("statement for table \"%s\" ran on another table", tt->relname),
			 errdetail("Its name led to another table: the table or its schema was renamed."),
			 errhint("Retry the call.")));
}

/* Whether a result column is of the type expected (and so safe to copy), else an error. */
void
fl_task_check_result_column(TaskTable *tt, TupleDesc desc, int col, Oid typid, int32 typmod)
{
	if (col <= desc->natts)
	{
		Form_pg_attribute att = TupleDescAttr(desc, col - 1);

		if (att->atttypid == typid && (typmod < 0 || att->atttypmod == typmod))
			return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("statement for table \"%s\" returned a row of another type", tt->relname),
			 errdetail("Its name led to another table: the table or its schema was renamed."),
			 errhint("Retry the call.")));
}

/* The relation (first column) of every row the last statement returned: the table's own. */
void
fl_task_check_result_relations(TaskTable *tt)
{
	TupleDesc rdesc = SPI_tuptable->tupdesc;

	fl_task_check_result_column(tt, rdesc, 1, OIDOID, -1);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool isnull;

		fl_task_check_result_relation(
			tt, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[r], rdesc, 1, &isnull)));
	}
}
