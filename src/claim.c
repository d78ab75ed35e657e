/*
 * claim.c — fenced worker queues in users' own task tables.
 *
 *   SELECT fencelock.enable_tasks('jobs');
 *   SELECT * FROM fencelock.claim(NULL::jobs, worker => 'w-1', ttl => '30 s', max_rows => 10);
 *   SELECT fencelock.heartbeat('jobs', 42, 7, '30 s');
 *   SELECT fencelock.complete('jobs', 42, 7);
 *   SELECT fencelock.fail('jobs', 42, 7, 'timeout', '1 min');
 *
 * enable_tasks checks a table against the column convention (state, lease_owner, lease_until,
 * attempt, fence; optional run_after, priority, max_attempts, last_error; a primary key), records
 * which columns play which part in fencelock.task_tables, and installs the fence trigger and a
 * partial index over the rows that can still be claimed.
 *
 * claim takes ready rows (and running rows whose lease ran out) in one statement with FOR UPDATE
 * SKIP LOCKED, so concurrent workers never wait for each other and never get the same row; the
 * same UPDATE sets the lease and raises the row's fence above every fence it had before, so the
 * fence trigger refuses every later write from an earlier holder.
 *
 * Unlike the lease API, these functions run their statements as the caller: users own their task
 * tables, so a role claims only in tables it may UPDATE.  Only the read of fencelock.task_tables
 * runs as the extension's owner.  Each table's statements are built once per backend from the
 * catalog, with every identifier quoted and every value a parameter, and kept in a backend-local
 * hash keyed by the table's OID until a relcache invalidation of the table (ALTER TABLE, DROP
 * TRIGGER, enable_tasks again).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "fencelock.h"
#include "leasetable.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "settings.h"
#include "stats.h"
#include "taskwait.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/sortsupport.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(fencelock_enable_tasks);
PG_FUNCTION_INFO_V1(fencelock_claim);
PG_FUNCTION_INFO_V1(fencelock_heartbeat);
PG_FUNCTION_INFO_V1(fencelock_complete);
PG_FUNCTION_INFO_V1(fencelock_fail);
PG_FUNCTION_INFO_V1(fencelock_purge_tasks);
PG_FUNCTION_INFO_V1(fencelock_complete_all);

#define TASK_TRIGGER_NAME        "fencelock_fence"
#define WAKE_TRIGGER_NAME        "fencelock_wake"
#define WAKE_INSERT_TRIGGER_NAME "fencelock_wake_insert"

/* The fence trigger's C function (trigger.c): how claim recognises the trigger, whatever its name.
 */
extern PGDLLEXPORT Datum fencelock_fence_trigger(PG_FUNCTION_ARGS);
/* The wake trigger's (taskwait.c): how a waiting claim knows that commits will wake it. */
extern PGDLLEXPORT Datum fencelock_task_wake(PG_FUNCTION_ARGS);

/*
 * The largest fence claim issues.  The one value above it is kept for the bump that makes a row
 * dead (fail, a lapsed last attempt, a row claim cannot raise), so that bump never overflows.
 */
#define TASK_MAX_CLAIM_FENCE (PG_INT64_MAX - 1)

/* The parts a column plays in the convention, in enable_tasks' argument order. */
typedef enum TaskCol
{
	COL_STATE,
	COL_LEASE_OWNER,
	COL_LEASE_UNTIL,
	COL_ATTEMPT,
	COL_FENCE,
	COL_RUN_AFTER,
	COL_PRIORITY,
	COL_MAX_ATTEMPTS,
	COL_LAST_ERROR,
	COL_FINISHED_AT,
	NUM_TASK_COLS
} TaskCol;

typedef enum ColKind
{
	KIND_TEXT,
	KIND_TIMESTAMPTZ,
	KIND_INTEGER, /* smallint, integer or bigint */
	KIND_BIGINT
} ColKind;

typedef struct TaskColSpec
{
	const char *name; /* the conventional name; also the part's name in messages */
	ColKind kind;
	bool required;
	const char *ddl; /* the column's type and default in the suggested DDL */
} TaskColSpec;

static const TaskColSpec task_cols[NUM_TASK_COLS] = {
	{"state", KIND_TEXT, true, "text NOT NULL DEFAULT 'ready'"},
	{"lease_owner", KIND_TEXT, true, "text"},
	{"lease_until", KIND_TIMESTAMPTZ, true, "timestamptz"},
	{"attempt", KIND_INTEGER, true, "integer NOT NULL DEFAULT 0"},
	{"fence", KIND_BIGINT, true, "bigint NOT NULL DEFAULT 0"},
	{"run_after", KIND_TIMESTAMPTZ, false, "timestamptz NOT NULL DEFAULT now()"},
	{"priority", KIND_INTEGER, false, "integer NOT NULL DEFAULT 0"},
	{"max_attempts", KIND_INTEGER, false, "integer DEFAULT 5"},
	{"last_error", KIND_TEXT, false, "text"},
	{"finished_at", KIND_TIMESTAMPTZ, false, "timestamptz"},
};

/* Which column plays each part; "" for an optional part the table does not have. */
typedef struct TaskMap
{
	NameData cols[NUM_TASK_COLS];
	/* fail's backoff policy: the cap is min(max, base * 2^(attempt - 1)) */
	double backoff_base_s;
	double backoff_max_s;
	double backoff_jitter; /* the random share of the delay: 1 full, 0.5 equal, 0 none */
} TaskMap;

/* The statements kept per table. */
typedef enum TaskStmt
{
	STMT_CLAIM,
	STMT_CLAIM_DEAD, /* the rows claim met but cannot take */
	STMT_HEARTBEAT,
	STMT_COMPLETE,
	STMT_FAIL,
	STMT_READ, /* the row's relation, fence and state, when a helper's UPDATE matched nothing */
	STMT_PURGE,
	STMT_COMPLETE_ALL, /* complete_all: the rows of $1 (keys) under $2 (fences) */
	STMT_READ_ALL,     /* the rows of $1 after complete_all: relation, key's index, fence, state */
	NUM_TASK_STMTS
} TaskStmt;

/* $1 now, $2 worker, $3 lease deadline, $4 timeline base, $5 max rows */
static const Oid claim_argtypes[] = {TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID};
#define CLAIM_NARGS lengthof(claim_argtypes)

/*
 * heartbeat, complete and fail: $1 the primary key (typed as its column), $2 the fence; heartbeat
 * $3 the new deadline; fail $3 the new run_after (NULL: the policy's, or unchanged), $4 the error,
 * and the backoff policy: $5 now (NULL: no policy), $6 base and $7 cap in seconds, $8 jitter.
 */
#define ROW_MAX_NARGS 8

/* purge_tasks: $1 the cutoff, $2 the batch size, $3 whether dead rows go too */
static const Oid purge_argtypes[] = {TIMESTAMPTZOID, INT8OID, BOOLOID};

typedef struct TaskTable
{
	Oid relid; /* hash key */
	bool valid;
	bool building;     /* task_table_build is running for it */
	MemoryContext cxt; /* holds the strings below */
	char *relname;
	bool has[NUM_TASK_COLS];
	int npk;
	char *pkname; /* the first (with npk == 1, the only) key column */
	Oid pktype;
	Oid fence_type; /* the fence and state columns' types, as result rows carry them */
	Oid state_type;
	int pos_fence; /* positions among the live columns, for claim's warnings */
	int pos_attempt;
	bool has_wake; /* commits that make rows claimable wake waiting claims */
	TaskMap map;   /* the columns and the backoff policy */
	int pkpos[INDEX_MAX_KEYS];
	int nsort; /* claim order: priority, run_after, the key (claim_sort) */
	int sortpos[INDEX_MAX_KEYS + 2];
	Oid sortop[INDEX_MAX_KEYS + 2];
	Oid sortcoll[INDEX_MAX_KEYS + 2];
	char relkind;
	int nparts; /* a partitioned table: its partitions (all levels), each fenced */
	Oid *parts;
	char *sql[NUM_TASK_STMTS];
	SPIPlanPtr plan[NUM_TASK_STMTS];
	int busy;            /* executions in progress: their plans must not be freed */
	List *retired_plans; /* dropped while busy: freed once busy is back to 0 */
	List *retired_cxts;  /* (the statements' text, which an execution may still print) */
} TaskTable;

/*
 * Entries live as long as the backend: a dropped table's entry (and its kept plans) stays, marked
 * invalid, since an invalidation callback may run while a plan executes and must not free it.
 */
static HTAB *task_tables = NULL;

/*
 * fencelock.task_tables itself: a change of its definition (ALTER EXTENSION ... UPDATE adds
 * columns) makes every table's statements and mapping be read again.
 */
static Oid task_tables_relid = InvalidOid;

/* Statements on fencelock.task_tables, run as the extension's owner. */
static FlStmt map_select = {
	"SELECT c.state_col, c.lease_owner_col, c.lease_until_col, c.attempt_col, c.fence_col, "
	" c.run_after_col, c.priority_col, c.max_attempts_col, c.last_error_col, "
	" c.finished_at_col, c.claim_index, "
	" pg_catalog.date_part('epoch', c.backoff_base), pg_catalog.date_part('epoch', c.backoff_max), "
	" CASE c.backoff_jitter WHEN 'full' THEN 1.0 WHEN 'equal' THEN 0.5 ELSE 0.0 "
	"END::pg_catalog.float8 "
	"FROM fencelock.task_tables AS c WHERE c.tbl OPERATOR(pg_catalog.=) $1",
	1,
	{REGCLASSOID}};

static FlStmt map_upsert = {
	"INSERT INTO fencelock.task_tables AS c (tbl, state_col, lease_owner_col, lease_until_col, "
	" attempt_col, fence_col, run_after_col, priority_col, max_attempts_col, last_error_col, "
	" finished_at_col, claim_index, backoff_base, backoff_max, backoff_jitter) "
	"VALUES ($1, $2[1], $2[2], $2[3], $2[4], $2[5], $2[6], $2[7], $2[8], $2[9], $2[10], $3, $4, "
	"$5, "
	" $6) "
	"ON CONFLICT (tbl) DO UPDATE SET state_col = excluded.state_col, "
	" lease_owner_col = excluded.lease_owner_col, lease_until_col = excluded.lease_until_col, "
	" attempt_col = excluded.attempt_col, fence_col = excluded.fence_col, "
	" run_after_col = excluded.run_after_col, priority_col = excluded.priority_col, "
	" max_attempts_col = excluded.max_attempts_col, last_error_col = excluded.last_error_col, "
	" finished_at_col = excluded.finished_at_col, claim_index = excluded.claim_index, "
	" backoff_base = excluded.backoff_base, backoff_max = excluded.backoff_max, "
	" backoff_jitter = excluded.backoff_jitter",
	6,
	{REGCLASSOID, NAMEARRAYOID, NAMEOID, INTERVALOID, INTERVALOID, TEXTOID}};

/*
 * The same under the 0.2.0 objects (the library installed, ALTER EXTENSION ... UPDATE not run
 * yet): no finished_at_col, and no backoff policy (-1: fail leaves run_after as 0.2.0 did).
 */
static FlStmt map_select_020 = {
	"SELECT c.state_col, c.lease_owner_col, c.lease_until_col, c.attempt_col, c.fence_col, "
	" c.run_after_col, c.priority_col, c.max_attempts_col, c.last_error_col, "
	" NULL::pg_catalog.name, c.claim_index, -1::pg_catalog.float8, -1::pg_catalog.float8, "
	" -1::pg_catalog.float8 "
	"FROM fencelock.task_tables AS c WHERE c.tbl OPERATOR(pg_catalog.=) $1",
	1,
	{REGCLASSOID}};

static FlStmt map_upsert_020 = {
	"INSERT INTO fencelock.task_tables AS c (tbl, state_col, lease_owner_col, lease_until_col, "
	" attempt_col, fence_col, run_after_col, priority_col, max_attempts_col, last_error_col, "
	" claim_index) VALUES ($1, $2[1], $2[2], $2[3], $2[4], $2[5], $2[6], $2[7], $2[8], $2[9], $3) "
	"ON CONFLICT (tbl) DO UPDATE SET state_col = excluded.state_col, "
	" lease_owner_col = excluded.lease_owner_col, lease_until_col = excluded.lease_until_col, "
	" attempt_col = excluded.attempt_col, fence_col = excluded.fence_col, "
	" run_after_col = excluded.run_after_col, priority_col = excluded.priority_col, "
	" max_attempts_col = excluded.max_attempts_col, last_error_col = excluded.last_error_col, "
	" claim_index = excluded.claim_index",
	3,
	{REGCLASSOID, NAMEARRAYOID, NAMEOID}};

/* Rows of tables dropped since they were enabled. */
static FlStmt map_prune = {
	"DELETE FROM fencelock.task_tables AS c WHERE NOT EXISTS "
	" (SELECT FROM pg_catalog.pg_class AS r WHERE r.oid OPERATOR(pg_catalog.=) c.tbl)",
	0,
	{InvalidOid}};

/* ---------------------------------------------------------------------------------------------
 * The table and its columns
 * ---------------------------------------------------------------------------------------------
 */

/* Task tables are ordinary or partitioned tables, and not temporary. */
static void
check_relation(Oid relid)
{
	char relkind = get_rel_relkind(relid);

	if (relkind == '\0')
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("relation with OID %u does not exist", relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
						errmsg("\"%s\" is not a table", get_rel_name(relid)),
						errhint("Task tables are ordinary or partitioned tables; views, sequences, "
								"foreign tables and composite types cannot hold claimable rows.")));
	if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is a temporary table", get_rel_name(relid)),
				 errhint("Workers in other sessions cannot see a temporary table; use an ordinary "
						 "(or unlogged) table.")));
}

static bool
kind_matches(ColKind kind, Oid typid)
{
	typid = getBaseType(typid);
	switch (kind)
	{
		case KIND_TEXT:
			return typid == TEXTOID;
		case KIND_TIMESTAMPTZ:
			return typid == TIMESTAMPTZOID;
		case KIND_INTEGER:
			return typid == INT2OID || typid == INT4OID || typid == INT8OID;
		case KIND_BIGINT:
			return typid == INT8OID;
	}
	return false;
}

static const char *
kind_name(ColKind kind)
{
	switch (kind)
	{
		case KIND_TEXT:
			return "text";
		case KIND_TIMESTAMPTZ:
			return "timestamp with time zone";
		case KIND_INTEGER:
			return "smallint, integer or bigint";
		case KIND_BIGINT:
			return "bigint";
	}
	return "?";
}

static Form_pg_attribute
find_column(Relation rel, const char *name)
{
	TupleDesc desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att;
	}
	return NULL;
}

/* The separator before the next sentence of a list of problems. */
static StringInfo
next_problem(StringInfo problems)
{
	if (problems->len > 0)
		appendStringInfoChar(problems, ' ');
	return problems;
}

/* check_columns' hint: what to run, or what to change. */
static int
errhint_columns(const char *qualname, const char *ddl, bool in_pk, bool no_pk, bool only_no_pk)
{
	if (ddl[0] != '\0' && no_pk)
		return errhint("Run ALTER TABLE %s %s, and add a primary key, or name your own columns "
					   "with fencelock.enable_tasks(..., state_col => ...).",
					   qualname, ddl);
	if (ddl[0] != '\0')
		return errhint("Run ALTER TABLE %s %s, or name your own columns with "
					   "fencelock.enable_tasks(..., state_col => ...).",
					   qualname, ddl);
	if (only_no_pk)
		return errhint(
			"Add a primary key: claim orders rows by it and the helpers find rows by it.");
	if (in_pk && no_pk)
		return errhint("Give each part its own ordinary column of the documented type, outside "
					   "the primary key, and the table a primary key.");
	if (in_pk)
		return errhint("Give each part its own ordinary column of the documented type, outside "
					   "the primary key.");
	if (no_pk)
		return errhint("Give each part its own ordinary column of the documented type, and the "
					   "table a primary key.");
	return errhint("Give each part its own ordinary column of the documented type.");
}

/*
 * Check the table against the convention.  names[i] is the column asked for; NULL for an optional
 * part means its conventional name if the table has it (with find_optional) or that the part is
 * not used.  Fills *map with the columns in use and raises one error that lists every problem.
 */
static void
check_columns(Relation rel, const char *const names[NUM_TASK_COLS], bool find_optional,
			  TaskMap *map)
{
	const char *qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													  RelationGetRelationName(rel));
	StringInfoData problems;
	StringInfoData ddl;
	bool no_pk = !OidIsValid(FL_PRIMARY_KEY_INDEX(rel));
	Bitmapset *pk_cols = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);
	bool in_pk = false;

	initStringInfo(&problems);
	initStringInfo(&ddl);
	memset(map, 0, sizeof(*map));
	for (int i = 0; i < NUM_TASK_COLS; i++)
	{
		const TaskColSpec *spec = &task_cols[i];
		const char *name = names[i] != NULL ? names[i] : spec->name;
		bool conventional = strcmp(name, spec->name) == 0; /* else the message names the part */
		Form_pg_attribute att;

		if (names[i] == NULL && !spec->required && !find_optional)
			continue;
		att = find_column(rel, name);
		if (att == NULL)
		{
			if (!spec->required && names[i] == NULL)
				continue; /* an optional part the table does not have */
			if (conventional)
				appendStringInfo(next_problem(&problems), "Column \"%s\" is missing.", name);
			else
				appendStringInfo(next_problem(&problems), "Column \"%s\" (%s) is missing.", name,
								 spec->name);
			appendStringInfo(&ddl, "%sADD COLUMN %s %s", ddl.len > 0 ? ", " : "",
							 quote_identifier(name), spec->ddl);
			continue;
		}
		if (!kind_matches(spec->kind, att->atttypid))
		{
			if (conventional)
				appendStringInfo(next_problem(&problems), "Column \"%s\" is of type %s, not %s.",
								 name, format_type_be(att->atttypid), kind_name(spec->kind));
			else
				appendStringInfo(next_problem(&problems),
								 "Column \"%s\" (%s) is of type %s, not %s.", name, spec->name,
								 format_type_be(att->atttypid), kind_name(spec->kind));
			appendStringInfo(&ddl, "%sALTER COLUMN %s TYPE %s", ddl.len > 0 ? ", " : "",
							 quote_identifier(name),
							 spec->kind == KIND_INTEGER ? "integer" : kind_name(spec->kind));
			continue;
		}
		if (att->attgenerated)
		{
			if (conventional)
				appendStringInfo(next_problem(&problems), "Column \"%s\" is a generated column.",
								 name);
			else
				appendStringInfo(next_problem(&problems),
								 "Column \"%s\" (%s) is a generated column.", name, spec->name);
			continue;
		}
		/*
		 * claim and the helpers write every part but the two they only read: a key column among
		 * them would move the row's key, and a fence or attempt there makes every claim collide.
		 */
		if (i != COL_PRIORITY && i != COL_MAX_ATTEMPTS &&
			bms_is_member(att->attnum - FirstLowInvalidHeapAttributeNumber, pk_cols))
		{
			if (conventional)
				appendStringInfo(next_problem(&problems),
								 "Column \"%s\" is part of the primary key.", name);
			else
				appendStringInfo(next_problem(&problems),
								 "Column \"%s\" (%s) is part of the primary key.", name,
								 spec->name);
			in_pk = true;
		}
		for (int j = 0; j < i; j++)
			if (strcmp(NameStr(map->cols[j]), name) == 0)
				appendStringInfo(next_problem(&problems), "Column \"%s\" cannot be both %s and %s.",
								 name, task_cols[j].name, spec->name);
		namestrcpy(&map->cols[i], name);
	}
	if (no_pk)
		appendStringInfoString(next_problem(&problems), "The table has no primary key.");
	if (problems.len == 0)
		return;
	ereport(ERROR, (errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					errmsg("table \"%s\" does not follow the task-table convention",
						   RelationGetRelationName(rel)),
					errdetail_internal("%s", problems.data),
					errhint_columns(qualname, ddl.data, in_pk, no_pk,
									problems.len == strlen("The table has no primary key."))));
}

/*
 * Whether fencelock.task_tables has the columns of 0.3.0 (finished_at_col, the backoff policy):
 * between installing this library and ALTER EXTENSION fencelock UPDATE it has those of 0.2.0, and
 * task tables keep working as they did then.
 */
static bool
task_tables_v030(Oid nsp)
{
	Oid rel = get_relname_relid("task_tables", nsp);

	task_tables_relid = rel;
	return OidIsValid(rel) && get_attnum(rel, "backoff_jitter") != InvalidAttrNumber;
}

/*
 * Read the table's row of fencelock.task_tables; false when it has none.  *claim_index (unless
 * claim_index is NULL) is the index of the recorded name in the table's schema, if there is one (a
 * name, not a regclass: pg_dump restores the row before it builds the index); only enable_tasks
 * needs it, to keep or replace the index.
 */
static bool
read_map(Oid relid, TaskMap *map, Oid *claim_index)
{
	Datum values[1];
	FlSession session;
	bool found;
	bool v030;

	memset(map, 0, sizeof(*map));
	if (claim_index != NULL)
		*claim_index = InvalidOid;
	values[0] = ObjectIdGetDatum(relid);
	v030 = task_tables_v030(fl_extension_schema());
	fl_begin(&session);
	found = fl_run(v030 ? &map_select : &map_select_020, values, NULL, true) == 1;
	if (found)
	{
		HeapTuple tuple = SPI_tuptable->vals[0];
		TupleDesc desc = SPI_tuptable->tupdesc;
		char *index;
		bool isnull;

		if (desc->natts != NUM_TASK_COLS + 4 ||
			TupleDescAttr(desc, NUM_TASK_COLS + 1)->atttypid != FLOAT8OID)
			elog(ERROR, "fencelock.task_tables has an unexpected row type");
		for (int i = 0; i < NUM_TASK_COLS; i++)
		{
			char *name = SPI_getvalue(tuple, desc, i + 1);

			if (name != NULL)
				namestrcpy(&map->cols[i], name);
		}
		index = SPI_getvalue(tuple, desc, NUM_TASK_COLS + 1);
		if (index != NULL && claim_index != NULL)
			*claim_index = get_relname_relid(index, get_rel_namespace(relid));
		map->backoff_base_s =
			DatumGetFloat8(SPI_getbinval(tuple, desc, NUM_TASK_COLS + 2, &isnull));
		map->backoff_max_s = DatumGetFloat8(SPI_getbinval(tuple, desc, NUM_TASK_COLS + 3, &isnull));
		map->backoff_jitter =
			DatumGetFloat8(SPI_getbinval(tuple, desc, NUM_TASK_COLS + 4, &isnull));
	}
	fl_end(&session);
	return found;
}

/*
 * Whether a function is the fence trigger: a C function whose symbol, loaded, is this library's
 * fencelock_fence_trigger.  Not by name: a schema planted under the name "fencelock" could hold
 * a function called fence_trigger that fences nothing.
 */
static bool
is_c_function(Oid fn, PGFunction addr)
{
	HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	bool is_c;
	FmgrInfo finfo;

	if (!HeapTupleIsValid(tuple))
		return false;
	is_c = ((Form_pg_proc) GETSTRUCT(tuple))->prolang == ClanguageId;
	ReleaseSysCache(tuple);
	if (!is_c)
		return false;
	fmgr_info(fn, &finfo);
	return finfo.fn_addr == addr;
}

static bool
is_fence_trigger_function(Oid fn)
{
	return is_c_function(fn, fencelock_fence_trigger);
}

/* Whether the table has enabled AFTER statement triggers on INSERT and on UPDATE that wake. */
static bool
has_wake_trigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	bool insert = false;
	bool update = false;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger *tg = &td->triggers[i];

		if (!TRIGGER_FOR_ROW(tg->tgtype) && TRIGGER_FOR_AFTER(tg->tgtype) &&
			(tg->tgenabled == TRIGGER_FIRES_ON_ORIGIN || tg->tgenabled == TRIGGER_FIRES_ALWAYS) &&
			is_c_function(tg->tgfoid, fencelock_task_wake))
		{
			insert |= TRIGGER_FOR_INSERT(tg->tgtype);
			update |= TRIGGER_FOR_UPDATE(tg->tgtype);
		}
	}
	return insert && update;
}

/*
 * Whether the table has an enabled BEFORE UPDATE row trigger, without a WHEN condition, that calls
 * the fence trigger function on the fence column.
 */
static bool
has_fence_trigger(Relation rel, const char *fence_col)
{
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger *tg = &td->triggers[i];
		const char *col = tg->tgnargs > 0 ? tg->tgargs[0] : "last_fence";

		if (TRIGGER_FOR_ROW(tg->tgtype) && TRIGGER_FOR_BEFORE(tg->tgtype) &&
			TRIGGER_FOR_UPDATE(tg->tgtype) &&
			(tg->tgenabled == TRIGGER_FIRES_ON_ORIGIN || tg->tgenabled == TRIGGER_FIRES_ALWAYS) &&
			tg->tgqual == NULL && strcmp(col, fence_col) == 0 &&
			is_fence_trigger_function(tg->tgfoid))
			return true;
	}
	return false;
}

/* Refuse rel (the task table or one of its partitions) if it lacks the fence trigger. */
static void
require_fence_trigger(Relation rel, Relation task_rel, const char *fence_col)
{
	const char *qualname;

	if (has_fence_trigger(rel, fence_col))
		return;
	qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(task_rel)),
										  RelationGetRelationName(task_rel));
	if (rel == task_rel)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("table \"%s\" has no enabled fence trigger on column \"%s\"",
							   RelationGetRelationName(rel), fence_col),
						errdetail("Claims would not fence out earlier holders."),
						errhint("Run SELECT fencelock.enable_tasks('%s') again.", qualname)));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("partition \"%s\" of table \"%s\" has no enabled fence trigger on column "
					"\"%s\"",
					RelationGetRelationName(rel), RelationGetRelationName(task_rel), fence_col),
			 errdetail("Claims of its rows would not fence out earlier holders."),
			 errhint("Enable the partition's trigger %s again (ALTER TABLE ... ENABLE TRIGGER), "
					 "or run SELECT fencelock.enable_tasks('%s') again.",
					 TASK_TRIGGER_NAME, qualname)));
}

/*
 * Refuse a table with inheritance children (INHERITS; partitions are not such children): claim
 * and the helpers would update the children's rows through it, but the fence trigger on the
 * parent does not fire for them, so nothing would fence those rows.  Cheap when the table never
 * had a child (relhassubclass), so claim checks it on every call: a child may come at any time.
 */
static void
refuse_inheritance_children(Oid relid)
{
	List *children;

	if (get_rel_relkind(relid) != RELKIND_RELATION || !has_subclass(relid))
		return;
	children = find_inheritance_children(relid, NoLock);
	if (children == NIL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("table \"%s\" has inheritance children", get_rel_name(relid)),
			 errdetail("Rows of child table \"%s\" would be claimed through it, but its fence "
					   "trigger does not fire for them, so they would not be fenced.",
					   get_rel_name(linitial_oid(children))),
			 errhint("Use a partitioned table (its partitions get the fence trigger), or enable "
					 "each child table on its own and claim from it.")));
}

/* ---------------------------------------------------------------------------------------------
 * The statements, built once per table
 * ---------------------------------------------------------------------------------------------
 */

typedef struct SqlParts
{
	const char *table;              /* schema-qualified, quoted */
	const char *col[NUM_TASK_COLS]; /* quoted, NULL when absent */
	int npk;
	const char *pk[INDEX_MAX_KEYS];   /* quoted */
	const char *pkeq[INDEX_MAX_KEYS]; /* OPERATOR(schema.=) of the key's btree opfamily */
	/* claim's result: each part's position among the table's live columns (0: absent) */
	int pos[NUM_TASK_COLS];
	int pkpos[INDEX_MAX_KEYS];
	const char *attempt_max; /* the attempt column's type's maximum, a literal */
} SqlParts;

/* Columns before the table's own in claim's result: tableoid. */
#define CLAIM_LEAD_COLS 1

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
 * The rows claim takes, for "WHERE ...": the keys of up to $5 claimable rows in claim order (and,
 * with bad, only those that claim cannot take: claim_dead's), locked, skipping rows that other
 * workers hold.  A single-column key is collected into an array that an InitPlan builds once, so
 * the UPDATE finds the rows by "key = ANY (...)" on the primary key: a generic plan that is right
 * for every max_rows.  A composite key uses IN (the statement is then planned on every call).
 */
static void
append_claim_keys(StringInfo buf, const SqlParts *p, bool bad)
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
	appendStringInfoString(buf, " LIMIT $5 FOR UPDATE OF c SKIP LOCKED)");
	if (p->npk == 1)
		appendStringInfoString(buf, ")");
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
		appendStringInfo(&buf, " THEN 'fencelock: fence or attempt at its maximum' ELSE t.%s END",
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
	if (p->npk == 1)
		appendStringInfo(&buf, "t.%s %s ANY (ARRAY(SELECT c.%s", p->pk[0], p->pkeq[0], p->pk[0]);
	else
	{
		appendStringInfoString(&buf, "(");
		for (int i = 0; i < p->npk; i++)
			appendStringInfo(&buf, "%st.%s", i > 0 ? ", " : "", p->pk[i]);
		appendStringInfoString(&buf, ") IN (SELECT ");
		for (int i = 0; i < p->npk; i++)
			appendStringInfo(&buf, "%sc.%s", i > 0 ? ", " : "", p->pk[i]);
	}
	appendStringInfo(&buf, " FROM %s AS c WHERE ", p->table);
	append_finished(&buf, p, "c");
	appendStringInfo(&buf, " LIMIT $2 FOR UPDATE OF c SKIP LOCKED)%s AND ", p->npk == 1 ? ")" : "");
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
static const char *
key_equality(Oid opfamily, Oid opcintype)
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

/* ---------------------------------------------------------------------------------------------
 * The per-backend cache
 * ---------------------------------------------------------------------------------------------
 */

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
		if (relid == InvalidOid || tt->relid == relid || relid == task_tables_relid)
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

/* A partitioned table: every partition, at every level, must carry the fence trigger too. */
static void
task_table_partitions(TaskTable *tt, Relation rel, const char *fence_col)
{
	List *all = find_all_inheritors(tt->relid, AccessShareLock, NULL);
	ListCell *lc;
	int n = 0;

	tt->parts = palloc(list_length(all) * sizeof(Oid));
	foreach (lc, all)
	{
		Oid part = lfirst_oid(lc);
		Relation prel;

		if (part == tt->relid)
			continue;
		tt->parts[n++] = part;
		if (get_rel_relkind(part) != RELKIND_RELATION)
			continue; /* a partitioned partition holds no rows itself */
		prel = table_open(part, NoLock);
		require_fence_trigger(prel, rel, fence_col);
		table_close(prel, NoLock);
	}
	tt->nparts = n;
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
	MemoryContext old;

	/* Before any lock: a role that may not update the table must not queue behind its writers. */
	if (pg_class_aclcheck(tt->relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(tt->relid, GetUserId(), ACL_UPDATE, ACLMASK_ANY) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(tt->relid));
	rel = table_open(tt->relid, AccessShareLock);
	if (!read_map(tt->relid, &map, NULL))
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

		check_columns(rel, names, false, &map);
		map.backoff_base_s = read.backoff_base_s;
		map.backoff_max_s = read.backoff_max_s;
		map.backoff_jitter = read.backoff_jitter;
	}
	tt->map = map;
	require_fence_trigger(rel, rel, NameStr(map.cols[COL_FENCE]));
	tt->has_wake = has_wake_trigger(rel);

	tt->cxt =
		AllocSetContextCreate(CacheMemoryContext, "fencelock task table", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(tt->cxt);

	tt->relkind = rel->rd_rel->relkind;
	if (tt->relkind == RELKIND_PARTITIONED_TABLE)
		task_table_partitions(tt, rel, NameStr(map.cols[COL_FENCE]));

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
		att = find_column(rel, NameStr(map.cols[i]));
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
		p.pkeq[i] = key_equality(idx->rd_opfamily[i], idx->rd_opcintype[i]);
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
	tt->sql[STMT_CLAIM] = build_claim(&p);
	tt->sql[STMT_CLAIM_DEAD] = build_claim_dead(&p);
	if (p.npk == 1)
	{
		for (int s = STMT_HEARTBEAT; s <= STMT_FAIL; s++)
			tt->sql[s] = build_row_update(&p, s);
		tt->sql[STMT_READ] = build_read(&p);
		tt->sql[STMT_COMPLETE_ALL] = build_complete_all(&p);
		tt->sql[STMT_READ_ALL] = build_read_all(&p);
	}
	if (p.col[COL_FINISHED_AT])
		tt->sql[STMT_PURGE] = build_purge(&p);

	MemoryContextSwitchTo(old);
	table_close(rel, NoLock);
}

static TaskTable *
task_table(Oid relid)
{
	TaskTable *tt;
	bool found;

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
	refuse_inheritance_children(relid);
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
static uint64
task_run(TaskTable *tt, TaskStmt stmt, int nargs, const Oid *argtypes, Datum *values,
		 const char *nulls)
{
	SPIPlanPtr plan = task_plan(tt, stmt, nargs, argtypes);
	const char *sql = tt->sql[stmt]; /* kept (retired) until busy is 0 again, like the plan */
	Oid own = fl_task_own_relid;
	int rc;

	tt->busy++;
	/* The wake trigger ignores our statements (fail announces its rows itself). */
	fl_task_own_relid = tt->relid;
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, values, nulls, false, 0);
	}
	PG_FINALLY();
	{
		tt->busy--;
		fl_task_own_relid = own;
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
static void
check_result_relation(TaskTable *tt, Oid tableoid)
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
static void
check_result_column(TaskTable *tt, TupleDesc desc, int col, Oid typid, int32 typmod)
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
static void
check_result_relations(TaskTable *tt)
{
	TupleDesc rdesc = SPI_tuptable->tupdesc;

	check_result_column(tt, rdesc, 1, OIDOID, -1);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool isnull;

		check_result_relation(
			tt, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[r], rdesc, 1, &isnull)));
	}
}

/* ---------------------------------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------------------------------
 */

#define CLAIM_TASKS_HINT                                                                           \
	"Pass NULL cast to the task table's type, e.g. fencelock.claim(NULL::jobs, worker => 'w-1')."
#define CLAIM_FENCE_HINT "Pass the fence of the row that claim returned."

static const FlTextArg worker_arg = {"worker", FENCELOCK_MAX_OWNER_LEN,
									 "Pass a non-empty text value that names the worker.",
									 "Use a shorter worker name."};

/* The task table named by a regclass argument. */
static TaskTable *
arg_table(FunctionCallInfo fcinfo, int argno)
{
	Oid relid;

	fl_arg_not_null(fcinfo, argno, "tbl", "Pass the task table, e.g. 'jobs'.");
	relid = PG_GETARG_OID(argno);
	check_relation(relid);
	return task_table(relid);
}

/*
 * The id argument as a value of the table's key type: assignment casts apply (an integer for a
 * bigint key), and text is read as the key type's input (a quoted literal for a uuid key).
 */
static Datum
arg_id(FunctionCallInfo fcinfo, int argno, TaskTable *tt)
{
	Oid argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	int16 typlen;
	bool typbyval;
	Node *expr;

	fl_arg_not_null(fcinfo, argno, "id", "Pass the primary key of the task's row.");
	if (tt->npk != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has a primary key of %d columns", tt->relname, tt->npk),
				 errhint("The helpers take a single-column key; write the UPDATE yourself, "
						 "setting the fence column to the claim's fence.")));
	if (argtype == tt->pktype)
		return PG_GETARG_DATUM(argno);

	get_typlenbyval(argtype, &typlen, &typbyval);
	expr = (Node *) makeConst(argtype, -1, get_typcollation(argtype), typlen,
							  PG_GETARG_DATUM(argno), false, typbyval);
	expr = coerce_to_target_type(NULL, expr, argtype, tt->pktype, -1,
								 argtype == TEXTOID ? COERCION_EXPLICIT : COERCION_ASSIGNMENT,
								 COERCE_IMPLICIT_CAST, -1);
	if (expr == NULL)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("id of type %s does not match the primary key column \"%s\" of "
							   "type %s",
							   format_type_be(argtype), tt->pkname, format_type_be(tt->pktype)),
						errhint("Pass the id as a %s value.", format_type_be(tt->pktype))));
	expr = (Node *) evaluate_expr((Expr *) expr, tt->pktype, -1, InvalidOid);
	return ((Const *) expr)->constvalue;
}

/* ---------------------------------------------------------------------------------------------
 * enable_tasks
 * ---------------------------------------------------------------------------------------------
 */

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
		keys[n++] = find_column(rel, NameStr(map->cols[COL_PRIORITY]))->attnum;
	if (NameStr(map->cols[COL_RUN_AFTER])[0] != '\0')
		keys[n++] = find_column(rel, NameStr(map->cols[COL_RUN_AFTER]))->attnum;
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
 * The wake triggers (taskwait.c): the commit of an INSERT of claimable rows, or of an UPDATE
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
	Datum cols[NUM_TASK_COLS];
	bool colnulls[NUM_TASK_COLS];
	int dims[1] = {NUM_TASK_COLS};
	int lbs[1] = {1};
	Datum values[6];
	NameData index_name;
	FlSession session;
	const char *trigger_fn;

	fl_arg_not_null(fcinfo, 0, "tbl", "Pass the task table, e.g. 'jobs'.");
	relid = PG_GETARG_OID(0);
	arg_backoff_policy(fcinfo, NUM_TASK_COLS + 1, &values[3]);
	for (int i = 0; i < NUM_TASK_COLS; i++)
	{
		/* The 0.2.0 signature has no finished_at_col. */
		if (i + 1 >= PG_NARGS() || PG_ARGISNULL(i + 1))
		{
			if (task_cols[i].required)
				ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								errmsg("%s_col must not be null", task_cols[i].name),
								errhint("Name the column that holds the %s, or leave the "
										"argument out for \"%s\".",
										task_cols[i].name, task_cols[i].name)));
			names[i] = NULL;
		}
		else
			names[i] = NameStr(*PG_GETARG_NAME(i + 1));
	}

	check_relation(relid);
	/* Before any lock: a non-owner must not queue behind, and block, the table's writers. */
	if (!FL_CLASS_OWNERCHECK(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	/* Serializes enable_tasks on the table, and conflicts with every writer of it. */
	rel = table_open(relid, ShareRowExclusiveLock);
	check_columns(rel, names, true, &map);
	refuse_inheritance_children(relid);
	nsp = RelationGetNamespace(rel);
	qualname = quote_qualified_identifier(get_namespace_name(nsp), RelationGetRelationName(rel));

	/* Called again: keep the index unless its columns change (or it was dropped). */
	nkeys = claim_index_keys(rel, &map, keys);
	enabled = read_map(relid, &old_map, &old_index);
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
	require_fence_trigger(rel, rel, NameStr(map.cols[COL_FENCE]));
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		ListCell *lc;

		foreach (lc, find_all_inheritors(relid, NoLock, NULL))
		{
			Relation prel;

			if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_RELATION)
				continue;
			prel = table_open(lfirst_oid(lc), NoLock);
			require_fence_trigger(prel, rel, NameStr(map.cols[COL_FENCE]));
			table_close(prel, NoLock);
		}
	}
	table_close(rel, NoLock);

	for (int i = 0; i < NUM_TASK_COLS; i++)
	{
		cols[i] = NameGetDatum(&map.cols[i]);
		colnulls[i] = NameStr(map.cols[i])[0] == '\0';
	}
	values[0] = ObjectIdGetDatum(relid);
	values[1] = PointerGetDatum(construct_md_array(cols, colnulls, 1, dims, lbs, NAMEOID,
												   NAMEDATALEN, false, TYPALIGN_CHAR));
	namestrcpy(&index_name, get_rel_name(index));
	values[2] = NameGetDatum(&index_name);

	fl_begin(&session);
	fl_run(task_tables_v030(fl_extension_schema()) ? &map_upsert : &map_upsert_020, values, NULL,
		   false);
	fl_run(&map_prune, NULL, NULL, false);
	fl_end(&session);

	/* Every backend builds the table's statements again. */
	CacheInvalidateRelcacheByRelid(relid);
	PG_RETURN_VOID();
}

/* ---------------------------------------------------------------------------------------------
 * claim, heartbeat, complete, fail
 * ---------------------------------------------------------------------------------------------
 */

/*
 * Claim's result must have the columns the statement was built for, of the table's types: the
 * relation, the table's live columns, then (claim_dead's) whether the row was exhausted.
 */
static void
claim_check_result(TaskTable *tt, TupleDesc desc, TupleDesc rdesc, bool dead)
{
	int col = CLAIM_LEAD_COLS;

	check_result_column(tt, rdesc, 1, OIDOID, -1);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped)
			check_result_column(tt, rdesc, ++col, att->atttypid, att->atttypmod);
	}
	if (dead)
		check_result_column(tt, rdesc, ++col, BOOLOID, -1);
	if (rdesc->natts != col)
		check_result_column(tt, rdesc, col + 1, InvalidOid, -1);
	check_result_relations(tt);
}

/* A row claim could not raise: a warning that names it. */
static void
claim_warn_exhausted(TaskTable *tt, HeapTuple tuple, TupleDesc rdesc)
{
	StringInfoData names;
	StringInfoData values;

	initStringInfo(&names);
	initStringInfo(&values);
	for (int i = 0; i < tt->npk; i++)
	{
		char *v = SPI_getvalue(tuple, rdesc, CLAIM_LEAD_COLS + tt->pkpos[i]);

		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(SPI_fname(rdesc, CLAIM_LEAD_COLS + tt->pkpos[i])));
		appendStringInfo(&values, "%s%s", i > 0 ? ", " : "", v != NULL ? v : "null");
	}
	ereport(WARNING,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("task (%s)=(%s) of table \"%s\" cannot be claimed: its fence or attempt is at "
					"its maximum",
					names.data, values.data, tt->relname),
			 errdetail("Its fence is %s, its attempt %s. The row was made dead, so that the other "
					   "rows stay claimable.",
					   SPI_getvalue(tuple, rdesc, CLAIM_LEAD_COLS + tt->pos_fence),
					   SPI_getvalue(tuple, rdesc, CLAIM_LEAD_COLS + tt->pos_attempt)),
			 errhint("To run it again, delete the row and insert it again with a fence above "
					 "every fence a worker may still hold and a lower attempt.")));
}

typedef struct ClaimSortArg
{
	TaskTable *tt;
	TupleDesc rdesc;
	SortSupportData *ssup;
} ClaimSortArg;

static int
claim_cmp(const void *a, const void *b, void *arg)
{
	ClaimSortArg *c = (ClaimSortArg *) arg;
	HeapTuple ta = *(const HeapTuple *) a;
	HeapTuple tb = *(const HeapTuple *) b;

	for (int i = 0; i < c->tt->nsort; i++)
	{
		bool na;
		bool nb;
		Datum da = heap_getattr(ta, c->tt->sortpos[i], c->rdesc, &na);
		Datum db = heap_getattr(tb, c->tt->sortpos[i], c->rdesc, &nb);
		int r = ApplySortComparator(da, na, db, nb, &c->ssup[i]);

		if (r != 0)
			return r;
	}
	return 0;
}

/* Put the last statement's rows into claim order (ORDER BY's: ascending, nulls last). */
static void
claim_sort(TaskTable *tt)
{
	ClaimSortArg arg;

	if (SPI_processed < 2)
		return;
	arg.tt = tt;
	arg.rdesc = SPI_tuptable->tupdesc;
	arg.ssup = palloc0(tt->nsort * sizeof(SortSupportData));
	for (int i = 0; i < tt->nsort; i++)
	{
		arg.ssup[i].ssup_cxt = CurrentMemoryContext;
		arg.ssup[i].ssup_collation = tt->sortcoll[i];
		arg.ssup[i].ssup_nulls_first = false;
		PrepareSortSupportFromOrderingOp(tt->sortop[i], &arg.ssup[i]);
	}
	qsort_arg(SPI_tuptable->vals, SPI_processed, sizeof(HeapTuple), claim_cmp, &arg);
}

/*
 * Put the rows claim took into the result, in claim order; returns how many.  Nothing is copied
 * before the result is known to be the table's rows.
 */
static int64
claim_collect(TaskTable *tt, ReturnSetInfo *rsinfo, Datum *row, bool *rownulls)
{
	TupleDesc desc = rsinfo->setDesc;
	TupleDesc rdesc = SPI_tuptable->tupdesc;

	claim_check_result(tt, desc, rdesc, false);
	claim_sort(tt);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple tuple = SPI_tuptable->vals[r];
		int col = CLAIM_LEAD_COLS;

		/* The table's live columns, in order; the row type's dropped columns are null. */
		for (int i = 0; i < desc->natts; i++)
		{
			if (TupleDescAttr(desc, i)->attisdropped)
			{
				row[i] = (Datum) 0;
				rownulls[i] = true;
				continue;
			}
			row[i] = heap_getattr(tuple, ++col, rdesc, &rownulls[i]);
		}
		tuplestore_putvalues(rsinfo->setResult, desc, row, rownulls);
	}
	return (int64) SPI_processed;
}

/* The rows claim_dead made dead: a warning for each that was exhausted; returns how many. */
static int64
claim_collect_dead(TaskTable *tt, ReturnSetInfo *rsinfo)
{
	TupleDesc rdesc = SPI_tuptable->tupdesc;

	claim_check_result(tt, rsinfo->setDesc, rdesc, true);
	claim_sort(tt);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool isnull;

		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[r], rdesc, rdesc->natts, &isnull)))
			claim_warn_exhausted(tt, SPI_tuptable->vals[r], rdesc);
	}
	return (int64) SPI_processed;
}

/*
 * One claim of up to max_rows rows into the result; the caller is connected to SPI.  Returns how
 * many rows it claimed; commits durably when it changed any row.
 */
static int64
claim_once(TaskTable *tt, ReturnSetInfo *rsinfo, text *worker, int64 ttl, int32 max_rows,
		   Datum *row, bool *rownulls, int64 *marked_out)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum values[CLAIM_NARGS];
	int64 claimed = 0;
	int64 dead = 0;
	int64 marked = 0;

	values[0] = TimestampTzGetDatum(now);
	values[1] = PointerGetDatum(worker);
	values[2] = TimestampTzGetDatum(now + ttl);
	values[3] = Int64GetDatum(fl_timeline_base());
	/*
	 * Rows claim cannot take are locked and left by the claim, taking places among max_rows:
	 * claim_dead makes them dead, then claim runs again for those places.  claim_dead runs only
	 * when a claim returned fewer rows than asked, and every round but the last makes a row dead,
	 * so this ends; usually there is a single statement.
	 */
	for (;;)
	{
		values[4] = Int64GetDatum((int64) max_rows - claimed);
		task_run(tt, STMT_CLAIM, CLAIM_NARGS, claim_argtypes, values, NULL);
		claimed += claim_collect(tt, rsinfo, row, rownulls);
		if (claimed >= max_rows)
			break;
		values[4] = Int64GetDatum((int64) max_rows - claimed);
		task_run(tt, STMT_CLAIM_DEAD, CLAIM_NARGS, claim_argtypes, values, NULL);
		dead = claim_collect_dead(tt, rsinfo);
		marked += dead;
		if (dead == 0)
			break;
	}

	/* As for acquire: a crash must not hand a claim's fence to a second worker. */
	if (claimed > 0 || marked > 0)
		fl_commit_durably();
	*marked_out = marked;
	return claimed;
}

/*
 * One attempt of a waiting claim, in a subtransaction rolled back when it changed nothing: a
 * claim whose UPDATE met a row being changed by another transaction may have locked the newest
 * version to re-check it, and a waiter must not sleep holding that lock.
 */
static int64
claim_attempt(Oid relid, ReturnSetInfo *rsinfo, text *worker, int64 ttl, int32 max_rows, Datum *row,
			  bool *rownulls, int64 *marked)
{
	FlSubxact x;
	int64 claimed = 0;

	*marked = 0;
	fl_subxact_begin(&x);
	PG_TRY();
	{
		TaskTable *tt = task_table(relid);

		fl_spi_connect();
		claimed = claim_once(tt, rsinfo, worker, ttl, max_rows, row, rownulls, marked);
		fl_spi_finish();
	}
	PG_CATCH();
	{
		fl_subxact_end(&x, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fl_subxact_end(&x, claimed > 0 || *marked > 0);
	return claimed;
}

/*
 * claim(..., wait => ...): claim; when nothing is claimable, wait until a commit makes rows
 * claimable (taskwait.c) or the deadline passes, trying again at least every
 * fencelock.claim_recheck.  Returns, without waiting longer, once a claim changed any row (rows
 * claimed, or rows made dead, whose locks must not be held through a wait).
 */
static void
claim_waiting(Oid relid, ReturnSetInfo *rsinfo, text *worker, int64 ttl, int32 max_rows,
			  int64 wait_us, Datum *row, bool *rownulls)
{
	TimestampTz deadline = GetCurrentTimestamp() + wait_us;
	TaskTable *tt = task_table(relid);
	int64 marked;
	volatile int64 claimed = 0;

	if (!tt->has_wake)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no enabled wake triggers", tt->relname),
				 errdetail("A waiting claim is woken by triggers %s and %s, which enable_tasks "
						   "installs since fencelock 0.3.0.",
						   WAKE_INSERT_TRIGGER_NAME, WAKE_TRIGGER_NAME),
				 errhint("Run SELECT fencelock.enable_tasks('%s') again.",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													tt->relname))));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("a waiting claim needs the READ COMMITTED isolation level"),
						errdetail("With a transaction snapshot, rows committed while it waits stay "
								  "invisible."),
						errhint("Claim in a READ COMMITTED transaction, or leave out wait.")));

	/* Registered before the first look: a commit in between still wakes us. */
	fl_task_wait_enter(relid, max_rows);
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;

			claimed = claim_attempt(relid, rsinfo, worker, ttl, max_rows, row, rownulls, &marked);
			if (claimed > 0 || marked > 0)
				break;
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			fl_task_wait_sleep(
				(long) Min((deadline - now + 999) / 1000, (int64) fencelock_claim_recheck_ms));
		}
	}
	PG_FINALLY();
	{
		fl_task_wait_leave();
	}
	PG_END_TRY();
	/* A full batch: more rows may be there, for the next waiter (not this one: it has left). */
	if (claimed == max_rows)
		fl_task_wake_next(relid);
}

Datum
fencelock_claim(PG_FUNCTION_ARGS)
{
	Oid argtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid relid = OidIsValid(argtype) ? get_typ_typrelid(argtype) : InvalidOid;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text *worker;
	int64 ttl;
	int32 max_rows;
	TaskTable *tt;
	Datum *row;
	bool *rownulls;
	int64 marked;
	int64 wait_us = 0;
	bool waiting = false;

	if (!OidIsValid(argtype))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("fencelock.claim needs a table's row type, not a value of unknown "
							   "type"),
						errhint(CLAIM_TASKS_HINT)));
	if (!OidIsValid(relid))
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
						errmsg("fencelock.claim needs a table's row type, not %s",
							   format_type_be(argtype)),
						errhint(CLAIM_TASKS_HINT)));
	check_relation(relid);
	worker = fl_arg_text(fcinfo, 1, &worker_arg);
	ttl = fl_arg_ttl(fcinfo, 2);
	max_rows = fl_arg_count(fcinfo, 3, "max_rows", "Pass a positive number of rows.");

	/* wait: NULL (or the 0.2.0 signature without it) does not wait. */
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
	{
		wait_us = fl_arg_wait(
			fcinfo, 4, "Pass an interval such as '30 seconds', or leave wait out not to wait.");
		waiting = wait_us > 0;
	}

	tt = task_table(relid);
	InitMaterializedSRF(fcinfo, 0);
	row = palloc(Max(rsinfo->setDesc->natts, 1) * sizeof(Datum));
	rownulls = palloc(Max(rsinfo->setDesc->natts, 1) * sizeof(bool));

	if (waiting)
	{
		claim_waiting(relid, rsinfo, worker, ttl, max_rows, wait_us, row, rownulls);
		return (Datum) 0;
	}
	fl_spi_connect();
	(void) claim_once(tt, rsinfo, worker, ttl, max_rows, row, rownulls, &marked);
	fl_spi_finish();
	return (Datum) 0;
}

/* The key as text, for messages. */
static char *
key_text(TaskTable *tt, Datum id)
{
	Oid typoutput;
	bool isvarlena;

	getTypeOutputInfo(tt->pktype, &typoutput, &isvarlena);
	return OidOutputFunctionCall(typoutput, id);
}

pg_noreturn static void wrong_fence(TaskTable *tt, Oid tableoid, Datum id, int64 fence,
									bool stored_null, int64 stored);

/*
 * A helper carried a fence other than the row's: an older one (its claim is over) or one never
 * issued for the row.  Either way the caller does not hold the row; the row is left as it is.
 */
static void
wrong_fence(TaskTable *tt, Oid tableoid, Datum id, int64 fence, bool stored_null, int64 stored)
{
	char *key = key_text(tt, id);

	fl_count_table(tableoid, true);
	if (!stored_null && fence < stored)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is older than the stored fence " INT64_FORMAT,
						fence, stored),
				 errdetail("Table \"%s\", task (%s)=(%s): the task was claimed again or declared "
						   "dead.",
						   tt->relname, tt->pkname, key),
				 errhint("This worker has lost its claim: roll back and stop; do not retry with "
						 "the same fence.")));
	if (stored_null)
		ereport(
			ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg("fence " INT64_FORMAT " was never issued for the task: it has no fence", fence),
			 errdetail("Table \"%s\", task (%s)=(%s): heartbeat, complete and fail carry "
					   "exactly the fence that claim returned.",
					   tt->relname, tt->pkname, key),
			 errhint("This worker does not hold the task: roll back and stop.")));
	ereport(
		ERROR,
		(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
		 errmsg("fence " INT64_FORMAT " was never issued for the task: its fence is " INT64_FORMAT,
				fence, stored),
		 errdetail("Table \"%s\", task (%s)=(%s): heartbeat, complete and fail carry exactly "
				   "the fence that claim returned.",
				   tt->relname, tt->pkname, key),
		 errhint("This worker does not hold the task: roll back and stop.")));
}

/*
 * heartbeat, complete and fail: update the row with key id if it is running under exactly the
 * caller's fence.  True when it was (SPI_tuptable holds what the UPDATE returned); otherwise
 * *state is the row's state (NULL without such a row), copied into the caller's memory context
 * (SPI_palloc): the caller reads it after SPI_finish, which frees everything SPI allocated.  Any
 * other fence raises FL001 and changes nothing.  The caller is connected to SPI.
 */
static bool
row_update(TaskTable *tt, TaskStmt stmt, Datum id, int64 fence, Datum *extra,
		   const char *extra_nulls, int nextra, char **state)
{
	Oid argtypes[ROW_MAX_NARGS] = {tt->pktype,     INT8OID,   TIMESTAMPTZOID, TEXTOID,
								   TIMESTAMPTZOID, FLOAT8OID, FLOAT8OID,      FLOAT8OID};
	Datum values[ROW_MAX_NARGS];
	char nulls[ROW_MAX_NARGS];
	TupleDesc rdesc;
	HeapTuple tuple;
	Oid tableoid;
	bool isnull;
	bool fence_null;
	int64 stored;
	Datum d;

	values[0] = id;
	values[1] = Int64GetDatum(fence);
	nulls[0] = nulls[1] = ' ';
	for (int i = 0; i < nextra; i++)
	{
		values[i + 2] = extra[i];
		nulls[i + 2] = extra_nulls[i];
	}
	if (task_run(tt, stmt, 2 + nextra, argtypes, values, nulls) > 0)
	{
		if (stmt == STMT_FAIL)
			check_result_column(tt, SPI_tuptable->tupdesc, 2, tt->state_type, -1);
		check_result_relations(tt);
		return true;
	}

	/* Nothing updated: no such row, another fence, or not running. */
	*state = NULL;
	if (task_run(tt, STMT_READ, 1, argtypes, values, nulls) == 0)
		return false;
	rdesc = SPI_tuptable->tupdesc;
	tuple = SPI_tuptable->vals[0];
	check_result_column(tt, rdesc, 1, OIDOID, -1);
	check_result_column(tt, rdesc, 2, tt->fence_type, -1);
	check_result_column(tt, rdesc, 3, tt->state_type, -1);
	tableoid = DatumGetObjectId(SPI_getbinval(tuple, rdesc, 1, &isnull));
	check_result_relation(tt, tableoid);
	d = SPI_getbinval(tuple, rdesc, 2, &fence_null);
	stored = fence_null ? 0 : DatumGetInt64(d);
	if (fence_null || stored != fence)
		wrong_fence(tt, tableoid, id, fence, fence_null, stored);
	d = SPI_getbinval(tuple, rdesc, 3, &isnull);
	if (!isnull)
	{
		char *s = TextDatumGetCString(d);
		size_t len = strlen(s) + 1;

		*state = memcpy(SPI_palloc(len), s, len);
	}
	return false;
}

Datum
fencelock_heartbeat(PG_FUNCTION_ARGS)
{
	TaskTable *tt = arg_table(fcinfo, 0);
	Datum id = arg_id(fcinfo, 1, tt);
	int64 fence = fl_arg_fence(fcinfo, 2, CLAIM_FENCE_HINT);
	int64 ttl = fl_arg_ttl(fcinfo, 3);
	Datum extra[1];
	char *state;
	bool updated;

	extra[0] = TimestampTzGetDatum(GetCurrentTimestamp() + ttl);
	fl_spi_connect();
	updated = row_update(tt, STMT_HEARTBEAT, id, fence, extra, " ", 1, &state);
	fl_spi_finish();
	PG_RETURN_BOOL(updated);
}

Datum
fencelock_complete(PG_FUNCTION_ARGS)
{
	TaskTable *tt = arg_table(fcinfo, 0);
	Datum id = arg_id(fcinfo, 1, tt);
	int64 fence = fl_arg_fence(fcinfo, 2, CLAIM_FENCE_HINT);
	char *state;
	bool updated;

	fl_spi_connect();
	updated = row_update(tt, STMT_COMPLETE, id, fence, NULL, NULL, 0, &state);
	fl_spi_finish();
	/* Already done under this very fence: a retry after a lost reply, answered the same. */
	PG_RETURN_BOOL(updated || (state != NULL && strcmp(state, "done") == 0));
}

Datum
fencelock_fail(PG_FUNCTION_ARGS)
{
	TaskTable *tt = arg_table(fcinfo, 0);
	Datum id = arg_id(fcinfo, 1, tt);
	int64 fence = fl_arg_fence(fcinfo, 2, CLAIM_FENCE_HINT);
	Datum extra[6] = {0};
	char extra_nulls[6] = {'n', 'n', 'n', 'n', 'n', 'n'};
	Datum state = (Datum) 0;
	char *old_state;
	bool updated;
	bool ready_later; /* a backoff: claimable only after run_after */

	if (!PG_ARGISNULL(3))
	{
		if (!tt->has[COL_LAST_ERROR])
			ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
							errmsg("table \"%s\" has no column for the error", tt->relname),
							errhint("Add a last_error text column and run "
									"fencelock.enable_tasks again, or pass error => NULL.")));
		extra[1] = PG_GETARG_DATUM(3);
		extra_nulls[1] = ' ';
	}
	if (!PG_ARGISNULL(4))
	{
		Interval *backoff = PG_GETARG_INTERVAL_P(4);
		int64 backoff_us;

		if (!tt->has[COL_RUN_AFTER])
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("table \"%s\" has no run_after column for the backoff", tt->relname),
					 errhint("Add a run_after timestamptz column and run "
							 "fencelock.enable_tasks again, or pass backoff => NULL.")));
		backoff_us = fl_arg_interval(fcinfo, 4, "backoff", "Pass an interval such as '1 minute'.");
		extra[0] =
			DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(GetCurrentTimestamp()),
								IntervalPGetDatum(backoff));
		extra_nulls[0] = ' ';
		ready_later = backoff_us > 0;
	}
	else if (tt->map.backoff_max_s < 0)
		ready_later = false; /* no policy (0.2.0 objects): run_after stays */
	else
	{
		ready_later = tt->has[COL_RUN_AFTER] && tt->map.backoff_base_s > 0;
		/* No backoff given: the table's policy (enable_tasks' backoff_base, _max, _jitter). */
		extra[2] = TimestampTzGetDatum(GetCurrentTimestamp());
		extra[3] = Float8GetDatum(tt->map.backoff_base_s);
		extra[4] = Float8GetDatum(tt->map.backoff_max_s);
		extra[5] = Float8GetDatum(tt->map.backoff_jitter);
		memset(extra_nulls + 2, ' ', 4);
	}

	fl_spi_connect();
	updated = row_update(tt, STMT_FAIL, id, fence, extra, extra_nulls, 6, &old_state);
	if (updated)
	{
		bool isnull;

		/* The new state, copied out of SPI's memory before SPI_finish. */
		state = SPI_datumTransfer(
			SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull), false, -1);
		/* Ready again at once: its commit wakes a waiting claim. */
		if (!ready_later && strcmp(TextDatumGetCString(state), "ready") == 0)
			fl_task_wake_pending(DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
																SPI_tuptable->tupdesc, 1, &isnull)),
								 1, false);
	}
	fl_spi_finish();
	/* Not running under this fence (done, dead, ready again, or no such row): nothing changed. */
	if (!updated)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(state);
}

/* ---------------------------------------------------------------------------------------------
 * purge_tasks
 * ---------------------------------------------------------------------------------------------
 */

/*
 * purge_tasks(tbl, older_than, include_dead, batch_size): delete the rows that finished (done,
 * and dead with include_dead) more than older_than ago, batch_size rows per statement, skipping
 * rows that anyone holds locked; returns how many.  Runs as the caller, who needs DELETE on the
 * table (and UPDATE, for the row locks of SKIP LOCKED).
 */
Datum
fencelock_purge_tasks(PG_FUNCTION_ARGS)
{
	TaskTable *tt = arg_table(fcinfo, 0);
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
		n = task_run(tt, STMT_PURGE, lengthof(purge_argtypes), purge_argtypes, values, NULL);
		if (n > 0)
			check_result_relations(tt);
		total += n;
	} while (n == (uint64) batch);
	fl_spi_finish();
	PG_RETURN_INT64(total);
}

/* ---------------------------------------------------------------------------------------------
 * complete_all
 * ---------------------------------------------------------------------------------------------
 */

/* An array argument converted to an array of type elemtype (assignment casts), without nulls. */
static ArrayType *
arg_array(FunctionCallInfo fcinfo, int argno, const char *what, Oid elemtype)
{
	Oid argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Oid target = get_array_type(elemtype);
	Datum d;
	ArrayType *a;

	fl_arg_not_null(fcinfo, argno, what, "Pass an array with one element per task.");
	d = PG_GETARG_DATUM(argno);
	if (argtype != target)
	{
		Node *expr =
			(Node *) makeConst(argtype, -1, get_typcollation(argtype), -1, d, false, false);

		expr = coerce_to_target_type(NULL, expr, argtype, target, -1, COERCION_ASSIGNMENT,
									 COERCE_IMPLICIT_CAST, -1);
		if (expr == NULL || !OidIsValid(target))
			ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
							errmsg("%s of type %s do not match type %s", what,
								   format_type_be(argtype), format_type_be(elemtype)),
							errhint("Pass the %s as a %s array.", what, format_type_be(elemtype))));
		d = ((Const *) evaluate_expr((Expr *) expr, target, -1, InvalidOid))->constvalue;
	}
	a = DatumGetArrayTypeP(d);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("%s must be a one-dimensional array", what)));
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not contain nulls", what),
				 errhint("Pass one %s per task.", what)));
	return a;
}

static int64 complete_all_count(TaskTable *tt, ArrayType *ids, ArrayType *fences, int n,
								Oid *argtypes, Datum *values);

/*
 * complete_all(tbl, ids, fences): complete in one statement every row of ids that is running
 * under exactly the fence at the same place in fences; returns how many of the rows are done under
 * their fence now (also those that were already: a retry after a lost reply).  A row whose fence
 * is another raises FL001, and nothing is completed; rows that do not exist or are not running
 * are left as they are and not counted.
 */
Datum
fencelock_complete_all(PG_FUNCTION_ARGS)
{
	TaskTable *tt = arg_table(fcinfo, 0);
	ArrayType *ids;
	ArrayType *fences;
	int n;
	Oid argtypes[2];
	Datum values[2];
	uint64 updated;
	int64 done;

	if (tt->npk != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has a primary key of %d columns", tt->relname, tt->npk),
				 errhint("The helpers take a single-column key; write the UPDATE yourself, "
						 "setting the fence column to the claim's fence.")));
	ids = arg_array(fcinfo, 1, "ids", tt->pktype);
	fences = arg_array(fcinfo, 2, "fences", INT8OID);
	n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
	if (n != ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences)))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("ids and fences differ in length (%d and %d)", n,
							   ArrayGetNItems(ARR_NDIM(fences), ARR_DIMS(fences))),
						errhint("Pass one fence per id, in the same order.")));
	if (n == 0)
		PG_RETURN_INT64(0);
	argtypes[0] = get_array_type(tt->pktype);
	argtypes[1] = INT8ARRAYOID;
	values[0] = PointerGetDatum(ids);
	values[1] = PointerGetDatum(fences);

	fl_spi_connect();
	updated = task_run(tt, STMT_COMPLETE_ALL, 2, argtypes, values, NULL);
	if (updated > 0)
		check_result_relations(tt);
	if (updated < (uint64) n)
		done = complete_all_count(tt, ids, fences, n, argtypes, values);
	else
		done = n;
	fl_spi_finish();
	PG_RETURN_INT64(done);
}

/*
 * After complete_all updated fewer rows than it was given: raise FL001 for a row under another
 * fence, else count the rows that are done (also those that were already: a retry).
 */
static int64
complete_all_count(TaskTable *tt, ArrayType *ids, ArrayType *fences, int n, Oid *argtypes,
				   Datum *values)
{
	int64 done = 0;
	int64 *fence_of;
	bool *seen;

	fence_of = palloc(n * sizeof(int64));
	seen = palloc0(n * sizeof(bool));
	{
		Datum *elems;
		bool *nulls;
		int nelems;

		deconstruct_array(fences, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls,
						  &nelems);
		for (int i = 0; i < n; i++)
			fence_of[i] = DatumGetInt64(elems[i]);
	}
	task_run(tt, STMT_READ_ALL, 1, argtypes, values, NULL);
	{
		TupleDesc rdesc = SPI_tuptable->tupdesc;

		check_result_column(tt, rdesc, 1, OIDOID, -1);
		check_result_column(tt, rdesc, 2, INT8OID, -1);
		check_result_column(tt, rdesc, 3, tt->fence_type, -1);
		check_result_column(tt, rdesc, 4, tt->state_type, -1);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple tuple = SPI_tuptable->vals[r];
			bool isnull;
			bool fence_null;
			Oid tableoid = DatumGetObjectId(SPI_getbinval(tuple, rdesc, 1, &isnull));
			int64 i = DatumGetInt64(SPI_getbinval(tuple, rdesc, 2, &isnull)) - 1;
			Datum f = SPI_getbinval(tuple, rdesc, 3, &fence_null);
			Datum st;
			Datum id;

			check_result_relation(tt, tableoid);
			if (i < 0 || i >= n)
				elog(ERROR, "complete_all: ordinality out of range");
			if (fence_null || DatumGetInt64(f) != fence_of[i])
			{
				bool idnull;
				int16 typlen;
				bool typbyval;
				char typalign;
				int index = (int) i + 1;

				get_typlenbyvalalign(tt->pktype, &typlen, &typbyval, &typalign);
				id = array_get_element(PointerGetDatum(ids), 1, &index, -1, typlen, typbyval,
									   typalign, &idnull);
				wrong_fence(tt, tableoid, id, fence_of[i], fence_null,
							fence_null ? 0 : DatumGetInt64(f));
			}
			st = SPI_getbinval(tuple, rdesc, 4, &isnull);
			if (!isnull && !seen[i] && strcmp(TextDatumGetCString(st), "done") == 0)
			{
				seen[i] = true;
				done++;
			}
		}
	}
	return done;
}
