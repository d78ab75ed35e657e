/*
 * claim/table.c — a task table and its columns: the convention a table must follow, the fence and
 * wake triggers it must carry, and its row in fencelock.task_tables (claim/claim.h lists the
 * files).
 *
 * The convention: the parts state, lease_owner, lease_until, attempt and fence, the optional
 * run_after, priority, max_attempts, last_error and finished_at, each an ordinary column of the
 * documented type (those claim writes outside the primary key), and a primary key.  The row in
 * fencelock.task_tables records which column plays each part (enable_tasks writes it, every
 * backend reads it when it builds the table's statements), the claim index's name and the backoff
 * policy; its statements run as the extension's owner.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "base/asowner.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "claim/claim.h"
#include "commands/trigger.h"
#include "compat.h"
#include "lib/stringinfo.h"
#include "fence/trigger.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/* The wake trigger's C function (wait/taskqueue.c): how a waiting claim knows that commits wake it.
 */
extern PGDLLEXPORT Datum fencelock_task_wake(PG_FUNCTION_ARGS);

const TaskColSpec fl_task_cols[NUM_TASK_COLS] = {
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

/*
 * fencelock.task_tables itself: a change of its definition (ALTER EXTENSION ... UPDATE adds
 * columns) makes every table's statements and mapping be read again (claim/cache.c).
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

/* Rows of tables a command drops (the sql_drop event trigger, fence/inhguard.c). */
static FlStmt map_forget = {"DELETE FROM fencelock.task_tables AS c "
							" WHERE c.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
							1,
							{OIDARRAYOID}};

/* Task tables are ordinary or partitioned tables, and not temporary. */
void
fl_task_check_relation(Oid relid)
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

Form_pg_attribute
fl_task_find_column(Relation rel, const char *name)
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

/* fl_task_check_columns' hint: what to run, or what to change. */
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
void
fl_task_check_columns(Relation rel, const char *const names[NUM_TASK_COLS], bool find_optional,
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
		const TaskColSpec *spec = &fl_task_cols[i];
		const char *name = names[i] != NULL ? names[i] : spec->name;
		bool conventional = strcmp(name, spec->name) == 0; /* else the message names the part */
		Form_pg_attribute att;

		if (names[i] == NULL && !spec->required && !find_optional)
			continue;
		att = fl_task_find_column(rel, name);
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
								 name, fl_task_cols[j].name, spec->name);
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
 * fencelock.task_tables's OID as this backend last looked it up (InvalidOid before): its relcache
 * invalidation makes the cache read every table again.
 */
Oid
fl_task_tables_oid(void)
{
	return task_tables_relid;
}

/*
 * Read the table's row of fencelock.task_tables; false when it has none.  *claim_index (unless
 * claim_index is NULL) is the index of the recorded name in the table's schema, if there is one (a
 * name, not a regclass: pg_dump restores the row before it builds the index); only enable_tasks
 * needs it, to keep or replace the index.
 */
bool
fl_task_read_map(Oid relid, TaskMap *map, Oid *claim_index)
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
 * Record the table's columns, its claim index and its backoff policy (policy: enable_tasks'
 * backoff_base, backoff_max and backoff_jitter, as interval, interval and text) in
 * fencelock.task_tables, and forget the rows of tables dropped since they were enabled.
 */
void
fl_task_write_map(Oid relid, const TaskMap *map, Oid claim_index, const Datum *policy)
{
	Datum cols[NUM_TASK_COLS];
	bool colnulls[NUM_TASK_COLS];
	int dims[1] = {NUM_TASK_COLS};
	int lbs[1] = {1};
	Datum values[6];
	NameData index_name;
	FlSession session;

	for (int i = 0; i < NUM_TASK_COLS; i++)
	{
		cols[i] = NameGetDatum(&map->cols[i]);
		colnulls[i] = NameStr(map->cols[i])[0] == '\0';
	}
	values[0] = ObjectIdGetDatum(relid);
	values[1] = PointerGetDatum(construct_md_array(cols, colnulls, 1, dims, lbs, NAMEOID,
												   NAMEDATALEN, false, TYPALIGN_CHAR));
	namestrcpy(&index_name, get_rel_name(claim_index));
	values[2] = NameGetDatum(&index_name);
	memcpy(&values[3], policy, 3 * sizeof(Datum));

	fl_begin(&session);
	fl_run(task_tables_v030(fl_extension_schema()) ? &map_upsert : &map_upsert_020, values, NULL,
		   false);
	fl_run(&map_prune, NULL, NULL, false);
	fl_end(&session);
}

/*
 * Whether a function is the wake trigger: a C function whose symbol, loaded, is this library's
 * fencelock_task_wake.  Not by name: a schema planted under the name "fencelock" could hold a
 * function called task_wake that wakes nothing.  (The fence trigger is recognised the same way,
 * by fl_is_fence_trigger in fence/trigger.c.)
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

/* Whether the table has enabled AFTER statement triggers on INSERT and on UPDATE that wake. */
bool
fl_task_has_wake_trigger(Relation rel)
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
 * Whether the table has an enabled BEFORE UPDATE row trigger, without a WHEN condition or a column
 * list (UPDATE OF fires only when a listed column is assigned: a stale holder's write that assigns
 * none would pass unchecked), that calls the fence trigger function on the fence column.  Checked
 * in the order that loads no function whose symbol is not the fence trigger's (310).
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
			tg->tgqual == NULL && strcmp(col, fence_col) == 0 && fl_is_fence_trigger(tg->tgfoid) &&
			tg->tgnattr == 0)
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
 * Refuse the task table unless it, and each of its partitions at every level that holds rows, has
 * the fence trigger on fence_col.  Returns the table and its partitions (find_all_inheritors',
 * locked with lockmode), or NIL for a table that is not partitioned.
 */
List *
fl_task_require_fence_triggers(Relation rel, const char *fence_col, LOCKMODE lockmode)
{
	List *all;
	ListCell *lc;

	require_fence_trigger(rel, rel, fence_col);
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return NIL;
	all = find_all_inheritors(RelationGetRelid(rel), lockmode, NULL);
	foreach (lc, all)
	{
		Relation prel;

		if (lfirst_oid(lc) == RelationGetRelid(rel) ||
			get_rel_relkind(lfirst_oid(lc)) != RELKIND_RELATION)
			continue; /* a partitioned partition holds no rows itself */
		prel = table_open(lfirst_oid(lc), NoLock);
		require_fence_trigger(prel, rel, fence_col);
		table_close(prel, NoLock);
	}
	return all;
}

/*
 * Refuse a table with inheritance children (INHERITS; partitions are not such children): claim
 * and the helpers would update the children's rows through it, but the fence trigger on the
 * parent does not fire for them, so nothing would fence those rows.  Cheap when the table never
 * had a child (relhassubclass), so claim checks it on every call: a child may come at any time.
 */
void
fl_task_refuse_inheritance_children(Oid relid)
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

/*
 * The tables (and other relations) the command dropped; none when it drops the extension, whose
 * own task_tables goes with it.
 */
static SPIPlanPtr dropped_tables_plan = NULL;
static const char *const dropped_tables_sql =
	"SELECT d.objid FROM pg_catalog.pg_event_trigger_dropped_objects() AS d "
	"WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
	"AND d.objsubid OPERATOR(pg_catalog.=) 0 AND NOT EXISTS (SELECT "
	"FROM pg_catalog.pg_event_trigger_dropped_objects() AS e "
	"WHERE e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass)";

/*
 * sql_drop (src/ddl.c): forget the task tables the command dropped.  Their rows in
 * fencelock.task_tables name the table by OID, and a table created later under the same OID
 * would otherwise inherit the mapping.
 */
void
fl_task_tables_dropped(void)
{
	List *relids = fl_first_column(&dropped_tables_plan, dropped_tables_sql, true);
	FlSession session;
	Datum *elems;
	Datum values[1];
	int n = 0;
	ListCell *lc;

	if (relids == NIL)
		return;
	elems = palloc(sizeof(Datum) * list_length(relids));
	foreach (lc, relids)
		elems[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	values[0] = PointerGetDatum(construct_array(elems, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
	fl_begin(&session);
	fl_run(&map_forget, values, NULL, false);
	fl_end(&session);
	pfree(elems);
}
