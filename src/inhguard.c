/*
 * inhguard.c — fencelock.inheritance_guard(): an inheritance child of a fenced table has the
 * parent's fence trigger.
 *
 * Rows of an inheritance child (INHERITS; partitions are not such children: they get the
 * parent's row triggers as clones) that are written through the parent do not fire the parent's
 * row triggers, so a child without the parent's fence trigger would be a way around it.  A child
 * has a parent's fence trigger when it has a trigger with the same function, events and
 * arguments.
 *
 * The event trigger (ddl_command_end, and sql_drop) looks only at what the command itself did,
 * from pg_event_trigger_ddl_commands() and pg_event_trigger_dropped_objects():
 *
 *   CREATE TABLE, CREATE FOREIGN TABLE (also in CREATE SCHEMA)  the new table against its parents
 *   ALTER [FOREIGN] TABLE ... INHERIT                            the table against its parents
 *   CREATE TRIGGER with fence_trigger                            the table's children against it,
 *                                                                and the trigger itself: no UPDATE
 * OF list, no WHEN (39P01, trigger.c) CREATE OR REPLACE TRIGGER also the table against its parents
 *   a trigger dropped (DROP TRIGGER, DROP ... CASCADE)           its table against its parents
 *
 * A command that leaves a child without its parent's fence trigger is refused (55000) — unless
 * check_function_bodies is off, as pg_dump's scripts and pg_restore set it: a restore creates a
 * parent's trigger before its children's, or after, in no order fencelock can know (and
 * pg_restore --clean drops them in any order), so there it only warns.  No table's state is
 * checked for a command on another table: a child that lacks its trigger (made with
 * check_function_bodies off) makes no other command fail, only those that would change it again.
 *
 * The sql_drop trigger also forgets the task tables the command dropped (claimtable.c): their
 * row in fencelock.task_tables names the table by OID, and a table created later under the same
 * OID would otherwise inherit the mapping.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "asowner.h"
#include "claim.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "nodes/parsenodes.h"
#include "tcop/deparse_utility.h"
#include "trigger.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

PG_FUNCTION_INFO_V1(fencelock_inheritance_guard);

/* What the command did that left a child without its parent's fence trigger. */
typedef enum GuardChange
{
	CHANGE_NEW_CHILD,    /* made the table a child */
	CHANGE_NEW_TRIGGER,  /* gave the parent the trigger */
	CHANGE_LOST_TRIGGER, /* took the trigger from the child */
} GuardChange;

/* A trigger as the check compares it. */
typedef struct GuardTrigger
{
	Oid relid;
	NameData name;
	Oid foid;
	int16 type;
	bytea *args;  /* tgargs */
	bool columns; /* an UPDATE OF list */
	bool when;    /* a WHEN clause */
	bool every;   /* neither: fires for every row it is for */
} GuardTrigger;

static GuardTrigger *
guard_trigger(HeapTuple tuple, TupleDesc desc)
{
	Form_pg_trigger form = (Form_pg_trigger) GETSTRUCT(tuple);
	GuardTrigger *tg = palloc(sizeof(GuardTrigger));
	bool isnull;
	Datum args = heap_getattr(tuple, Anum_pg_trigger_tgargs, desc, &isnull);

	tg->relid = form->tgrelid;
	tg->name = form->tgname;
	tg->foid = form->tgfoid;
	tg->type = form->tgtype;
	tg->args = isnull ? NULL : DatumGetByteaPCopy(args);
	tg->columns = form->tgattr.dim1 > 0;
	tg->when = !heap_attisnull(tuple, Anum_pg_trigger_tgqual, desc);
	tg->every = !tg->columns && !tg->when;
	return tg;
}

/* The triggers whose column ATTNUM is VALUE, through index INDEXID: a table's, or one by OID. */
static List *
scan_triggers(Oid indexid, AttrNumber attnum, Oid value)
{
	Relation rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple tuple;
	List *result = NIL;

	ScanKeyInit(&key, attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(value));
	scan = systable_beginscan(rel, indexid, true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		result = lappend(result, guard_trigger(tuple, RelationGetDescr(rel)));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

static List *
triggers_of(Oid relid)
{
	return scan_triggers(TriggerRelidNameIndexId, Anum_pg_trigger_tgrelid, relid);
}

/* The fence triggers of a table. */
static List *
fence_triggers_of(Oid relid)
{
	List *result = NIL;
	ListCell *lc;

	foreach (lc, triggers_of(relid))
	{
		GuardTrigger *tg = lfirst(lc);

		if (fl_is_fence_trigger(tg->foid))
			result = lappend(result, tg);
	}
	return result;
}

static bool
same_args(bytea *a, bytea *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		   memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * Has one of TRIGGERS the function, events and arguments of TG, and fires for every row (no WHEN
 * clause, no UPDATE OF list: a look-alike that skips rows would let them pass unfenced)?
 */
static bool
has_like(List *triggers, GuardTrigger *tg)
{
	ListCell *lc;

	foreach (lc, triggers)
	{
		GuardTrigger *other = lfirst(lc);

		if (other->every && other->foid == tg->foid && other->type == tg->type &&
			same_args(other->args, tg->args))
			return true;
	}
	return false;
}

/* The parents of an inheritance child; none for a partition, whose triggers are clones. */
static List *
parents_of(Oid child)
{
	Relation rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple tuple;
	List *result = NIL;

	if (get_rel_relispartition(child))
		return NIL;
	rel = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(child));
	scan = systable_beginscan(rel, InheritsRelidSeqnoIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		result = lappend_oid(result, ((Form_pg_inherits) GETSTRUCT(tuple))->inhparent);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/* A table's name as regclass prints it (qualified unless pg_catalog or pg_temp holds it). */
static char *
rel_name(Oid relid)
{
	return DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)));
}

static void
report(Oid child, GuardTrigger *tg, GuardChange change)
{
	const char *hint;

	if (!check_function_bodies)
	{
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("inheritance child \"%s\" of table \"%s\" lacks its fence trigger \"%s\"",
						rel_name(child), rel_name(tg->relid), NameStr(tg->name)),
				 errdetail("Rows of an inheritance child written through the parent do not fire "
						   "the parent's row triggers, so the child bypasses the fence until it "
						   "has the same trigger."),
				 errhint("The command is allowed because check_function_bodies is off, as in a "
						 "restore; give the child the same trigger.")));
		return;
	}
	switch (change)
	{
		case CHANGE_NEW_CHILD:
			hint = "Create the child without INHERITS, give it the same trigger, then ALTER TABLE "
				   "... INHERIT; or use declarative partitioning, whose partitions get the "
				   "trigger automatically.";
			break;
		case CHANGE_NEW_TRIGGER:
			hint = "Create the same trigger on each inheritance child first; or use declarative "
				   "partitioning, whose partitions get the trigger automatically.";
			break;
		default:
			hint = "Keep a trigger with the same function, events and arguments on the child, or "
				   "detach the child first with ALTER TABLE ... NO INHERIT.";
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("inheritance child \"%s\" of table \"%s\" lacks its fence trigger \"%s\"",
					rel_name(child), rel_name(tg->relid), NameStr(tg->name)),
			 errdetail("Rows of an inheritance child written through the parent do not fire the "
					   "parent's row triggers, so the child would bypass the fence."),
			 errhint("%s", hint)));
}

/* A child (new, or changed by the command) against the fence triggers of its parents. */
static void
check_child(Oid child, GuardChange change)
{
	List *parents = parents_of(child);
	List *mine;
	ListCell *lp;

	if (parents == NIL)
		return;
	mine = triggers_of(child);
	foreach (lp, parents)
	{
		ListCell *lt;

		foreach (lt, fence_triggers_of(lfirst_oid(lp)))
		{
			GuardTrigger *tg = lfirst(lt);

			if (!has_like(mine, tg))
				report(child, tg, change);
		}
	}
}

/*
 * A new (or replaced) trigger, when it is a fence trigger: it fires for every row (no UPDATE OF
 * list, no WHEN clause; refused, or only a warning when check_function_bodies is off, as in a
 * restore, where its firings still refuse every write), and the inheritance children of its
 * table have it.
 */
static void
check_children(Oid trigger)
{
	List *found = scan_triggers(TriggerOidIndexId, Anum_pg_trigger_oid, trigger);
	GuardTrigger *tg;
	ListCell *lc;

	if (found == NIL)
		return;
	tg = linitial(found);
	if (!fl_is_fence_trigger(tg->foid))
		return;
	if (!tg->every)
		fl_report_partial_fence_trigger(check_function_bodies ? ERROR : WARNING, NameStr(tg->name),
										rel_name(tg->relid), tg->columns, tg->when);
	foreach (lc, find_inheritance_children(tg->relid, NoLock))
	{
		Oid child = lfirst_oid(lc);

		if (!get_rel_relispartition(child) && !has_like(triggers_of(child), tg))
			report(child, tg, CHANGE_NEW_TRIGGER);
	}
}

/* ALTER TABLE ... INHERIT among the subcommands of an ALTER TABLE? */
static bool
adds_inheritance(CollectedCommand *cmd)
{
	ListCell *lc;

	foreach (lc, cmd->d.alterTable.subcmds)
	{
		CollectedATSubcmd *sub = lfirst(lc);

		if (IsA(sub->parsetree, AlterTableCmd) &&
			((AlterTableCmd *) sub->parsetree)->subtype == AT_AddInherit)
			return true;
	}
	return false;
}

static void
check_command(CollectedCommand *cmd)
{
	if (cmd->type == SCT_AlterTable)
	{
		if (cmd->d.alterTable.classId == RelationRelationId && adds_inheritance(cmd))
			check_child(cmd->d.alterTable.objectId, CHANGE_NEW_CHILD);
		return;
	}
	if (cmd->type != SCT_Simple || cmd->parsetree == NULL)
		return;
	if (cmd->d.simple.address.classId == RelationRelationId &&
		(IsA(cmd->parsetree, CreateStmt) || IsA(cmd->parsetree, CreateForeignTableStmt)))
		check_child(cmd->d.simple.address.objectId, CHANGE_NEW_CHILD);
	else if (cmd->d.simple.address.classId == TriggerRelationId &&
			 IsA(cmd->parsetree, CreateTrigStmt))
	{
		Oid trigger = cmd->d.simple.address.objectId;

		check_children(trigger);
		if (((CreateTrigStmt *) cmd->parsetree)->replace)
		{
			List *found = scan_triggers(TriggerOidIndexId, Anum_pg_trigger_oid, trigger);

			if (found != NIL)
				check_child(((GuardTrigger *) linitial(found))->relid, CHANGE_LOST_TRIGGER);
		}
	}
}

static SPIPlanPtr commands_plan = NULL;
static const char *const commands_sql =
	"SELECT command FROM pg_catalog.pg_event_trigger_ddl_commands()";

/* The tables of the triggers the command dropped, those that still exist. */
static SPIPlanPtr dropped_plan = NULL;
static const char *const dropped_sql =
	"SELECT DISTINCT pg_catalog.to_regclass(pg_catalog.quote_ident(d.address_names[1]) "
	"OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) "
	"pg_catalog.quote_ident(d.address_names[2]))::pg_catalog.oid "
	"FROM pg_catalog.pg_event_trigger_dropped_objects() AS d "
	"WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass";

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
 * The first column of the rows of a statement: pointers (the commands live in the event
 * trigger's own memory) or OIDs, in a list made in the caller's memory context.
 */
static List *
first_column(SPIPlanPtr *plan, const char *sql, bool oids)
{
	MemoryContext caller = CurrentMemoryContext;
	List *result = NIL;
	uint64 n;

	fl_spi_connect();
	if (*plan == NULL)
		*plan = fl_keep_plan(sql, 0, NULL, 0);
	n = fl_spi_result(sql, SPI_execute_plan(*plan, NULL, NULL, true, 0));
	for (uint64 i = 0; i < n; i++)
	{
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext spi = MemoryContextSwitchTo(caller);

		if (!isnull)
			result = oids ? lappend_oid(result, DatumGetObjectId(d))
						  : lappend(result, DatumGetPointer(d));
		MemoryContextSwitchTo(spi);
	}
	fl_spi_finish();
	return result;
}

Datum
fencelock_inheritance_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	ListCell *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencelock.inheritance_guard() must be called as an event trigger")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (strcmp(trigdata->event, "ddl_command_end") == 0)
	{
		foreach (lc, first_column(&commands_plan, commands_sql, false))
			check_command((CollectedCommand *) lfirst(lc));
	}
	else if (strcmp(trigdata->event, "sql_drop") == 0)
	{
		List *tables;

		foreach (lc, first_column(&dropped_plan, dropped_sql, true))
			check_child(lfirst_oid(lc), CHANGE_LOST_TRIGGER);
		tables = first_column(&dropped_tables_plan, dropped_tables_sql, true);
		if (tables != NIL)
			fl_task_forget_tables(tables);
	}
	PG_RETURN_NULL();
}
