/*
 * store/row.c — fencelock.lease as this backend knows it, and a lease's row found, locked and
 * changed directly, without a statement.
 *
 * acquire, renew and release each change the one row of fencelock.lease that the resource's
 * primary key finds.  Through SPI, starting the executor and building the grant's expressions
 * cost more than finding and changing the row (doc/bench.md).  Here the row is found with an
 * index lookup, the lease rule (store/rule.c, handed in as a callback) is applied to its values,
 * and the new version is written with heap_update, with the outcome the rule's UPDATE statements
 * have in READ COMMITTED:
 *
 *   - the row is read with a snapshot taken now; when the rule refuses it (another owner holds
 *     the lease), nothing is locked or written;
 *   - heap_update waits for a transaction that is changing the row; when that one committed a
 *     newer version, it returns without keeping any lock, and the rule is applied again on the
 *     newest version, as UPDATE re-checks it.  A call that loses the race keeps no lock, which
 *     the statements need a subtransaction for (fl_run_or_undo).  A try-once grant waits for
 *     nobody: it locks the version the rule allowed first, with LockWaitSkip (lock_nowait), and
 *     is busy when that would block;
 *   - a new version that is not heap-only gets its primary-key entry, as the executor inserts.
 *
 * The direct path is taken only where it is equivalent to the statements: READ COMMITTED, a
 * read-write transaction, and a lease table laid out as the install scripts made it (layout_build:
 * a heap with its one primary-key index, on resource alone with the "C" collation and the default
 * operator class, immediate; no triggers, rules, row security, check constraints, NOT NULL beyond
 * resource and fence, generated or identity columns, type modifiers, other types, partition
 * constraint or inheritance children: a superuser may have added any of them, and then the
 * statements run).  Owners are compared with the owner column's collation, as the statements'
 * = does (a superuser may give it a nondeterministic one).  The statements run as the table's
 * owner through the executor, so the direct path also needs that role's SELECT and UPDATE on the
 * table, and no ExecutorCheckPerms_hook (checked at each call).  A row that does not exist yet is
 * inserted by the statement.  Checks the executor makes before an UPDATE whatever the table's
 * layout are made here too (a publication's replica identity).
 *
 * A lease-bound write's share lock on a lease row is taken directly by the same rules
 * (fl_lease_row_lock_share), for fewer of them: a read is not changed by triggers, rules,
 * constraints or type modifiers.
 *
 * The layout is this backend's one cache of the lease table: found by the OID base/asowner.c has
 * checked, forgotten at any invalidation of its relcache entry.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "base/asowner.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "compat.h"
#include "executor/executor.h"
#include "store/row.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
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
 * The lease table as the direct paths last found it; forgotten at any invalidation of its
 * relcache entry, which creating an index, a trigger, a rule or a constraint on it causes, and
 * so do ALTER TABLE, GRANT and REVOKE, a publication or an inheritance child.
 */
static struct
{
	bool valid;           /* built completely, and no invalidation came while it was built */
	uint64 invalidations; /* counted by the callback: a build that saw one is not kept */
	bool readable;        /* fence/bound.c may read fence and holder directly */
	bool direct; /* renew and release may change a row directly, and a grant of the 0.1.0 API */
	bool v2;     /* ... and of the later APIs: granted_how and lock_delay are there too */
	Oid relid;
	Oid pkid;
	Oid owner_collation;         /* the owner column's: the statements compare owners with it */
	bool owner_deterministic;    /* ... and its equality is that of the bytes */
	AttrNumber att[NUM_COLUMNS]; /* 0 when absent */
} layout;

/* Attempts at one change while concurrent grants keep replacing the row; then the statement. */
#define FL_ROW_ATTEMPTS 16

static void
layout_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == layout.relid)
	{
		layout.valid = false;
		layout.invalidations++;
	}
}

/*
 * The primary key the direct paths look rows up by: a btree on resource alone, with its column's
 * "C" collation and the default operator class, so that its equality is the statements' =
 * (bytes), and immediate, as ON CONFLICT (resource) needs; no expression, no predicate.
 */
static bool
layout_primary_key_ok(Relation rel)
{
	Relation idx;
	bool ok;

	if (!OidIsValid(layout.pkid) || layout.att[COL_RESOURCE] == InvalidAttrNumber)
		return false;
	idx = index_open(layout.pkid, AccessShareLock);
	ok = idx->rd_index->indisprimary && idx->rd_index->indisunique && idx->rd_index->indimmediate &&
		 idx->rd_index->indisvalid && idx->rd_index->indnatts == 1 &&
		 idx->rd_index->indkey.values[0] == layout.att[COL_RESOURCE] &&
		 idx->rd_rel->relam == BTREE_AM_OID && idx->rd_opfamily[0] == TEXT_BTREE_FAM_OID &&
		 idx->rd_indcollation[0] == C_COLLATION_OID && RelationGetIndexExpressions(idx) == NIL &&
		 RelationGetIndexPredicate(idx) == NIL;
	index_close(idx, AccessShareLock);
	return ok;
}

static int
lease_column(const char *name)
{
	for (int c = 0; c < NUM_COLUMNS; c++)
		if (strcmp(name, lease_columns[c].name) == 0)
			return c;
	return -1;
}

static void
layout_build(Relation rel)
{
	static bool registered = false;
	TupleDesc desc = RelationGetDescr(rel);
	bool typed[NUM_COLUMNS] = {false};
	List *indexes;
	bool readable;
	bool direct;
	uint64 invalidations = layout.invalidations;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(layout_invalidate, (Datum) 0);
		registered = true;
	}
	memset(&layout, 0, sizeof(layout));
	layout.invalidations = invalidations;
	layout.relid = RelationGetRelid(rel);
	/*
	 * Valid only at the end, and only when no invalidation arrived while this ran (opening the
	 * index, a catalog lookup): an error on the way (a cancel) leaves it invalid, and the next
	 * call builds anew.  Marked valid from the start (issue 35), a build interrupted at the
	 * primary key's lock was kept with the direct paths off for the rest of the session, and
	 * one cut short in its column loop without the session_id column: grants that neither set
	 * nor cleared a row's session.
	 */
	/*
	 * A heap (the direct paths read and write heap tuples) without inheritance children (the
	 * statements, without ONLY, read and change their rows too; relhassubclass may stay set after
	 * the last child is dropped, until VACUUM or ANALYZE clears it: the statements run till then)
	 * and without row security.  A change must also not be on a partition (the statement checks
	 * the partition constraint) or fire triggers, rules or check constraints.
	 */
	readable = rel->rd_rel->relkind == RELKIND_RELATION &&
			   rel->rd_rel->relam == HEAP_TABLE_AM_OID && !rel->rd_rel->relhassubclass &&
			   !rel->rd_rel->relrowsecurity;
	direct = readable && !rel->rd_rel->relispartition && rel->trigdesc == NULL &&
			 rel->rd_rules == NULL && (desc->constr == NULL || desc->constr->num_check == 0);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		int c;

		if (attr->attisdropped)
			continue;
		/* UPDATE computes a generated column, and refuses to set an identity column. */
		if (attr->attgenerated != '\0' || attr->attidentity != '\0')
			direct = false;
		/*
		 * Only the key and the fence are never set to null: a NOT NULL elsewhere is for the
		 * statements, also on a column a superuser added, which the direct path keeps as it is
		 * (a NOT VALID constraint may have left a NULL there that UPDATE refuses).
		 */
		c = lease_column(NameStr(attr->attname));
		if (attr->attnotnull && c != COL_RESOURCE && c != COL_FENCE)
			direct = false;
		if (c < 0)
			continue;
		layout.att[c] = attr->attnum;
		/*
		 * Values are read and stored as they are: another type (a domain too) or a type
		 * modifier, which the statements would coerce them to, is for the statements; so is a
		 * virtual generated column, which has no stored value.
		 */
		typed[c] = attr->atttypid == lease_columns[c].type && attr->atttypmod == -1 &&
				   attr->attgenerated == '\0';
		if (c == COL_OWNER && typed[c])
		{
			layout.owner_collation = attr->attcollation;
			layout.owner_deterministic = get_collation_isdeterministic(attr->attcollation);
		}
		if (c == COL_RESOURCE && attr->attcollation != C_COLLATION_OID)
			typed[c] = false;
	}
	for (int c = 0; c < NUM_COLUMNS; c++)
		if ((lease_columns[c].required || layout.att[c] != InvalidAttrNumber) && !typed[c])
			direct = false;
	readable = readable && typed[COL_RESOURCE] && typed[COL_FENCE] && typed[COL_HOLDER];
	layout.pkid = FL_PRIMARY_KEY_INDEX(rel);
	indexes = RelationGetIndexList(rel);
	if (list_length(indexes) != 1 || linitial_oid(indexes) != layout.pkid)
		direct = false;
	list_free(indexes);
	if (!layout_primary_key_ok(rel))
		readable = direct = false;
	layout.readable = readable;
	layout.direct = direct;
	layout.v2 = direct && typed[COL_GRANTED_HOW] && typed[COL_LOCK_DELAY];
	layout.valid = layout.invalidations == invalidations;
}

/* The layout of the lease table REL, which the caller has opened. */
static void
layout_current(Relation rel)
{
	if (!layout.valid || layout.relid != RelationGetRelid(rel))
		layout_build(rel);
}

/*
 * The statements run as the lease table's owner (base/asowner.c makes sure it is the extension's
 * owner) through the executor, which checks that role's SELECT and UPDATE privileges (FOR SHARE
 * needs UPDATE too) and calls a module's ExecutorCheckPerms_hook (sepgsql, pgaudit).  Checked at
 * every call: a superuser made NOSUPERUSER keeps the layout cached.
 */
static bool
owner_may_lock(Relation rel)
{
	Oid owner = rel->rd_rel->relowner;

	return ExecutorCheckPerms_hook == NULL &&
		   (superuser_arg(owner) ||
			pg_class_aclmask(RelationGetRelid(rel), owner, ACL_SELECT | ACL_UPDATE, ACLMASK_ALL) ==
				(ACL_SELECT | ACL_UPDATE));
}

/* The visible version of a resource's row, into slot; false when it has none. */
static bool
row_fetch(Relation rel, Relation idx, Snapshot snapshot, text *resource, TupleTableSlot *slot)
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

/*
 * Whether a row's owner is OWNER: the statements' = on text, with the owner column's collation;
 * for a deterministic one (the install's), what texteq does with it: compare the bytes.
 */
bool
fl_lease_row_owner_is(const FlLeaseRow *row, text *owner)
{
	text *t;
	bool equal;

	if (row->owner_null)
		return false;
	if (!layout.owner_deterministic)
		return DatumGetBool(DirectFunctionCall2Coll(texteq, layout.owner_collation, row->owner,
													PointerGetDatum(owner)));
	t = DatumGetTextPP(row->owner);
	equal = VARSIZE_ANY_EXHDR(t) == VARSIZE_ANY_EXHDR(owner) &&
			memcmp(VARDATA_ANY(t), VARDATA_ANY(owner), VARSIZE_ANY_EXHDR(owner)) == 0;
	if ((Pointer) t != DatumGetPointer(row->owner))
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

/* The values the rule reads, from a row's columns. */
static void
row_read(FlLeaseRow *row, const Datum *values, const bool *isnull)
{
	bool null;

	memset(row, 0, sizeof(*row));
	row->owner = column(values, isnull, COL_OWNER, &row->owner_null);
	row->expires = DatumGetTimestampTz(column(values, isnull, COL_EXPIRES_AT, &row->expires_null));
	row->fence = DatumGetInt64(column(values, isnull, COL_FENCE, &null));
	row->how = DatumGetChar(column(values, isnull, COL_GRANTED_HOW, &row->how_null));
	row->lock_delay = column(values, isnull, COL_LOCK_DELAY, &row->lock_delay_null);
	row->session = DatumGetInt64(column(values, isnull, COL_SESSION_ID, &row->session_null));
}

/* What the rule set, into the row's columns. */
static void
row_write(const FlLeaseRow *row, Datum *values, bool *isnull)
{
	if (row->set & FL_SET_OWNER)
		set_column(values, isnull, COL_OWNER, row->owner, row->owner_null);
	if (row->set & FL_SET_EXPIRES)
		set_column(values, isnull, COL_EXPIRES_AT, TimestampTzGetDatum(row->expires), false);
	if (row->set & FL_SET_FENCE)
		set_column(values, isnull, COL_FENCE, Int64GetDatum(row->fence), false);
	if (row->set & FL_SET_ACQUIRED_AT)
		set_column(values, isnull, COL_ACQUIRED_AT, TimestampTzGetDatum(row->acquired_at), false);
	if (row->set & FL_SET_HOLDER)
		set_column(values, isnull, COL_HOLDER, NameGetDatum(row->holder), false);
	if (row->set & FL_SET_HOW)
		set_column(values, isnull, COL_GRANTED_HOW, CharGetDatum(row->how), row->how_null);
	if (row->set & FL_SET_LOCK_DELAY)
		set_column(values, isnull, COL_LOCK_DELAY, row->lock_delay, row->lock_delay_null);
	if (row->set & FL_SET_SESSION)
		set_column(values, isnull, COL_SESSION_ID, Int64GetDatum(row->session), row->session_null);
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
			break; /* a concurrent change committed: the caller reads the row again */
		default:
			/*
			 * TM_SelfModified: this transaction changed the row after the snapshot's command (a
			 * statement of its own that is still running), which the statement reports.  A
			 * heap_update that waits returns nothing else; whatever it might is the statement's
			 * to handle too.
			 */
			*self_modified = true;
			break;
	}
	heap_freetuple(tuple);
	return false;
}

/*
 * A try-once grant must not wait for another transaction that is changing or has locked the row
 * (issue 22): before heap_update, which would wait for it, the version the rule allowed is locked
 * as UPDATE ... NOWAIT locks it (LockWaitSkip: TM_WouldBlock instead of a wait), without following
 * the update chain, so that a lock is only ever taken on the version the rule was applied to (a
 * loser keeps nothing locked).  Our own lock then lets heap_update go on at once.  TM_Updated or
 * TM_Deleted: a change committed since the snapshot, read again.
 */
static TM_Result
lock_nowait(Relation rel, TupleTableSlot *slot, Snapshot snapshot)
{
	TupleTableSlot *locked = table_slot_create(rel, NULL);
	ItemPointerData tid = slot->tts_tid;
	TM_FailureData tmfd;
	TM_Result result = table_tuple_lock(rel, &tid, snapshot, locked, GetCurrentCommandId(true),
										LockTupleNoKeyExclusive, LockWaitSkip, 0, &tmfd);

	ExecDropSingleTupleTableSlot(locked);
	return result;
}

FlRowResult
fl_lease_row_change(text *resource, bool need_v2, bool nowait, FlRowRule rule, void *arg)
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
	layout_current(rel);
	if (!layout.direct || (need_v2 && !layout.v2) || !owner_may_lock(rel))
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
		bool found = row_fetch(rel, idx, snapshot, resource, slot);
		bool self_modified = false;
		FlLeaseRow row;

		if (!found)
		{
			UnregisterSnapshot(snapshot);
			result = FL_ROW_MISSING;
			break;
		}
		slot_getallattrs(slot);
		/*
		 * A NULL fence (a NOT VALID constraint on 18, or none): what the statements make of it
		 * is theirs to say.
		 */
		if (slot->tts_isnull[layout.att[COL_FENCE] - 1])
		{
			UnregisterSnapshot(snapshot);
			break;
		}
		memcpy(values, slot->tts_values, sizeof(Datum) * slot->tts_nvalid);
		memcpy(isnull, slot->tts_isnull, sizeof(bool) * slot->tts_nvalid);
		row_read(&row, values, isnull);
		if (!rule(&row, arg))
		{
			UnregisterSnapshot(snapshot);
			result = FL_ROW_REFUSED;
			break;
		}
		if (nowait)
		{
			TM_Result locked = lock_nowait(rel, slot, snapshot);

			if (locked == TM_WouldBlock)
			{
				UnregisterSnapshot(snapshot);
				result = FL_ROW_BUSY;
				break;
			}
			if (locked != TM_Ok)
			{
				UnregisterSnapshot(snapshot);
				ExecClearTuple(slot);
				if (locked == TM_Updated || locked == TM_Deleted)
					continue;
				break; /* TM_SelfModified, TM_Invisible: the statement's to report */
			}
		}
		UnregisterSnapshot(snapshot);
		row_write(&row, values, isnull);
		if (write_row(rel, idx, slot, values, isnull, &self_modified))
		{
			result = FL_ROW_CHANGED;
			break;
		}
		ExecClearTuple(slot);
		if (self_modified)
			break; /* changed by this transaction in a way the statement reports */
	}

	pfree(values);
	pfree(isnull);
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return result;
}

/* Whether the text in D is KEY, byte for byte (the lease table's key has the "C" collation). */
static bool
key_equal(Datum d, text *key)
{
	text *t = DatumGetTextPP(d);
	bool equal = VARSIZE_ANY_EXHDR(t) == VARSIZE_ANY_EXHDR(key) &&
				 memcmp(VARDATA_ANY(t), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)) == 0;

	if ((Pointer) t != DatumGetPointer(d))
		pfree(t);
	return equal;
}

/*
 * The locked version of a lease's row: its fence and holder, and whether a group holds it (owner
 * '', store/group.c).  A NULL fence (a superuser's doing) is no fence issued, as the statement's
 * reader (store/rule.c) takes it.
 */
static void
read_locked_row(TupleTableSlot *slot, bool *found, int64 *fence, NameData *holder,
				bool *holder_null, TimestampTz *acquired_at, bool *group)
{
	bool isnull;
	Datum d = slot_getattr(slot, layout.att[COL_FENCE], &isnull);

	if (isnull)
		return;
	*found = true;
	*fence = DatumGetInt64(d);
	d = slot_getattr(slot, layout.att[COL_OWNER], &isnull);
	*group = !isnull && VARSIZE_ANY_EXHDR(DatumGetPointer(d)) == 0;
	d = slot_getattr(slot, layout.att[COL_HOLDER], holder_null);
	if (!*holder_null)
		namestrcpy(holder, NameStr(*DatumGetName(d)));
	/* A superuser may have dropped the column or changed its type: then it is unknown. */
	if (layout.att[COL_ACQUIRED_AT] == InvalidAttrNumber ||
		TupleDescAttr(slot->tts_tupleDescriptor, layout.att[COL_ACQUIRED_AT] - 1)->atttypid !=
			TIMESTAMPTZOID)
		return;
	d = slot_getattr(slot, layout.att[COL_ACQUIRED_AT], &isnull);
	if (!isnull)
		*acquired_at = DatumGetTimestampTz(d);
}

/*
 * An index lookup on the primary key, then a tuple lock on the newest version of the row (waiting
 * for a grant in progress, following a grant that committed meanwhile), as SELECT ... FOR SHARE
 * does in READ COMMITTED.  The executor and SPI cost three times the check itself on a one-row
 * UPDATE.  Returns false when the table is not laid out for it, or when the row was changed by
 * this same transaction in a way this command does not see: the caller then asks with a
 * statement, which sees all of its own changes.
 */
bool
fl_lease_row_lock_share(text *resource, bool *found, int64 *fence, NameData *holder,
						bool *holder_null, TimestampTz *acquired_at, bool *group)
{
	Relation rel;
	Relation idx;
	Snapshot snapshot;
	TupleTableSlot *slot;
	bool done = true;

	*found = false;
	*group = false;
	/* A read-only transaction: the statement's FOR SHARE raises the error (25006). */
	if (XactReadOnly || IsInParallelMode())
		return false;
	rel = table_open(fl_lease_relid(), RowShareLock);
	layout_current(rel);
	if (!layout.readable || !owner_may_lock(rel))
	{
		table_close(rel, NoLock);
		return false;
	}
	idx = index_open(layout.pkid, AccessShareLock);
	/*
	 * A snapshot taken now, with the current command ID, as the statement would take: it shows a
	 * grant made earlier in this same statement (acquire in the write's VALUES, its SET list or a
	 * CTE), which the writing statement's own snapshot does not, and any grant committed since.
	 */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	slot = table_slot_create(rel, NULL);
	if (row_fetch(rel, idx, snapshot, resource, slot))
	{
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;

		switch (table_tuple_lock(rel, &tid, snapshot, slot, GetCurrentCommandId(false),
								 LockTupleShare, LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
								 &tmfd))
		{
			case TM_Ok:
			{
				bool isnull;
				Datum d = slot_getattr(slot, layout.att[COL_RESOURCE], &isnull);

				/*
				 * A newer version is the row only while it has the same key, as the statement
				 * checks its condition again on the version it locked.
				 */
				if (!tmfd.traversed || (!isnull && key_equal(d, resource)))
					read_locked_row(slot, found, fence, holder, holder_null, acquired_at, group);
				break;
			}
			case TM_Deleted:
				/* purged while we looked */
				break;
			default:
				/*
				 * TM_SelfModified, TM_Invisible: this transaction changed the row after this
				 * command began (a statement of its own that is still running).  Waiting and
				 * following the update chain, the lock returns nothing else; whatever it might
				 * is for the statement too.
				 */
				done = false;
				break;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	index_close(idx, AccessShareLock);
	table_close(rel, NoLock);
	return done;
}

bool
fl_lease_table_has_sessions(void)
{
	Oid relid = fl_lease_relid();

	if (!layout.valid || layout.relid != relid)
	{
		Relation rel = table_open(relid, AccessShareLock);

		layout_current(rel);
		table_close(rel, AccessShareLock);
	}
	return layout.att[COL_SESSION_ID] != InvalidAttrNumber;
}

/*
 * Whether another transaction is inserting or deleting RESOURCE's row right now: the row a
 * try-once grant's INSERT ... ON CONFLICT would wait for (INSERT has no NOWAIT).  A dirty
 * snapshot sees such a version and names its transaction; a row whose insert committed is not
 * in progress.  False where the table is not laid out for the lookup (the insert then waits its
 * 1 ms at most).
 */
bool
fl_lease_row_in_progress(text *resource)
{
	SnapshotData dirty;
	Relation rel;
	Relation idx;
	TupleTableSlot *slot;
	bool busy = false;

	if (IsInParallelMode())
		return false;
	rel = table_open(fl_lease_relid(), AccessShareLock);
	layout_current(rel);
	if (!layout.readable)
	{
		table_close(rel, AccessShareLock);
		return false;
	}
	idx = index_open(layout.pkid, AccessShareLock);
	slot = table_slot_create(rel, NULL);
	InitDirtySnapshot(dirty);
	if (row_fetch(rel, idx, &dirty, resource, slot))
		busy =
			(TransactionIdIsValid(dirty.xmin) &&
			 !TransactionIdIsCurrentTransactionId(dirty.xmin)) ||
			(TransactionIdIsValid(dirty.xmax) && !TransactionIdIsCurrentTransactionId(dirty.xmax));
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	return busy;
}
