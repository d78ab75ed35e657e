/*
 * ddl.c — fencelock.inheritance_guard(), the extension's one DDL event trigger function: it hands
 * each event to the parts that watch DDL.
 *
 *   ddl_command_end   fence/inhguard.c: inheritance children, fence triggers, partitions
 *   sql_drop          fence/inhguard.c: a dropped fence trigger's table against its parents;
 *                     claim/table.c: the dropped task tables' rows in fencelock.task_tables
 *
 * It lives here, in the assembly, because it calls two folders that must not call each other
 * (claim calls fence: a task table carries the fence trigger).
 */
#include "postgres.h"

#include "claim/claim.h"
#include "commands/event_trigger.h"
#include "fence/inhguard.h"
#include "fmgr.h"

PG_FUNCTION_INFO_V1(fencelock_inheritance_guard);

Datum
fencelock_inheritance_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencelock.inheritance_guard() must be called as an event trigger")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (strcmp(trigdata->event, "ddl_command_end") == 0)
		fl_inh_commands_end();
	else if (strcmp(trigdata->event, "sql_drop") == 0)
	{
		fl_inh_dropped();
		fl_task_tables_dropped();
	}
	PG_RETURN_NULL();
}
