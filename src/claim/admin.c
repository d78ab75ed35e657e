/*
 * claim/admin.c — a task table's owner's calls (claim/claim.h lists the files):
 *
 *   SELECT fencelock.enable_tasks('jobs');
 *   SELECT fencelock.purge_tasks('jobs', older_than => '7 days');
 *
 * enable_tasks checks a table against the column convention (claim/table.c), records which columns
 * play which part in fencelock.task_tables, and installs the fence trigger, the wake triggers and
 * a partial index over the rows that can still be claimed.  purge_tasks deletes finished rows in
 * batches.  Both run their statements as the caller.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "base/args.h"
#include "base/asowner.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "claim/claim.h"
#include "commands/defrem.h"
#include "compat.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_enable_tasks);
PG_FUNCTION_INFO_V1(fencelock_purge_tasks);

/* purge_tasks: $1 the cutoff, $2 the batch size, $3 whether dead rows go too */
static const Oid purge_argtypes[] = {TIMESTAMPTZOID, INT8OID, BOOLOID};

/*
 * enable_tasks' backoff_base, backoff_max and backoff_jitter (from argument argno on; their
 * defaults under the 0.2.0 signature) into values[0..2], checked.
 */
static void
arg_backoff_policy(FunctionCallInfo fcinfo, int argno, Datum *values)
{
	Interval *base;
	Interval *max;
	char *jitter = "equal";
	int64 base_us;
	int64 max_us;

	if (PG_NARGS() < argno + 3)
	{
		/* The 0.2.0 signature: the defaults of 0.3.0's. */
		base = palloc0(sizeof(Interval));
		base->time = 10 * USECS_PER_SEC;
		max = palloc0(sizeof(Interval));
		max->time = USECS_PER_HOUR;
	}
	else
	{
		base_us = fl_arg_interval(fcinfo, argno, "backoff_base",
								  "Pass an interval such as '10 seconds', or '0' for no delay.");
		max_us =
			fl_arg_interval(fcinfo, argno + 1, "backoff_max", "Pass an interval such as '1 hour'.");
		fl_arg_not_null(fcinfo, argno + 2, "backoff_jitter", "Pass 'full', 'equal' or 'none'.");
		if (max_us < base_us || max_us > FL_MAX_WAIT_US)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("backoff_max must be an interval from backoff_base up to 100 years"),
					 errhint("Pass an interval such as '1 hour'.")));
		base = PG_GETARG_INTERVAL_P(argno);
		max = PG_GETARG_INTERVAL_P(argno + 1);
		jitter = text_to_cstring(PG_GETARG_TEXT_PP(argno + 2));
	}
	if (strcmp(jitter, "full") != 0 && strcmp(jitter, "equal") != 0 && strcmp(jitter, "none") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("backoff_jitter must be 'full', 'equal' or 'none', not \"%s\"", jitter),
				 errhint("'full' waits a random time up to the cap, 'equal' at least half "
						 "of it, 'none' exactly the cap.")));
	values[0] = IntervalPGetDatum(base);
	values[1] = IntervalPGetDatum(max);
	values[2] = CStringGetTextDatum(jitter);
}

static void
run_ddl(const char *sql)
{
	(void) fl_spi_result(sql, SPI_execute(sql, false, 0));
}

/*
 * The claim index's key columns, in claim order (priority, run_after, the primary key), so a claim
 * reads the first claimable rows in order, over only the rows still ready or running.
 */
static int
claim_index_keys(Relation rel, const TaskMap *map, AttrNumber *keys)
{
	Relation pk = index_open(FL_PRIMARY_KEY_INDEX(rel), AccessShareLock);
	int n = 0;

	if (NameStr(map->cols[COL_PRIORITY])[0] != '\0')
		keys[n++] = fl_task_find_column(rel, NameStr(map->cols[COL_PRIORITY]))->attnum;
	if (NameStr(map->cols[COL_RUN_AFTER])[0] != '\0')
		keys[n++] = fl_task_find_column(rel, NameStr(map->cols[COL_RUN_AFTER]))->attnum;
	for (int i = 0; i < pk->rd_index->indnkeyatts; i++)
		keys[n++] = pk->rd_index->indkey.values[i];
	index_close(pk, AccessShareLock);
	return n;
}

/*
 * Whether indexid is a claim index of the table (a partial, non-unique index) with these key
 * columns (any, with nkeys < 0).
 */
static bool
is_claim_index(Oid indexid, Oid relid, const AttrNumber *keys, int nkeys)
{
	char relkind = OidIsValid(indexid) ? get_rel_relkind(indexid) : '\0';
	Relation idx;
	bool same;

	if ((relkind != RELKIND_INDEX && relkind != RELKIND_PARTITIONED_INDEX) ||
		IndexGetRelation(indexid, true) != relid)
		return false;
	idx = index_open(indexid, AccessShareLock);
	same = !idx->rd_index->indisunique &&
		   !heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL) &&
		   (nkeys < 0 || idx->rd_index->indnkeyatts == nkeys);
	for (int i = 0; same && i < nkeys; i++)
		same = idx->rd_index->indkey.values[i] == keys[i];
	index_close(idx, AccessShareLock);
	return same;
}

/*
 * The wake triggers (wait/taskqueue.c): the commit of an INSERT of claimable rows, or of an UPDATE
 * statement on the table (other than claim's and the helpers'), wakes waiting claims.  Skipped when
 * the installed SQL objects are older than the library (fencelock.task_wake is missing before ALTER
 * EXTENSION fencelock UPDATE).
 */
static void
create_wake_trigger(const char *qualname, const TaskMap *map)
{
	char *nsp = get_namespace_name(fl_extension_schema());
	Oid fn = LookupFuncName(list_make2(makeString(nsp), makeString("task_wake")), 0, NULL, true);
	StringInfoData sql;

	if (!OidIsValid(fn))
		return;
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE OR REPLACE TRIGGER %s AFTER INSERT ON %s REFERENCING NEW TABLE AS "
					 "fencelock_new FOR EACH STATEMENT EXECUTE FUNCTION %s(%s",
					 WAKE_INSERT_TRIGGER_NAME, qualname,
					 quote_qualified_identifier(nsp, "task_wake"),
					 quote_literal_cstr(NameStr(map->cols[COL_STATE])));
	if (NameStr(map->cols[COL_RUN_AFTER])[0] != '\0')
		appendStringInfo(&sql, ", %s", quote_literal_cstr(NameStr(map->cols[COL_RUN_AFTER])));
	appendStringInfoString(&sql, ")");
	run_ddl(sql.data);
	run_ddl(psprintf("CREATE OR REPLACE TRIGGER %s AFTER UPDATE ON %s FOR EACH STATEMENT EXECUTE "
					 "FUNCTION %s()",
					 WAKE_TRIGGER_NAME, qualname, quote_qualified_identifier(nsp, "task_wake")));
}

Datum
fencelock_enable_tasks(PG_FUNCTION_ARGS)
{
	Oid relid;
	Relation rel;
	Oid nsp;
	char *qualname;
	AttrNumber keys[INDEX_MAX_KEYS + 2];
	int nkeys;
	bool new_index;
	const char *names[NUM_TASK_COLS];
	TaskMap map;
	TaskMap old_map;
	Oid old_index;
	Oid index = InvalidOid;
	bool enabled;
	Datum policy[3];
	const char *trigger_fn;

	fl_arg_not_null(fcinfo, 0, "tbl", "Pass the task table, e.g. 'jobs'.");
	relid = PG_GETARG_OID(0);
	arg_backoff_policy(fcinfo, NUM_TASK_COLS + 1, policy);
	for (int i = 0; i < NUM_TASK_COLS; i++)
	{
		/* The 0.2.0 signature has no finished_at_col. */
		if (i + 1 >= PG_NARGS() || PG_ARGISNULL(i + 1))
		{
			if (fl_task_cols[i].required)
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s_col must not be null", fl_task_cols[i].name),
								errhint("Name the column that holds the %s, or leave the "
										"argument out for \"%s\".",
										fl_task_cols[i].name, fl_task_cols[i].name)));
			names[i] = NULL;
		}
		else
			names[i] = NameStr(*PG_GETARG_NAME(i + 1));
	}

	fl_task_check_relation(relid);
	/* Before any lock: a non-owner must not queue behind, and block, the table's writers. */
	if (!FL_CLASS_OWNERCHECK(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	/* Serializes enable_tasks on the table, and conflicts with every writer of it. */
	rel = table_open(relid, ShareRowExclusiveLock);
	fl_task_check_columns(rel, names, true, &map);
	fl_task_refuse_inheritance_children(relid);
	nsp = RelationGetNamespace(rel);
	qualname = quote_qualified_identifier(get_namespace_name(nsp), RelationGetRelationName(rel));

	/* Called again: keep the index unless its columns change (or it was dropped). */
	nkeys = claim_index_keys(rel, &map, keys);
	enabled = fl_task_read_map(relid, &old_map, &old_index);
	new_index = !(enabled && is_claim_index(old_index, relid, keys, nkeys) &&
				  strcmp(NameStr(old_map.cols[COL_STATE]), NameStr(map.cols[COL_STATE])) == 0);
	index = new_index ? InvalidOid : old_index;
	/* DDL refuses a table this session has open; the lock stays. */
	table_close(rel, NoLock);
	/* The trigger function by the extension's own schema, whatever now has the name fencelock. */
	trigger_fn =
		quote_qualified_identifier(get_namespace_name(fl_extension_schema()), "fence_trigger");

	/* The DDL runs as the caller, the table's owner. */
	fl_spi_connect();
	run_ddl(psprintf("CREATE OR REPLACE TRIGGER %s BEFORE UPDATE ON %s FOR EACH ROW EXECUTE "
					 "FUNCTION %s(%s)",
					 TASK_TRIGGER_NAME, qualname, trigger_fn,
					 quote_literal_cstr(NameStr(map.cols[COL_FENCE]))));
	create_wake_trigger(qualname, &map);
	if (new_index)
	{
		StringInfoData sql;
		char *name;

		/* The index enable_tasks made before, if it is still an index of this table. */
		if (is_claim_index(old_index, relid, NULL, -1))
			run_ddl(psprintf("DROP INDEX %s", quote_qualified_identifier(
												  get_namespace_name(get_rel_namespace(old_index)),
												  get_rel_name(old_index))));
		name = ChooseRelationName(get_rel_name(relid), "claim", "idx", nsp, false);
		initStringInfo(&sql);
		appendStringInfo(&sql, "CREATE INDEX %s ON %s (", quote_identifier(name), qualname);
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "",
							 quote_identifier(get_attname(relid, keys[i], false)));
		appendStringInfo(&sql,
						 ") WHERE %s OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'running']::"
						 "pg_catalog.text[])",
						 quote_identifier(NameStr(map.cols[COL_STATE])));
		run_ddl(sql.data);
		index = get_relname_relid(name, nsp);
	}
	fl_spi_finish();

	/* The trigger just made must be the fence trigger, on the table and on every partition. */
	CommandCounterIncrement();
	rel = table_open(relid, NoLock);
	(void) fl_task_require_fence_triggers(rel, NameStr(map.cols[COL_FENCE]), NoLock);
	table_close(rel, NoLock);
	fl_task_write_map(relid, &map, index, policy);

	/* Every backend builds the table's statements again. */
	CacheInvalidateRelcacheByRelid(relid);
	PG_RETURN_VOID();
}

/*
 * purge_tasks(tbl, older_than, include_dead, batch_size): delete the rows that finished (done,
 * and dead with include_dead) more than older_than ago, batch_size rows per statement, skipping
 * rows that anyone holds locked; returns how many.  Runs as the caller, who needs DELETE on the
 * table (and UPDATE, for the row locks of SKIP LOCKED).
 */
Datum
fencelock_purge_tasks(PG_FUNCTION_ARGS)
{
	TaskTable *tt = fl_task_arg_table(fcinfo, 0);
	int64 older_us;
	int32 batch;
	Datum values[3];
	int64 total = 0;
	uint64 n;

	older_us = fl_arg_interval(fcinfo, 1, "older_than", "Pass an interval such as '7 days'.");
	fl_arg_not_null(fcinfo, 2, "include_dead", "Pass true to delete dead rows too, false not to.");
	batch = fl_arg_count(fcinfo, 3, "batch_size", "Pass a positive number of rows, such as 1000.");
	if (!tt->has[COL_FINISHED_AT])
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("table \"%s\" has no finished_at column", tt->relname),
				 errdetail("purge_tasks deletes rows by the time they finished, which complete "
						   "and fail record there."),
				 errhint("Run ALTER TABLE %s ADD COLUMN finished_at timestamptz, then "
						 "fencelock.enable_tasks again.",
						 quote_qualified_identifier(
							 get_namespace_name(get_rel_namespace(tt->relid)), tt->relname))));

	values[0] = TimestampTzGetDatum(GetCurrentTimestamp() - older_us);
	values[1] = Int64GetDatum(batch);
	values[2] = BoolGetDatum(PG_GETARG_BOOL(2));
	fl_spi_connect();
	do
	{
		CHECK_FOR_INTERRUPTS();
		n = fl_task_run(tt, STMT_PURGE, lengthof(purge_argtypes), purge_argtypes, values, NULL);
		if (n > 0)
			fl_task_check_result_relations(tt);
		total += n;
	} while (n == (uint64) batch);
	fl_spi_finish();
	PG_RETURN_INT64(total);
}
