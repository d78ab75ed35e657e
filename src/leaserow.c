/*
 * leaserow.c — a lease's row found and changed directly, without a statement.
 *
 * acquire, renew and release each change the one row of fencelock.lease that the resource's
 * primary key finds.  Through SPI, starting the executor and building the grant's expressions
 * cost more than finding and changing the row (doc/bench.md).  Here the row is found with an
 * index lookup, the rule of lease.c's statement is evaluated in C, and the new version is written
 * with heap_update, with the outcome those UPDATE statements have in READ COMMITTED:
 *
 *   - the row is read with a snapshot taken now; when the rule refuses it (another owner holds
 *     the lease), nothing is locked or written;
 *   - heap_update waits for a transaction that is changing the row; when that one committed a
 *     newer version, it returns without keeping any lock, and the rule is evaluated again on the
 *     newest version, as UPDATE re-checks it.  A call that loses the race keeps no lock, which
 *     the statements need a subtransaction for (fl_run_or_undo);
 *   - a new version that is not heap-only gets its primary-key entry, as the executor inserts.
 *
 * The direct path is taken only where it is equivalent to the statements: READ COMMITTED, a
 * read-write transaction, and a lease table laid out as the install scripts made it (a heap with
 * its one primary-key index, no triggers, rules, row security, check constraints, generated
 * columns, type modifiers, partition constraint or inheritance children: a superuser may have
 * added any of them, and then the statements run).  A row that does not exist yet is inserted by
 * lease.c's statement.  Checks the executor makes before an UPDATE whatever the table's layout
 * are made here too (a publication's replica identity).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/executor.h"
#include "fencelock.h"
#include "leaserow.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* Columns of fencelock.lease, by name: later versions added the last three with ALTER TABLE. */
typedef enum FlLeaseColumn
{
	COL_RESOURCE,
	COL_OWNER,
	COL_FENCE,
	COL_ACQUIRED_AT,
	COL_EXPIRES_AT,
	COL_HOLDER,
	COL_GRANTED_HOW, /* 0.2.0 */
	COL_LOCK_DELAY,  /* 0.2.0 */
	COL_SESSION_ID,  /* 0.3.0 */
	NUM_COLUMNS
} FlLeaseColumn;

static const struct
{
	const char *name;
	Oid type;
	bool required;
} lease_columns[NUM_COLUMNS] = {
	{"resource", TEXTOID, true},
	{"owner", TEXTOID, true},
	{"fence", INT8OID, true},
	{"acquired_at", TIMESTAMPTZOID, true},
	{"expires_at", TIMESTAMPTZOID, true},
	{"holder", NAMEOID, true},
	{"granted_how", CHAROID, false},
	{"lock_delay", INTERVALOID, false},
	{"session_id", INT8OID, false},
};

/*
 * The lease table as the direct path last found it; forgotten at any invalidation of its
 * relcache entry, which creating an index, a trigger, a rule or a constraint on it causes.
 */
static struct
{
	bool valid;
	bool direct; /* laid out as the install scripts made it */
	Oid relid;
	Oid pkid;
	AttrNumber att[NUM_COLUMNS]; /* 0 when absent */
} layout;

/* Attempts at one change while concurrent grants keep replacing the row; then the statement. */
#define FL_ROW_ATTEMPTS 16

static void
layout_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == layout.relid)
		layout.valid = false;
}

static bool
layout_primary_key_ok(Relation rel)
{
	Relation idx;
	bool ok;

	if (!OidIsValid(layout.pkid))
		return false;
	idx = index_open(layout.pkid, AccessShareLock);
	ok = idx->rd_index->indnatts == 1 &&
		 idx->rd_index->indkey.values[0] == layout.att[COL_RESOURCE] &&
		 idx->rd_rel->relam == BTREE_AM_OID && idx->rd_indcollation[0] == C_COLLATION_OID &&
		 RelationGetIndexExpressions(idx) == NIL && RelationGetIndexPredicate(idx) == NIL;
	index_close(idx, AccessShareLock);
	return ok;
}

static void
layout_build(Relation rel)
{
	static bool registered = false;
	TupleDesc desc = RelationGetDescr(rel);
	List *indexes;
	bool direct;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(layout_invalidate, (Datum) 0);
		registered = true;
	}
	memset(&layout, 0, sizeof(layout));
	layout.relid = RelationGetRelid(rel);
	/*
	 * Not a partition (the statement checks the partition constraint) and without inheritance
	 * children (the statement, without ONLY, changes their rows too).  relhassubclass may stay set
	 * after the last child is dropped, until VACUUM or ANALYZE clears it; the statements run till
	 * then.
	 */
	direct = rel->rd_rel->relkind == RELKIND_RELATION && rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
			 !rel->rd_rel->relispartition && !rel->rd_rel->relhassubclass &&
			 rel->trigdesc == NULL && rel->rd_rules == NULL && !rel->rd_rel->relrowsecurity &&
			 (desc->constr == NULL || desc->constr->num_check == 0);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped)
			continue;
		if (attr->attgenerated != '\0')
			direct = false;
		for (int c = 0; c < NUM_COLUMNS; c++)
		{
			if (strcmp(NameStr(attr->attname), lease_columns[c].name) != 0)
				continue;
			layout.att[c] = attr->attnum;
			/*
			 * Only the key and the fence are never set to null.  Values are stored as computed:
			 * a type modifier, which the statements would coerce them to, is not applied.
			 */
			if (attr->atttypid != lease_columns[c].type || attr->atttypmod != -1 ||
				(attr->attnotnull && c != COL_RESOURCE && c != COL_FENCE))
				direct = false;
		}
	}
	for (int c = 0; c < NUM_COLUMNS; c++)
		if (lease_columns[c].required && layout.att[c] == InvalidAttrNumber)
			direct = false;
	layout.pkid = FL_PRIMARY_KEY_INDEX(rel);
	indexes = RelationGetIndexList(rel);
	if (list_length(indexes) != 1 || linitial_oid(indexes) != layout.pkid)
		direct = false;
	list_free(indexes);
	layout.direct = direct && layout_primary_key_ok(rel);
	layout.valid = true;
}

/* The visible version of a resource's row, into slot; false when it has none. */
bool
fl_lease_row_fetch(Relation rel, Relation idx, Snapshot snapshot, text *resource,
				   TupleTableSlot *slot)
{
	ScanKeyData key;
	IndexScanDesc scan;
	bool found;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(resource));
	key.sk_collation = C_COLLATION_OID;
	scan = FL_INDEX_BEGINSCAN(rel, idx, snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

static bool
text_equal(Datum a, text *b)
{
	text *t = DatumGetTextPP(a);
	bool equal = VARSIZE_ANY_EXHDR(t) == VARSIZE_ANY_EXHDR(b) &&
				 memcmp(VARDATA_ANY(t), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)) == 0;

	if ((Pointer) t != DatumGetPointer(a))
		pfree(t);
	return equal;
}

static Datum
column(const Datum *values, const bool *isnull, FlLeaseColumn c, bool *null)
{
	AttrNumber att = layout.att[c];

	if (att == InvalidAttrNumber)
	{
		*null = true;
		return (Datum) 0;
	}
	*null = isnull[att - 1];
	return values[att - 1];
}

static void
set_column(Datum *values, bool *isnull, FlLeaseColumn c, Datum value, bool null)
{
	AttrNumber att = layout.att[c];

	if (att != InvalidAttrNumber)
	{
		values[att - 1] = value;
		isnull[att - 1] = null;
	}
}

/*
 * Apply the change's rule to a row (values/isnull, changed in place).  Returns false when the
 * rule refuses the row.  The rules are those of lease.c's statements: SAME_LIVE_OWNER, and for a
 * grant GRANT_WHERE_V2 (lock_delay, a session that ended) or the 0.1.0 rule.
 */
static bool
apply_rule(FlRowChange *c, Datum *values, bool *isnull)
{
	bool owner_null, expires_null, null;
	Datum owner = column(values, isnull, COL_OWNER, &owner_null);
	TimestampTz expires =
		DatumGetTimestampTz(column(values, isnull, COL_EXPIRES_AT, &expires_null));
	int64 fence = DatumGetInt64(column(values, isnull, COL_FENCE, &null));
	bool same_owner = !owner_null && text_equal(owner, c->owner);
	bool same_live = same_owner && !expires_null && expires > c->now;
	TimestampTz deadline = expires;

	c->fence = fence;
	if (c->op != FL_ROW_GRANT)
	{
		if (!same_live)
			return false;
		set_column(values, isnull, COL_EXPIRES_AT, TimestampTzGetDatum(c->expires), false);
		if (c->op == FL_ROW_RELEASE)
			set_column(values, isnull, COL_OWNER, (Datum) 0, true);
		return true;
	}

	/*
	 * A grant: is the row free for this owner?  Only another owner's row needs its deadline with
	 * lock_delay added, which may be out of range: the statement evaluates the sum only then.
	 */
	if (!owner_null && !same_owner)
	{
		if (c->v2 && !expires_null)
		{
			Datum delay = column(values, isnull, COL_LOCK_DELAY, &null);

			if (!null)
				deadline = DatumGetTimestampTz(DirectFunctionCall2(
					timestamptz_pl_interval, TimestampTzGetDatum(expires), delay));
		}
		if (expires_null || deadline > c->now)
		{
			Datum session = column(values, isnull, COL_SESSION_ID, &null);

			if (!c->v2 || null || fl_session_alive(DatumGetInt64(session)))
			{
				c->holder_expires = expires_null ? 0 : deadline;
				return false;
			}
		}
	}

	if (same_live)
	{
		/* The same owner's live lease keeps its fence, start and how it was granted. */
		Datum how = column(values, isnull, COL_GRANTED_HOW, &null);

		c->is_new = false;
		c->how = null ? FL_GRANTED_NEW : DatumGetChar(how);
	}
	else
	{
		if (pg_add_s64_overflow(Max(fence, c->base), 1, &c->fence))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE), errmsg("bigint out of range")));
		c->is_new = true;
		c->how = owner_null   ? FL_GRANTED_AFTER_RELEASE
				 : same_owner ? FL_GRANTED_AFTER_EXPIRY
							  : FL_GRANTED_TAKEOVER;
		set_column(values, isnull, COL_FENCE, Int64GetDatum(c->fence), false);
		set_column(values, isnull, COL_ACQUIRED_AT, TimestampTzGetDatum(c->now), false);
	}
	set_column(values, isnull, COL_OWNER, PointerGetDatum(c->owner), false);
	set_column(values, isnull, COL_EXPIRES_AT, TimestampTzGetDatum(c->expires), false);
	set_column(values, isnull, COL_HOLDER, NameGetDatum(c->holder), false);
	if (c->v2)
	{
		set_column(values, isnull, COL_GRANTED_HOW, CharGetDatum(c->how), false);
		set_column(values, isnull, COL_LOCK_DELAY, IntervalPGetDatum(c->lock_delay), false);
		set_column(values, isnull, COL_SESSION_ID, Int64GetDatum(c->session), c->session == 0);
	}
	else
	{
		/* The 0.1.0 functions report every grant as new. */
		c->is_new = true;
		c->how = FL_GRANTED_NEW;
	}
	return true;
}

/* Write the new version of the row in slot; false when a concurrent change got there first. */
static bool
write_row(Relation rel, Relation idx, TupleTableSlot *slot, Datum *values, bool *isnull,
		  bool *self_modified)
{
	HeapTuple tuple = heap_form_tuple(RelationGetDescr(rel), values, isnull);
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result result;

	FL_UPDATE_INDEXES_DECL(update_indexes);

	result = FL_HEAP_UPDATE(rel, &slot->tts_tid, tuple, GetCurrentCommandId(true), &tmfd, &lockmode,
							update_indexes);
	switch (result)
	{
		case TM_Ok:
			if (FL_UPDATE_NEEDS_INDEX_ENTRIES(update_indexes, tuple))
			{
				Datum key = values[layout.att[COL_RESOURCE] - 1];
				bool key_null = false;

				index_insert(idx, &key, &key_null, &tuple->t_self, rel, UNIQUE_CHECK_YES, true,
							 BuildIndexInfo(idx));
			}
			/* Later statements and calls of this transaction see the new version. */
			CommandCounterIncrement();
			heap_freetuple(tuple);
			return true;
		case TM_Updated:
		case TM_Deleted:
			break;
		case TM_SelfModified:
			*self_modified = true;
			break;
		default:
			elog(ERROR, "unexpected result %d updating a row of fencelock.lease", (int) result);
	}
	heap_freetuple(tuple);
	return false;
}

FlRowResult
fl_lease_row_change(FlRowChange *c)
{
	FlRowResult result = FL_ROW_USE_SQL;
	Relation rel;
	Relation idx;
	TupleTableSlot *slot;
	Datum *values;
	bool *isnull;

	/* Where the statements would raise an error or see a transaction snapshot, let them. */
	if (IsolationUsesXactSnapshot() || XactReadOnly || IsInParallelMode())
		return FL_ROW_USE_SQL;

	rel = table_open(fl_lease_relid(), RowExclusiveLock);
	if (!layout.valid || layout.relid != RelationGetRelid(rel))
		layout_build(rel);
	if (!layout.direct)
	{
		table_close(rel, RowExclusiveLock);
		return FL_ROW_USE_SQL;
	}
	/*
	 * As the executor does before any UPDATE of a table: when a publication of it publishes
	 * updates, the table must have a replica identity that the publication's row filter and
	 * column list fit, or logical decoding could not identify or filter the change.
	 */
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	idx = index_open(layout.pkid, RowExclusiveLock);
	slot = table_slot_create(rel, NULL);
	values = palloc(sizeof(Datum) * RelationGetDescr(rel)->natts);
	isnull = palloc(sizeof(bool) * RelationGetDescr(rel)->natts);

	for (int attempt = 0; attempt < FL_ROW_ATTEMPTS; attempt++)
	{
		Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
		bool found = fl_lease_row_fetch(rel, idx, snapshot, c->resource, slot);
		bool self_modified = false;

		UnregisterSnapshot(snapshot);
		if (!found)
		{
			result = FL_ROW_MISSING;
			break;
		}
		slot_getallattrs(slot);
		memcpy(values, slot->tts_values, sizeof(Datum) * slot->tts_nvalid);
		memcpy(isnull, slot->tts_isnull, sizeof(bool) * slot->tts_nvalid);
		if (!apply_rule(c, values, isnull))
		{
			result = FL_ROW_REFUSED;
			break;
		}
		if (write_row(rel, idx, slot, values, isnull, &self_modified))
		{
			result = FL_ROW_CHANGED;
			break;
		}
		ExecClearTuple(slot);
		if (self_modified)
			break; /* changed by this transaction in a way the statement reports */
		c->is_new = false;
		c->holder_expires = 0;
	}

	pfree(values);
	pfree(isnull);
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return result;
}
