/*
 * fence/inhguard.c — the checks of fencelock.inheritance_guard() (src/ddl.c): an inheritance child
 * of a fenced table has the parent's fence trigger.
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
 * OF list, no WHEN (39P01, fence/trigger.c) CREATE OR REPLACE TRIGGER also the table against its
 * parents CREATE TABLE ... PARTITION OF, ATTACH PARTITION              the clones of fence triggers
 * the partition got: no UPDATE OF, WHEN a trigger dropped (DROP TRIGGER, DROP ... CASCADE) its
 * table against its parents
 *
 * A command that leaves a child without its parent's fence trigger is refused (55000) — unless
 * check_function_bodies is off, as pg_dump's scripts and pg_restore set it: a restore creates a
 * parent's trigger before its children's, or after, in no order fencelock can know (and
 * pg_restore --clean drops them in any order), so there it only warns.  No table's state is
 * checked for a command on another table: a child that lacks its trigger (made with
 * check_function_bodies off) makes no other command fail, only those that would change it again.
 * A fence trigger with an UPDATE OF list or a WHEN condition is refused too, but with
 * check_function_bodies off it is created again without them (see "Widening" below).
 *
 * The event trigger's function is src/ddl.c's, which calls fl_inh_commands_end and fl_inh_dropped
 * here (and, at sql_drop, claim/table.c's fl_task_tables_dropped).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "base/asowner.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_inherits.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "tcop/deparse_utility.h"
#include "fence/inhguard.h"
#include "fence/trigger.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

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
	Oid oid;
	Oid relid;
	Oid parent; /* tgparentid: the partitioned table's trigger a partition's clone is of */
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

	tg->oid = form->oid;
	tg->relid = form->tgrelid;
	tg->parent = form->tgparentid;
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
 * Widening.  A fence trigger with an UPDATE OF list or a WHEN condition lets the rows it skips be
 * written unchecked, and its firings cannot see them.  With check_function_bodies on it is
 * refused; off, as pg_dump's scripts and pg_restore set it (a 0.3.0 database restored into this
 * version may hold one), refusing would fail the restore, and only warning would keep the
 * trigger that lets a stale write lower the stored fence.  So there it is created again, in
 * place, without the column list and the WHEN condition: same name, table, function, arguments,
 * timing, level and events, same enabled state; a partitioned table's clones follow their parent.
 * The CREATE OR REPLACE TRIGGER fires this event trigger again, and finds the trigger whole.
 */

/* The root of a partition's cloned trigger: the trigger its partitioned ancestors cloned. */
static HeapTuple
root_trigger(Oid trigger, Relation rel)
{
	for (;;)
	{
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple tuple;

		ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(trigger));
		scan = systable_beginscan(rel, TriggerOidIndexId, true, NULL, 1, &key);
		tuple = systable_getnext(scan);
		if (HeapTupleIsValid(tuple))
			tuple = heap_copytuple(tuple);
		systable_endscan(scan);
		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "could not find trigger %u", trigger);
		if (!OidIsValid(((Form_pg_trigger) GETSTRUCT(tuple))->tgparentid))
			return tuple;
		trigger = ((Form_pg_trigger) GETSTRUCT(tuple))->tgparentid;
	}
}

/* " OR "-separated events of a trigger type, as CREATE TRIGGER spells them. */
static void
append_events(StringInfo sql, int16 type)
{
	const char *sep = "";

	if (TRIGGER_FOR_INSERT(type))
	{
		appendStringInfo(sql, "%sINSERT", sep);
		sep = " OR ";
	}
	if (TRIGGER_FOR_UPDATE(type))
	{
		appendStringInfo(sql, "%sUPDATE", sep);
		sep = " OR ";
	}
	if (TRIGGER_FOR_DELETE(type))
	{
		appendStringInfo(sql, "%sDELETE", sep);
		sep = " OR ";
	}
	if (TRIGGER_FOR_TRUNCATE(type))
		appendStringInfo(sql, "%sTRUNCATE", sep);
}

/* The statements that recreate TUPLE whole, with its enabled state; NULL where none can. */
static List *
widening_sql(HeapTuple tuple, TupleDesc desc)
{
	Form_pg_trigger form = (Form_pg_trigger) GETSTRUCT(tuple);
	const char *name = quote_identifier(NameStr(form->tgname));
	char *table = rel_name(form->tgrelid);
	StringInfoData sql;
	List *result = NIL;
	const char *enable = NULL;

	/* A constraint trigger cannot be replaced, nor a transition table kept without it. */
	if (OidIsValid(form->tgconstraint) ||
		!heap_attisnull(tuple, Anum_pg_trigger_tgoldtable, desc) ||
		!heap_attisnull(tuple, Anum_pg_trigger_tgnewtable, desc))
		return NIL;
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE OR REPLACE TRIGGER %s %s ", name,
					 TRIGGER_FOR_BEFORE(form->tgtype)    ? "BEFORE"
					 : TRIGGER_FOR_INSTEAD(form->tgtype) ? "INSTEAD OF"
														 : "AFTER");
	append_events(&sql, form->tgtype);
	appendStringInfo(&sql, " ON %s FOR EACH %s EXECUTE FUNCTION %s.%s(", table,
					 TRIGGER_FOR_ROW(form->tgtype) ? "ROW" : "STATEMENT",
					 quote_identifier(get_namespace_name(get_func_namespace(form->tgfoid))),
					 quote_identifier(get_func_name(form->tgfoid)));
	if (form->tgnargs > 0)
	{
		bool isnull;
		bytea *args = DatumGetByteaPP(heap_getattr(tuple, Anum_pg_trigger_tgargs, desc, &isnull));
		const char *p = VARDATA_ANY(args);

		for (int i = 0; i < form->tgnargs; i++)
		{
			appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", quote_literal_cstr(p));
			p += strlen(p) + 1;
		}
	}
	appendStringInfoChar(&sql, ')');
	result = lappend(result, sql.data);
	switch (form->tgenabled)
	{
		case TRIGGER_DISABLED:
			enable = "DISABLE";
			break;
		case TRIGGER_FIRES_ON_REPLICA:
			enable = "ENABLE REPLICA";
			break;
		case TRIGGER_FIRES_ALWAYS:
			enable = "ENABLE ALWAYS";
			break;
		default:
			break;
	}
	if (enable != NULL)
		result = lappend(result, psprintf("ALTER TABLE %s %s TRIGGER %s", table, enable, name));
	return result;
}

/*
 * A fence trigger TG that skips rows: refused with check_function_bodies on; off, it (its root,
 * for a partition's clone) is created again whole, with a warning.
 */
static void
refuse_or_widen(GuardTrigger *tg)
{
	Relation rel;
	HeapTuple root;
	List *statements;
	Form_pg_trigger form;
	ListCell *lc;

	if (check_function_bodies)
		fl_report_partial_fence_trigger(ERROR, NameStr(tg->name), rel_name(tg->relid), tg->columns,
										tg->when);
	rel = table_open(TriggerRelationId, AccessShareLock);
	root = root_trigger(tg->oid, rel);
	statements = widening_sql(root, RelationGetDescr(rel));
	table_close(rel, AccessShareLock);
	form = (Form_pg_trigger) GETSTRUCT(root);
	if (statements == NIL)
		fl_report_partial_fence_trigger(ERROR, NameStr(tg->name), rel_name(tg->relid), tg->columns,
										tg->when);
	fl_spi_connect();
	foreach (lc, statements)
		fl_spi_result(lfirst(lc), SPI_execute(lfirst(lc), false, 0));
	fl_spi_finish();
	ereport(WARNING,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("fence trigger \"%s\" on table \"%s\" was created again without %s",
					NameStr(form->tgname), rel_name(form->tgrelid),
					tg->columns && tg->when ? "UPDATE OF and WHEN"
					: tg->when              ? "WHEN"
											: "UPDATE OF"),
			 errdetail("Trigger \"%s\" on table \"%s\" had %s, which would let the rows it skips "
					   "be written unchecked; with check_function_bodies off, as in a restore, it "
					   "was replaced by the same trigger firing for every row%s.",
					   NameStr(tg->name), rel_name(tg->relid),
					   tg->columns && tg->when ? "a column list (UPDATE OF) and a WHEN condition"
					   : tg->when              ? "a WHEN condition"
											   : "a column list (UPDATE OF)",
					   tg->relid == form->tgrelid ? "" : ", with its partitions' clones"),
			 errhint("Check that every write to the table may fire the trigger; a fence trigger "
					 "cannot skip rows.")));
}

/*
 * A partition made or attached (CREATE TABLE ... PARTITION OF, ALTER TABLE ... ATTACH PARTITION)
 * gets clones of its new ancestors' row triggers, column list and WHEN condition included: those
 * of fence triggers are refused or widened as the trigger itself would be.
 */
static void
check_clones(Oid partition)
{
	ListCell *lr;

	if (!get_rel_relispartition(partition))
		return;
	foreach (lr, find_all_inheritors(partition, NoLock, NULL))
	{
		ListCell *lt;

		/* Read again for each table: widening a root trigger replaced its other clones too. */
		foreach (lt, fence_triggers_of(lfirst_oid(lr)))
		{
			GuardTrigger *tg = lfirst(lt);

			if (OidIsValid(tg->parent) && !tg->every)
				refuse_or_widen(tg);
		}
	}
}

/*
 * A new (or replaced) trigger, when it is a fence trigger: it fires for every row (no UPDATE OF
 * list, no WHEN clause; refused, or created again without them when check_function_bodies is
 * off, as in a restore), and the inheritance children of its table have it.
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
		refuse_or_widen(tg);
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

/* The partitions an ALTER TABLE ... ATTACH PARTITION attached, against their clones. */
static void
check_attached(CollectedCommand *cmd)
{
	ListCell *lc;

	foreach (lc, cmd->d.alterTable.subcmds)
	{
		CollectedATSubcmd *sub = lfirst(lc);
		AlterTableCmd *at = (AlterTableCmd *) sub->parsetree;
		Oid partition = InvalidOid;

		if (!IsA(at, AlterTableCmd) || at->subtype != AT_AttachPartition)
			continue;
		if (sub->address.classId == RelationRelationId)
			partition = sub->address.objectId;
		if (OidIsValid(partition))
			check_clones(partition);
		else
		{
			/*
			 * PostgreSQL 15 collects no address for ATTACH PARTITION, and its name cannot be
			 * looked up under this function's search_path: every partition of the table then.
			 */
			ListCell *lp;

			foreach (lp, find_inheritance_children(cmd->d.alterTable.objectId, NoLock))
				check_clones(lfirst_oid(lp));
		}
	}
}

static void
check_command(CollectedCommand *cmd)
{
	if (cmd->type == SCT_AlterTable)
	{
		if (cmd->d.alterTable.classId == RelationRelationId && adds_inheritance(cmd))
			check_child(cmd->d.alterTable.objectId, CHANGE_NEW_CHILD);
		if (cmd->d.alterTable.classId == RelationRelationId)
			check_attached(cmd);
		return;
	}
	if (cmd->type != SCT_Simple || cmd->parsetree == NULL)
		return;
	if (cmd->d.simple.address.classId == RelationRelationId &&
		(IsA(cmd->parsetree, CreateStmt) || IsA(cmd->parsetree, CreateForeignTableStmt)))
	{
		check_child(cmd->d.simple.address.objectId, CHANGE_NEW_CHILD);
		check_clones(cmd->d.simple.address.objectId);
	}
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

/* ddl_command_end: each command's change checked (src/ddl.c calls this). */
void
fl_inh_commands_end(void)
{
	ListCell *lc;

	foreach (lc, fl_first_column(&commands_plan, commands_sql, false))
		check_command((CollectedCommand *) lfirst(lc));
}

/* sql_drop: the tables whose fence triggers the command dropped, against their parents. */
void
fl_inh_dropped(void)
{
	ListCell *lc;

	foreach (lc, fl_first_column(&dropped_plan, dropped_sql, true))
		check_child(lfirst_oid(lc), CHANGE_LOST_TRIGGER);
}
