/*
 * fence/trigger.c — fencelock.fence_trigger(): the resource itself refuses writes from stale
 * holders.
 *
 * Per-row fencing (the fence a write carries is compared with the fence stored in the row):
 *
 *   CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
 *       EXECUTE FUNCTION fencelock.fence_trigger('last_fence' [, 'strict'] [, 'allow_unfenced']);
 *
 * An UPDATE whose new fence is lower than the stored one fails with FL001 (with 'strict', an
 * equal one too); a NULL fence, or an UPDATE that does not assign the fence column at all, fails
 * with FL002 (unless 'allow_unfenced', which lets an UPDATE that leaves the column alone pass).
 *
 * Lease-bound writes (the fence is compared with the lease's latest fence; fence/bound.c):
 *
 *   CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON s FOR EACH ROW
 *       EXECUTE FUNCTION fencelock.fence_trigger('last_fence', 'lease=set-demo'
 *                                                 | 'lease_column=tenant' [, 'allow_unfenced']);
 *
 * INSERT and UPDATE must carry the lease's latest fence (FL001 otherwise); a DELETE, and with
 * 'allow_unfenced' an UPDATE that leaves the fence column alone, pass only once the transaction
 * has shown that fence (FL002 otherwise).  With 'lease=', a BEFORE TRUNCATE FOR EACH STATEMENT
 * trigger applies the DELETE rule to TRUNCATE.  'strict' compares with the stored fence and is
 * refused with either lease option.
 *
 * MERGE reports the columns of all its UPDATE actions together (fence/mergeguard.c): an UPDATE by a
 * MERGE that has an action leaving the fence column alone counts as not assigning it when the
 * fence did not change.
 *
 * A fence trigger fires for every row it is for: one declared with a column list (UPDATE OF) or
 * a WHEN condition is refused (39P01) at CREATE TRIGGER (fence/inhguard.c's event trigger) and at
 * each firing, for one made while the guard was off or before 0.4.0 (whose update refuses to run
 * while one exists: a trigger whose WHEN skips every stale write would never fire to be refused).
 *
 * The trigger's arguments are resolved once per trigger and kept in a backend-local hash keyed by
 * the trigger's OID; a relcache invalidation of the table (ALTER TABLE, DROP/CREATE TRIGGER)
 * drops the entry, so the next row resolves it again.
 */
#include "postgres.h"

#include <stddef.h>

#include "access/sysattr.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "compat.h"
#include "fencelock.h"
#include "fence/bound.h"
#include "fence/mergeguard.h"
#include "nodes/bitmapset.h"
#include "replication/logicalworker.h"
#include "settings.h"
#include "observe/stats.h"
#include "fence/trigger.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(fencelock_fence_trigger);

#define DEFAULT_FENCE_COLUMN "last_fence"
#define OPT_LEASE            "lease="
#define OPT_LEASE_COLUMN     "lease_column="

typedef enum FenceMode
{
	MODE_ROW,         /* compare with the row's stored fence */
	MODE_LEASE,       /* compare with the latest fence of one lease */
	MODE_LEASE_COLUMN /* ... of the lease the row names in a text column */
} FenceMode;

typedef struct FenceTrigger
{
	Oid tgoid; /* hash key */
	Oid relid;
	AttrNumber attnum;
	Oid typid; /* INT2OID, INT4OID or INT8OID (the base type) */
	bool strict;
	bool allow_unfenced;
	FenceMode mode;
	AttrNumber lease_attnum;                    /* MODE_LEASE_COLUMN */
	NameData column;                            /* the fence column's name */
	char lease[FENCELOCK_MAX_RESOURCE_LEN + 1]; /* MODE_LEASE; last, not copied per row */
} FenceTrigger;

static HTAB *fence_triggers = NULL;
/* The entry found last: most statements fire one fence trigger, row after row (lookup). */
static FenceTrigger *last_trigger = NULL;

static void
fence_trigger_relcache_cb(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	FenceTrigger *entry;

	if (fence_triggers == NULL)
		return;
	last_trigger = NULL;
	hash_seq_init(&status, fence_triggers);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (relid == InvalidOid || entry->relid == relid)
			hash_search(fence_triggers, &entry->tgoid, HASH_REMOVE, NULL);
	}
}

static void
fence_trigger_cache_init(void)
{
	HASHCTL ctl;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(FenceTrigger);
	ctl.hcxt = TopMemoryContext;
	fence_triggers =
		hash_create("fencelock fence triggers", 32, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	CacheRegisterRelcacheCallback(fence_trigger_relcache_cb, (Datum) 0);
}

/* Per-row mode: BEFORE UPDATE FOR EACH ROW only, as always. */
static void
check_firing_row(TriggerData *trigdata)
{
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		ereport(
			ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("trigger \"%s\" on table \"%s\" must be fired BEFORE UPDATE FOR EACH ROW",
					trigdata->tg_trigger->tgname, RelationGetRelationName(trigdata->tg_relation)),
			 errhint("Create it as CREATE TRIGGER %s BEFORE UPDATE ON %s FOR EACH ROW EXECUTE "
					 "FUNCTION fencelock.fence_trigger('last_fence').",
					 trigdata->tg_trigger->tgname,
					 RelationGetRelationName(trigdata->tg_relation))));
}

/*
 * A fence trigger fires for every row it is for: an UPDATE OF list or a WHEN condition would let
 * the rows it skips be written unchecked (a stale holder's write lowering the stored fence).
 * ELEVEL is ERROR, or WARNING where the inheritance guard only warns (check_function_bodies off,
 * as in a restore).  The same refusal for CREATE TRIGGER (fence/inhguard.c) and for each firing.
 */
void
fl_report_partial_fence_trigger(int elevel, const char *tgname, const char *relname, bool columns,
								bool when)
{
	const char *what = columns && when ? "a column list (UPDATE OF) and a WHEN condition"
					   : when          ? "a WHEN condition"
									   : "a column list (UPDATE OF)";

	ereport(
		elevel,
		(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		 errmsg("fence trigger \"%s\" on table \"%s\" has %s", tgname, relname, what),
		 errdetail("A fence trigger must fire for every row it is for: a stale write it skipped "
				   "would commit unchecked."),
		 errhint("Drop the trigger and create it again without %s.", columns && when
																		 ? "UPDATE OF and WHEN"
																	 : when ? "WHEN"
																			: "UPDATE OF")));
}

/* Lease-bound modes: BEFORE INSERT, UPDATE or DELETE FOR EACH ROW, or BEFORE TRUNCATE. */
static void
check_firing_lease(TriggerData *trigdata)
{
	TriggerEvent ev = trigdata->tg_event;

	if (TRIGGER_FIRED_BEFORE(ev) &&
		((TRIGGER_FIRED_FOR_ROW(ev) && !TRIGGER_FIRED_BY_TRUNCATE(ev)) ||
		 (TRIGGER_FIRED_FOR_STATEMENT(ev) && TRIGGER_FIRED_BY_TRUNCATE(ev))))
		return;
	ereport(
		ERROR,
		(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		 errmsg("trigger \"%s\" on table \"%s\" must be fired BEFORE INSERT, UPDATE or DELETE "
				"FOR EACH ROW, or BEFORE TRUNCATE FOR EACH STATEMENT",
				trigdata->tg_trigger->tgname, RelationGetRelationName(trigdata->tg_relation)),
		 errhint("Create it as CREATE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE ON %s FOR "
				 "EACH ROW EXECUTE FUNCTION fencelock.fence_trigger('last_fence', "
				 "'lease=NAME').",
				 trigdata->tg_trigger->tgname, RelationGetRelationName(trigdata->tg_relation))));
}

#define OPTIONS_HINT                                                                               \
	"The options after the column name are \"strict\", \"allow_unfenced\", \"lease=NAME\" and "    \
	"\"lease_column=COLUMN\"."

/* lease_column=COL: an existing text or varchar column. */
static AttrNumber
resolve_lease_column(Trigger *tg, Relation rel, const char *name)
{
	AttrNumber attnum = get_attnum(RelationGetRelid(rel), name);
	Oid typid;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("lease column \"%s\" of trigger \"%s\" does not exist in table \"%s\"",
						name, tg->tgname, RelationGetRelationName(rel)),
				 errhint("Name an existing text column with lease_column=.")));
	typid = getBaseType(get_atttype(RelationGetRelid(rel), attnum));
	if (typid != TEXTOID && typid != VARCHAROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("lease column \"%s\" of table \"%s\" is of type %s, not text", name,
						RelationGetRelationName(rel), format_type_be(typid)),
				 errhint("Use a text or varchar column holding the lease's resource name.")));
	return attnum;
}

/* The options after the column name. */
static void
resolve_options(FenceTrigger *ft, Trigger *tg, Relation rel)
{
	const char *lease_column = NULL;

	ft->strict = false;
	ft->allow_unfenced = false;
	ft->mode = MODE_ROW;
	ft->lease_attnum = InvalidAttrNumber;
	ft->lease[0] = '\0';
	for (int i = 1; i < tg->tgnargs; i++)
	{
		const char *arg = tg->tgargs[i];

		if (strcmp(arg, "strict") == 0)
			ft->strict = true;
		else if (strcmp(arg, "allow_unfenced") == 0)
			ft->allow_unfenced = true;
		else if (strncmp(arg, OPT_LEASE, strlen(OPT_LEASE)) == 0 ||
				 strncmp(arg, OPT_LEASE_COLUMN, strlen(OPT_LEASE_COLUMN)) == 0)
		{
			bool by_column = arg[strlen("lease")] == '_';
			const char *value = strchr(arg, '=') + 1;

			if (ft->mode != MODE_ROW)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("trigger \"%s\" on table \"%s\" has more than one lease option",
								tg->tgname, RelationGetRelationName(rel)),
						 errdetail("A table is bound either to one lease (lease=) or to the lease "
								   "each row names (lease_column=), once."),
						 errhint(OPTIONS_HINT)));
			/* The option's name is a keyword, not prose: it may be put into the message. */
			if (value[0] == '\0')
				ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								errmsg("trigger \"%s\" on table \"%s\" has an empty %s option",
									   tg->tgname, RelationGetRelationName(rel),
									   by_column ? OPT_LEASE_COLUMN : OPT_LEASE),
								errhint(OPTIONS_HINT)));
			if (!by_column && strlen(value) > FENCELOCK_MAX_RESOURCE_LEN)
				ereport(
					ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("trigger \"%s\" on table \"%s\" names a lease longer than the "
							"limit of %d bytes",
							tg->tgname, RelationGetRelationName(rel), FENCELOCK_MAX_RESOURCE_LEN),
					 errhint(OPTIONS_HINT)));
			ft->mode = by_column ? MODE_LEASE_COLUMN : MODE_LEASE;
			if (by_column)
				lease_column = value;
			else
				strlcpy(ft->lease, value, sizeof(ft->lease));
		}
		else
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("unknown option \"%s\" for trigger \"%s\" on table \"%s\"", arg,
								   tg->tgname, RelationGetRelationName(rel)),
							errhint(OPTIONS_HINT)));
	}
	if (ft->strict && ft->mode != MODE_ROW)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"strict\" contradicts the lease option in trigger \"%s\" on "
						"table \"%s\"",
						tg->tgname, RelationGetRelationName(rel)),
				 errdetail("\"strict\" compares a write's fence with the fence stored in the row; "
						   "a lease-bound table compares it with the lease's latest fence, which "
						   "every write of the holder carries."),
				 errhint(OPTIONS_HINT)));
	if (lease_column != NULL)
		ft->lease_attnum = resolve_lease_column(tg, rel, lease_column);
}

/* Resolve the trigger's arguments against the table. */
static void
resolve(FenceTrigger *ft, TriggerData *trigdata)
{
	Trigger *tg = trigdata->tg_trigger;
	Relation rel = trigdata->tg_relation;
	const char *column = tg->tgnargs > 0 ? tg->tgargs[0] : DEFAULT_FENCE_COLUMN;
	AttrNumber attnum;
	Oid typid;

	ft->relid = RelationGetRelid(rel);
	resolve_options(ft, tg, rel);

	attnum = get_attnum(ft->relid, column);
	/* An option where the column belongs, e.g. fence_trigger('lease=x'), said plainly. */
	if (attnum <= 0 && (strncmp(column, OPT_LEASE, strlen(OPT_LEASE)) == 0 ||
						strncmp(column, OPT_LEASE_COLUMN, strlen(OPT_LEASE_COLUMN)) == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("first argument \"%s\" of trigger \"%s\" on table \"%s\" is an option, not "
						"the fence column",
						column, tg->tgname, RelationGetRelationName(rel)),
				 errhint("Name the fence column first, e.g. fencelock.fence_trigger('last_fence', "
						 "'%s').",
						 column)));
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("fence column \"%s\" of trigger \"%s\" does not exist in table \"%s\"",
						column, tg->tgname, RelationGetRelationName(rel)),
				 errhint("Name an existing integer column as the trigger's first argument.")));
	typid = getBaseType(get_atttype(ft->relid, attnum));
	if (typid != INT2OID && typid != INT4OID && typid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("fence column \"%s\" of table \"%s\" is of type %s, not an integer type",
						column, RelationGetRelationName(rel), format_type_be(typid)),
				 errhint("Use a smallint, integer or bigint column; bigint holds every fence.")));
	ft->attnum = attnum;
	ft->typid = typid;
	namestrcpy(&ft->column, column);
}

/*
 * Whether a function is the fence trigger: a C function whose symbol, loaded, is this library's
 * fencelock_fence_trigger.  Not by name: a schema planted under the name "fencelock" could hold a
 * function called fence_trigger that fences nothing.  Only a function whose symbol name matches
 * is looked up (which loads its library), not every C trigger function.
 */
bool
fl_is_fence_trigger(Oid fn)
{
	HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	bool candidate = false;
	FmgrInfo finfo;

	if (!HeapTupleIsValid(tuple))
		return false;
	if (((Form_pg_proc) GETSTRUCT(tuple))->prolang == ClanguageId)
	{
		bool isnull;
		Datum src = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);

		candidate = !isnull && strcmp(TextDatumGetCString(src), "fencelock_fence_trigger") == 0;
	}
	ReleaseSysCache(tuple);
	if (!candidate)
		return false;
	fmgr_info(fn, &finfo);
	return finfo.fn_addr == fencelock_fence_trigger;
}

static FenceTrigger *
lookup(TriggerData *trigdata)
{
	Oid tgoid = trigdata->tg_trigger->tgoid;
	FenceTrigger *ft;
	bool found;

	/* Entries stay in place until the relcache callback removes them, and forgets this one. */
	if (last_trigger != NULL && last_trigger->tgoid == tgoid)
		return last_trigger;
	if (fence_triggers == NULL)
		fence_trigger_cache_init();
	ft = hash_search(fence_triggers, &tgoid, HASH_FIND, NULL);
	if (ft != NULL)
		return last_trigger = ft;

	/* Resolve into a local copy first, so an error leaves no half-filled entry behind. */
	{
		FenceTrigger tmp;

		tmp.tgoid = tgoid;
		resolve(&tmp, trigdata);
		ft = hash_search(fence_triggers, &tgoid, HASH_ENTER, &found);
		*ft = tmp;
	}
	return last_trigger = ft;
}

static int64
fence_value(Datum d, Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

pg_noreturn static void reject_unfenced(Relation rel, FenceTrigger *ft, FlWrite write,
										const char *why, const char *hint);

/*
 * FL002, for a write of the given kind; WHY is the detail, a full sentence; HINT, when not NULL,
 * replaces the usual hint.
 */
static void
reject_unfenced(Relation rel, FenceTrigger *ft, FlWrite write, const char *why, const char *hint)
{
	fl_count_table(RelationGetRelid(rel), false);
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level, (fl_errmsg_unfenced(write, rel), errdetail("%s", why)));
	if (hint != NULL)
		ereport(ERROR, (errcode(ERRCODE_FENCELOCK_UNFENCED), fl_errmsg_unfenced(write, rel),
						errdetail("%s", why), errhint("%s", hint), errtablecol(rel, ft->attnum)));
	if (ft->mode == MODE_ROW)
		ereport(ERROR, (errcode(ERRCODE_FENCELOCK_UNFENCED), fl_errmsg_unfenced(write, rel),
						errdetail("%s", why),
						errhint("Set column \"%s\" to the fence of the lease this write is made "
								"under.",
								NameStr(ft->column)),
						errtablecol(rel, ft->attnum)));
	ereport(ERROR, (errcode(ERRCODE_FENCELOCK_UNFENCED), fl_errmsg_unfenced(write, rel),
					errdetail("%s", why),
					errhint("Set column \"%s\" to the latest fence of the table's lease.",
							NameStr(ft->column)),
					errtablecol(rel, ft->attnum)));
}

#define MERGE_WHY                                                                                  \
	"The MERGE has an UPDATE action that does not assign the fence column, and PostgreSQL "        \
	"reports the columns of all its UPDATE actions together."
#define UNLOADED_WHY                                                                               \
	"fencelock was loaded while this statement ran, so the trigger cannot tell whether the "       \
	"statement is a MERGE with an UPDATE action that does not assign the fence column; the "       \
	"fence did not change."
#define UNLOADED_HINT                                                                              \
	"Load fencelock before the statement: add it to shared_preload_libraries or "                  \
	"session_preload_libraries, or call one of its functions, such as fencelock.current_fence, "   \
	"in an earlier statement of the session."

/*
 * Did this UPDATE assign the fence column?  NULL if so; otherwise why not (and *HINT, when the
 * usual hint does not fit).  A MERGE reports the union of its UPDATE actions' columns: when one
 * of them leaves the column alone and the fence did not change, the trigger cannot tell that
 * action from one that set the same fence, and takes the safe answer; so it does when it cannot
 * tell whether the statement is such a MERGE (fence/mergeguard.c).
 */
static const char *
update_unassigned(TriggerData *trigdata, FenceTrigger *ft, const char **hint)
{
	Relation rel = trigdata->tg_relation;
	const char *why = MERGE_WHY;
	const char *unloaded_hint = NULL;
	Datum oldd;
	Datum newd;
	bool oldnull;
	bool newnull;

	*hint = NULL;
	if (!bms_is_member(ft->attnum - FirstLowInvalidHeapAttributeNumber, trigdata->tg_updatedcols))
		return "The UPDATE does not assign the fence column.";
	switch (fl_merge_assigns(NameStr(ft->column)))
	{
		case FL_MERGE_PARTIAL:
			break;
		case FL_MERGE_UNKNOWN:
			why = UNLOADED_WHY;
			unloaded_hint = UNLOADED_HINT;
			break;
		default:
			return NULL;
	}
	oldd = heap_getattr(trigdata->tg_trigtuple, ft->attnum, RelationGetDescr(rel), &oldnull);
	newd = heap_getattr(trigdata->tg_newtuple, ft->attnum, RelationGetDescr(rel), &newnull);
	if (oldnull != newnull ||
		(!oldnull && fence_value(oldd, ft->typid) != fence_value(newd, ft->typid)))
		return NULL; /* the fence changed: this action assigned it */
	*hint = unloaded_hint;
	return why;
}

/* The fence a new row carries; FL002 when NULL. */
static int64
new_fence(Relation rel, FenceTrigger *ft, HeapTuple tuple, FlWrite write)
{
	bool isnull;
	Datum d = heap_getattr(tuple, ft->attnum, RelationGetDescr(rel), &isnull);

	if (isnull)
		reject_unfenced(rel, ft, write, "The new fence is NULL.", NULL);
	return fence_value(d, ft->typid);
}

/* Per-row mode: an UPDATE's fence must not be older than the row's. */
static Datum
row_update(TriggerData *trigdata, FenceTrigger *ft)
{
	Relation rel = trigdata->tg_relation;
	HeapTuple newtuple = trigdata->tg_newtuple;
	const char *hint;
	const char *why = update_unassigned(trigdata, ft, &hint);
	Datum d;
	bool isnull;
	int64 stored;
	int64 fence;

	if (why != NULL)
	{
		if (ft->allow_unfenced)
			return PointerGetDatum(newtuple);
		reject_unfenced(rel, ft, FL_WRITE_UPDATE, why, hint);
	}
	fence = new_fence(rel, ft, newtuple, FL_WRITE_UPDATE);

	d = heap_getattr(trigdata->tg_trigtuple, ft->attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		return PointerGetDatum(newtuple); /* never fenced before: any fence may start */
	stored = fence_value(d, ft->typid);

	if (fence < stored || (ft->strict && fence == stored))
	{
		fl_count_table(RelationGetRelid(rel), true);
		if (fencelock_log_level >= 0)
			ereport(fencelock_log_level,
					(errmsg("stale fence " INT64_FORMAT
							" refused by table \"%s\" (stored fence " INT64_FORMAT ")",
							fence, RelationGetRelationName(rel), stored)));
		if (fence < stored)
			ereport(ERROR,
					(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
					 errmsg("fence " INT64_FORMAT " is older than the stored fence " INT64_FORMAT,
							fence, stored),
					 errdetail("Table \"%s\", column \"%s\": a newer lease holder has written this "
							   "row.",
							   RelationGetRelationName(rel), NameStr(ft->column)),
					 errhint("This writer has lost its lease: roll back and stop; do not retry "
							 "with the same fence."),
					 errtablecol(rel, ft->attnum)));
		/* 'strict' and the same fence: the row already carries it. */
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is not newer than the stored fence " INT64_FORMAT,
						fence, stored),
				 errdetail("Table \"%s\", column \"%s\": the row already carries this fence, and "
						   "the trigger's \"strict\" option accepts only a newer one.",
						   RelationGetRelationName(rel), NameStr(ft->column)),
				 errhint("Write the row once per grant: take a new grant before writing it again, "
						 "or drop \"strict\" from the trigger's arguments."),
				 errtablecol(rel, ft->attnum)));
	}
	return PointerGetDatum(newtuple);
}

/*
 * The lease a row is bound to: the trigger's lease=, or the row's lease column (FL002 when NULL).
 * The result is LEASE or a palloc'd string.
 */
static const char *
row_lease(Relation rel, FenceTrigger *ft, const char *lease, HeapTuple tuple, FlWrite write)
{
	bool isnull;
	Datum d;

	if (ft->mode == MODE_LEASE)
		return lease;
	d = heap_getattr(tuple, ft->lease_attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		reject_unfenced(rel, ft, write,
						psprintf("Lease column \"%s\" is NULL: the row names no lease.",
								 get_attname(ft->relid, ft->lease_attnum, false)),
						NULL);
	return TextDatumGetCString(d);
}

/* Lease-bound mode: every kind of write. */
static Datum
lease_write(TriggerData *trigdata, FenceTrigger *ft, const char *lease)
{
	Relation rel = trigdata->tg_relation;
	TriggerEvent ev = trigdata->tg_event;

	if (TRIGGER_FIRED_BY_TRUNCATE(ev))
	{
		if (ft->mode == MODE_LEASE_COLUMN)
			reject_unfenced(rel, ft, FL_WRITE_TRUNCATE,
							"The table names its lease per row; a TRUNCATE cannot show them.",
							NULL);
		fl_check_lease_shown(rel, ft->attnum, lease, FL_WRITE_TRUNCATE);
		return PointerGetDatum(NULL);
	}
	if (TRIGGER_FIRED_BY_DELETE(ev))
	{
		HeapTuple old = trigdata->tg_trigtuple;

		fl_check_lease_shown(rel, ft->attnum, row_lease(rel, ft, lease, old, FL_WRITE_DELETE),
							 FL_WRITE_DELETE);
		return PointerGetDatum(old);
	}
	if (TRIGGER_FIRED_BY_INSERT(ev))
	{
		HeapTuple tuple = trigdata->tg_trigtuple;
		int64 fence = new_fence(rel, ft, tuple, FL_WRITE_INSERT);

		fl_check_lease_write(rel, ft->attnum, row_lease(rel, ft, lease, tuple, FL_WRITE_INSERT),
							 fence);
		return PointerGetDatum(tuple);
	}
	/* UPDATE */
	{
		HeapTuple old = trigdata->tg_trigtuple;
		HeapTuple tuple = trigdata->tg_newtuple;
		const char *hint;
		const char *why = update_unassigned(trigdata, ft, &hint);
		const char *new_lease;
		const char *old_lease;

		if (why != NULL)
		{
			if (!ft->allow_unfenced)
				reject_unfenced(rel, ft, FL_WRITE_UPDATE, why, hint);
			old_lease = row_lease(rel, ft, lease, old, FL_WRITE_UPDATE);
			fl_check_lease_shown(rel, ft->attnum, old_lease, FL_WRITE_UPDATE);
			new_lease = row_lease(rel, ft, lease, tuple, FL_WRITE_UPDATE);
			if (strcmp(old_lease, new_lease) != 0)
				fl_check_lease_shown(rel, ft->attnum, new_lease, FL_WRITE_UPDATE);
		}
		else
		{
			int64 fence = new_fence(rel, ft, tuple, FL_WRITE_UPDATE);

			new_lease = row_lease(rel, ft, lease, tuple, FL_WRITE_UPDATE);
			fl_check_lease_write(rel, ft->attnum, new_lease, fence);
			/* A row moved from another lease leaves it: as a DELETE from that lease. */
			if (ft->mode == MODE_LEASE_COLUMN &&
				!heap_attisnull(old, ft->lease_attnum, RelationGetDescr(rel)))
			{
				old_lease = row_lease(rel, ft, lease, old, FL_WRITE_UPDATE);
				if (strcmp(old_lease, new_lease) != 0)
					fl_check_lease_shown(rel, ft->attnum, old_lease, FL_WRITE_UPDATE);
			}
		}
		return PointerGetDatum(tuple);
	}
}

/*
 * A change that logical replication applies (a trigger ENABLE ALWAYS or ENABLE REPLICA fires in
 * its workers: the initial table sync's COPY, and the apply of each change) was checked where it
 * was made, against the publisher's leases; this server's leases know nothing of them, and a
 * refusal would stop the subscription for good (the worker retries the same change forever).
 * It passes unchecked.  Every other session is checked, session_replication_role = replica too.
 */
static Datum
replicated_write(TriggerData *trigdata)
{
	TriggerEvent ev = trigdata->tg_event;

	if (TRIGGER_FIRED_BY_TRUNCATE(ev))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_UPDATE(ev))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}

Datum
fencelock_fence_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	FenceTrigger *entry;
	FenceTrigger ft;
	char lease[FENCELOCK_MAX_RESOURCE_LEN + 1];

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencelock.fence_trigger() must be called as a trigger"),
				 errhint("Attach it with CREATE TRIGGER ... BEFORE UPDATE ... FOR EACH ROW.")));
	/* Before the cache: CREATE OR REPLACE TRIGGER may add either to a trigger already resolved. */
	if (trigdata->tg_trigger->tgnattr > 0 || trigdata->tg_trigger->tgqual != NULL)
		fl_report_partial_fence_trigger(
			ERROR, trigdata->tg_trigger->tgname, RelationGetRelationName(trigdata->tg_relation),
			trigdata->tg_trigger->tgnattr > 0, trigdata->tg_trigger->tgqual != NULL);
	entry = lookup(trigdata);
	/* A copy: a later cache invalidation may remove the hash entry.  The lease name only when used.
	 */
	memcpy(&ft, entry, offsetof(FenceTrigger, lease));
	if (ft.mode == MODE_ROW)
	{
		check_firing_row(trigdata);
		if (IsLogicalWorker())
			return replicated_write(trigdata);
		return row_update(trigdata, &ft);
	}
	check_firing_lease(trigdata);
	if (IsLogicalWorker())
		return replicated_write(trigdata);
	if (ft.mode == MODE_LEASE)
		strlcpy(lease, entry->lease, sizeof(lease));
	else
		lease[0] = '\0';
	return lease_write(trigdata, &ft, lease);
}
