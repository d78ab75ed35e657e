/*
 * trigger.c — fencelock.fence_trigger(): the resource itself refuses writes from stale holders.
 *
 *   CREATE TRIGGER fence BEFORE UPDATE ON orders FOR EACH ROW
 *       EXECUTE FUNCTION fencelock.fence_trigger('last_fence' [, 'strict'] [, 'allow_unfenced']);
 *
 * An UPDATE whose new fence is lower than the stored one fails with FL001 (with 'strict', an
 * equal one too); a NULL fence, or an UPDATE that does not assign the fence column at all, fails
 * with FL002 (unless 'allow_unfenced', which lets an UPDATE that leaves the column alone pass).
 *
 * The trigger's arguments are resolved once per trigger and kept in a backend-local hash keyed by
 * the trigger's OID; a relcache invalidation of the table (ALTER TABLE, DROP/CREATE TRIGGER)
 * drops the entry, so the next row resolves it again.
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fencelock.h"
#include "shmem.h"
#include "nodes/bitmapset.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

PG_FUNCTION_INFO_V1(fencelock_fence_trigger);

#define DEFAULT_FENCE_COLUMN "last_fence"

typedef struct FenceTrigger
{
	Oid tgoid; /* hash key */
	Oid relid;
	AttrNumber attnum;
	Oid typid; /* INT2OID, INT4OID or INT8OID (the base type) */
	bool strict;
	bool allow_unfenced;
} FenceTrigger;

static HTAB *fence_triggers = NULL;

static void
fence_trigger_relcache_cb(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	FenceTrigger *entry;

	if (fence_triggers == NULL)
		return;
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

static void
check_firing(TriggerData *trigdata)
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
	ft->strict = false;
	ft->allow_unfenced = false;
	for (int i = 1; i < tg->tgnargs; i++)
	{
		if (strcmp(tg->tgargs[i], "strict") == 0)
			ft->strict = true;
		else if (strcmp(tg->tgargs[i], "allow_unfenced") == 0)
			ft->allow_unfenced = true;
		else
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("unknown option \"%s\" for trigger \"%s\" on table \"%s\"",
								   tg->tgargs[i], tg->tgname, RelationGetRelationName(rel)),
							errhint("The options after the column name are \"strict\" and "
									"\"allow_unfenced\".")));
	}

	attnum = get_attnum(ft->relid, column);
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
}

static FenceTrigger *
lookup(TriggerData *trigdata)
{
	Oid tgoid = trigdata->tg_trigger->tgoid;
	FenceTrigger *ft;
	bool found;

	if (fence_triggers == NULL)
		fence_trigger_cache_init();
	ft = hash_search(fence_triggers, &tgoid, HASH_FIND, NULL);
	if (ft != NULL)
		return ft;

	/* Resolve into a local copy first, so an error leaves no half-filled entry behind. */
	{
		FenceTrigger tmp;

		tmp.tgoid = tgoid;
		resolve(&tmp, trigdata);
		ft = hash_search(fence_triggers, &tgoid, HASH_ENTER, &found);
		*ft = tmp;
	}
	return ft;
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

pg_noreturn static void reject_unfenced(Relation rel, FenceTrigger *ft, const char *why);

static void
reject_unfenced(Relation rel, FenceTrigger *ft, const char *why)
{
	fl_count_table(RelationGetRelid(rel), false);
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level, (errmsg("unfenced update of table \"%s\" refused: %s",
											 RelationGetRelationName(rel), why)));
	ereport(ERROR, (errcode(ERRCODE_FENCELOCK_UNFENCED),
					errmsg("update of table \"%s\" carries no fence", RelationGetRelationName(rel)),
					errdetail("%s", why),
					errhint("Set column \"%s\" to the fence of the lease this write is made under.",
							get_attname(ft->relid, ft->attnum, false)),
					errtablecol(rel, ft->attnum)));
}

Datum
fencelock_fence_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation rel;
	FenceTrigger trig;
	FenceTrigger *ft = &trig;
	HeapTuple oldtuple;
	HeapTuple newtuple;
	Datum d;
	bool isnull;
	int64 stored;
	int64 fence;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencelock.fence_trigger() must be called as a trigger"),
				 errhint("Attach it with CREATE TRIGGER ... BEFORE UPDATE ... FOR EACH ROW.")));
	check_firing(trigdata);
	rel = trigdata->tg_relation;
	/* A copy: a later cache invalidation may remove the hash entry. */
	trig = *lookup(trigdata);
	oldtuple = trigdata->tg_trigtuple;
	newtuple = trigdata->tg_newtuple;

	if (!bms_is_member(ft->attnum - FirstLowInvalidHeapAttributeNumber, trigdata->tg_updatedcols))
	{
		if (ft->allow_unfenced)
			return PointerGetDatum(newtuple);
		reject_unfenced(rel, ft, "The UPDATE does not assign the fence column.");
	}

	d = heap_getattr(newtuple, ft->attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		reject_unfenced(rel, ft, "The new fence is NULL.");
	fence = fence_value(d, ft->typid);

	d = heap_getattr(oldtuple, ft->attnum, RelationGetDescr(rel), &isnull);
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
		ereport(
			ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg(fence < stored
						? "fence " INT64_FORMAT " is older than the stored fence " INT64_FORMAT
						: "fence " INT64_FORMAT " is not newer than the stored fence " INT64_FORMAT,
					fence, stored),
			 errdetail("Table \"%s\", column \"%s\": a newer lease holder has written this row.",
					   RelationGetRelationName(rel), get_attname(ft->relid, ft->attnum, false)),
			 errhint("This writer has lost its lease: roll back and stop; do not retry with "
					 "the same fence."),
			 errtablecol(rel, ft->attnum)));
	}

	return PointerGetDatum(newtuple);
}
