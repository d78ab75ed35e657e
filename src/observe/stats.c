/*
 * observe/stats.c — fencelock's statistics in shared memory: the counters (fencelock.stats), the
 * per-table refusal counts (fencelock.table_stats), the counts of prepared transactions until
 * they end, the eviction rule of the cluster-wide statistics tables (observe/stats.h: table_stats
 * and observe/resstats.c's resource_stats follow it), and the SQL functions that read and reset
 * them. Counts that follow the transaction's outcome are gathered in observe/count.c first.
 * Locking: shmem.c's header.
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/twophase.h"
#include "base/asowner.h"
#include "catalog/pg_class.h"
#include "compat.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "preload.h"
#include "settings.h"
#include "observe/stats.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_stats);
PG_FUNCTION_INFO_V1(fencelock_stats_reset);
PG_FUNCTION_INFO_V1(fencelock_table_stats);

typedef struct FlTableKey
{
	Oid dbid;
	Oid relid; /* InvalidOid: tables beyond fencelock.max_tables */
} FlTableKey;

typedef struct FlTableEntry
{
	FlTableKey key;
	Oid owner; /* the table's owner at its first refusal; InvalidOid for an overflow row */
	pg_atomic_uint64 stale;
	pg_atomic_uint64 unfenced;
	pg_atomic_uint64 last_used; /* fl_stats->table_clock at the latest refusal */
} FlTableEntry;

typedef struct FlStats
{
	LWLock *lock; /* guards the table hash's shape and stats_reset */
	TimestampTz stats_reset;
	TimestampTz tables_reclaimed; /* the latest look for dropped tables and databases */
	pg_atomic_uint64 table_clock; /* ticks once per refusal counted per table */
	pg_atomic_uint64 counters[FL_NUM_COUNTERS];
} FlStats;

static FlStats *fl_stats = NULL;
static HTAB *fl_tables = NULL;

Size
fl_stats_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(FlStats)),
					hash_estimate_size(fencelock_max_tables + 1, sizeof(FlTableEntry)));
}

/* Attach, and initialise when created (with its lock); the caller holds AddinShmemInitLock. */
void
fl_stats_shmem_attach(LWLock *lock)
{
	bool found;
	HASHCTL info;

	fl_stats = ShmemInitStruct("fencelock stats", sizeof(FlStats), &found);
	if (!found)
	{
		Assert(lock != NULL);
		fl_stats->lock = lock;
		fl_stats->stats_reset = GetCurrentTimestamp();
		fl_stats->tables_reclaimed = 0;
		pg_atomic_init_u64(&fl_stats->table_clock, 0);
		for (int i = 0; i < FL_NUM_COUNTERS; i++)
			pg_atomic_init_u64(&fl_stats->counters[i], 0);
	}
	info.keysize = sizeof(FlTableKey);
	info.entrysize = sizeof(FlTableEntry);
	fl_tables =
		ShmemInitHash("fencelock tables", fencelock_max_tables + 1, fencelock_max_tables + 1, &info,
					  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

/* Whether the statistics are kept (fencelock was preloaded). */
bool
fl_stats_kept(void)
{
	return fl_stats != NULL;
}

void
fl_count(FlCounter counter, uint64 n)
{
	if (fl_stats != NULL)
		pg_atomic_fetch_add_u64(&fl_stats->counters[counter], n);
}

/*
 * Per-table refusal counts (table_stats).  The slots are cluster-wide and any role whose table
 * has the fence trigger can make writes be refused, so a slot is never kept for good:
 *
 *  - Slots of dropped tables (seen from their own database) and of dropped databases (seen from
 *    any) are given back when the slots run out, at most once per FL_RECLAIM_INTERVAL_MS;
 *    a dropped table's counts move to its database's overflow row (relid NULL).
 *  - Otherwise a slot is evicted by the eviction rule of observe/stats.h: a row belongs to its
 * table's owner, and the owner of the new table pays first, with the slot of its own least recently
 *    refused table; only an owner with no slot yet takes one from the owner with the most slots,
 *    and only while that owner has more than its fair share.  So a role that floods the slots
 *    with throwaway tables (a role with TEMP can make fenced temporary tables) evicts only its
 *    own, never an application's rows (issue 35: before, the owner with the most slots paid).
 *    The evicted counts move to the overflow row, so a database's totals are kept; a new table
 *    that finds no slot it may take is counted in the overflow row.
 *
 * At most fencelock.max_tables entries, overflow rows included.
 */
#define FL_RECLAIM_INTERVAL_MS 1000

static void
fl_table_add(FlTableEntry *entry, bool stale)
{
	pg_atomic_fetch_add_u64(stale ? &entry->stale : &entry->unfenced, 1);
	pg_atomic_write_u64(&entry->last_used, pg_atomic_fetch_add_u64(&fl_stats->table_clock, 1));
}

/* Enter a new row with the given counts; caller holds the exclusive lock and made room. */
static FlTableEntry *
fl_table_enter(FlTableKey *key, Oid owner, uint64 stale, uint64 unfenced)
{
	bool found;
	FlTableEntry *entry = hash_search(fl_tables, key, HASH_ENTER_NULL, &found);

	if (entry == NULL)
		return NULL;
	if (!found)
	{
		entry->owner = owner;
		pg_atomic_init_u64(&entry->stale, 0);
		pg_atomic_init_u64(&entry->unfenced, 0);
		pg_atomic_init_u64(&entry->last_used, 0);
	}
	pg_atomic_fetch_add_u64(&entry->stale, stale);
	pg_atomic_fetch_add_u64(&entry->unfenced, unfenced);
	return entry;
}

/*
 * Remove a per-table row; its counts move to its database's overflow row, or are dropped with
 * the database (keep_counts false).  Frees one entry, or none when the overflow row had to be
 * created.  Caller holds the exclusive lock.
 */
static void
fl_table_remove(FlTableEntry *entry, bool keep_counts)
{
	FlTableKey key = entry->key;
	uint64 stale = pg_atomic_read_u64(&entry->stale);
	uint64 unfenced = pg_atomic_read_u64(&entry->unfenced);

	hash_search(fl_tables, &key, HASH_REMOVE, NULL);
	if (!keep_counts || !OidIsValid(key.relid))
		return;
	key.relid = InvalidOid;
	(void) fl_table_enter(&key, InvalidOid, stale, unfenced);
}

/* A table of FlRoleRows keyed by role, in CurrentMemoryContext (the rule: observe/stats.h) */
HTAB *
fl_role_rows_create(void)
{
	HASHCTL ctl;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(FlRoleRows);
	ctl.hcxt = CurrentMemoryContext;
	return hash_create("fencelock rows per role", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* Count one row of ROLE. */
void
fl_role_rows_add(HTAB *roles, Oid role)
{
	bool found;
	FlRoleRows *r = hash_search(roles, &role, HASH_ENTER, &found);

	if (!found)
		r->rows = 0;
	r->rows++;
}

/*
 * The eviction rule (observe/stats.h): the role that gives up rows so that ROLE can have a new one
 * in a full table of CAPACITY rows counted in ROLES, and in *limit how many it may give up at most;
 * InvalidOid (and 0) when no role may.
 */
Oid
fl_evict_payer(HTAB *roles, Oid role, int capacity, int *limit)
{
	HASH_SEQ_STATUS status;
	FlRoleRows *r;
	FlRoleRows *most = NULL;
	int fair;

	*limit = 0;
	r = hash_search(roles, &role, HASH_FIND, NULL);
	if (r != NULL)
	{
		/* The role that brings the new row pays with its own. */
		*limit = r->rows;
		return role;
	}
	/* A newcomer: the role with the most rows gives way, down to its fair share. */
	hash_seq_init(&status, roles);
	while ((r = hash_seq_search(&status)) != NULL)
		if (most == NULL || r->rows > most->rows)
			most = r;
	if (most == NULL)
		return InvalidOid;
	fair = capacity / (int) (hash_get_num_entries(roles) + 1);
	if (most->rows <= fair)
		return InvalidOid;
	*limit = most->rows - fair;
	return most->role;
}

static int
cmp_table_last_used(const void *a, const void *b)
{
	uint64 x = pg_atomic_read_u64(&(*(FlTableEntry *const *) a)->last_used);
	uint64 y = pg_atomic_read_u64(&(*(FlTableEntry *const *) b)->last_used);

	return (x > y) - (x < y);
}

/*
 * Make room for a row of a table of OWNER (the eviction rule of observe/stats.h): the payer's least
 * recently refused tables give up their slots until one is free, as many as the rule allows.
 * Moving the counts to an overflow row may take a slot, hence more than one.  Caller holds the
 * exclusive lock.
 */
static void
fl_tables_make_room(Oid owner)
{
	HTAB *owners = fl_role_rows_create();
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;
	FlTableEntry **victims;
	Oid payer;
	int limit;
	int n = 0;

	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (OidIsValid(entry->key.relid))
			fl_role_rows_add(owners, entry->owner);
	payer = fl_evict_payer(owners, owner, fencelock_max_tables, &limit);
	hash_destroy(owners);
	if (!OidIsValid(payer))
		return;
	victims = palloc(sizeof(FlTableEntry *) * (hash_get_num_entries(fl_tables) + 1));
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (OidIsValid(entry->key.relid) && entry->owner == payer)
			victims[n++] = entry;
	qsort(victims, n, sizeof(FlTableEntry *), cmp_table_last_used);
	/* A removed row's slot may be reused by an overflow row: only rows not yet removed are read. */
	for (int i = 0; i < Min(n, limit) && hash_get_num_entries(fl_tables) >= fencelock_max_tables;
		 i++)
		fl_table_remove(victims[i], true);
	pfree(victims);
}

/*
 * Give back the rows of dropped tables of this database and of dropped databases.  The catalog
 * is read without the lock held; a row whose table this transaction cannot see is taken for
 * dropped.
 */
static void
fl_tables_reclaim(void)
{
	TimestampTz now = GetCurrentTimestamp();
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;
	FlTableKey *keys;
	int n = 0;
	int ndead = 0;

	LWLockAcquire(fl_stats->lock, LW_EXCLUSIVE);
	if (!TimestampDifferenceExceeds(fl_stats->tables_reclaimed, now, FL_RECLAIM_INTERVAL_MS))
	{
		LWLockRelease(fl_stats->lock);
		return;
	}
	fl_stats->tables_reclaimed = now;
	keys = palloc(sizeof(FlTableKey) * (hash_get_num_entries(fl_tables) + 1));
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (entry->key.dbid != MyDatabaseId || OidIsValid(entry->key.relid))
			keys[n++] = entry->key;
	LWLockRelease(fl_stats->lock);

	for (int i = 0; i < n; i++)
	{
		bool dead;

		if (keys[i].dbid != MyDatabaseId)
			dead = !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(keys[i].dbid));
		else
			dead = !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(keys[i].relid));
		if (dead)
			keys[ndead++] = keys[i];
	}

	LWLockAcquire(fl_stats->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ndead; i++)
	{
		entry = hash_search(fl_tables, &keys[i], HASH_FIND, NULL);
		if (entry != NULL)
			fl_table_remove(entry, keys[i].dbid == MyDatabaseId);
	}
	LWLockRelease(fl_stats->lock);
	pfree(keys);
}

void
fl_count_table(Oid relid, bool stale)
{
	FlTableKey key;
	FlTableEntry *entry;
	Oid owner;

	if (fl_stats == NULL)
		return;
	fl_count(stale ? FL_STALE_REJECTED : FL_UNFENCED_REJECTED, 1);
	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	key.relid = relid;
	/*
	 * Increments happen under the shared lock: rows are removed only under the exclusive one.
	 */
	LWLockAcquire(fl_stats->lock, LW_SHARED);
	entry = hash_search(fl_tables, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		fl_table_add(entry, stale);
		LWLockRelease(fl_stats->lock);
		return;
	}
	LWLockRelease(fl_stats->lock);

	/* A new row: look up what needs the catalog before taking the exclusive lock. */
	owner = fl_rel_owner(relid);
	if (hash_get_num_entries(fl_tables) >= fencelock_max_tables)
		fl_tables_reclaim();
	LWLockAcquire(fl_stats->lock, LW_EXCLUSIVE);
	entry = hash_search(fl_tables, &key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		if (hash_get_num_entries(fl_tables) >= fencelock_max_tables)
			fl_tables_make_room(owner);
		if (hash_get_num_entries(fl_tables) >= fencelock_max_tables)
			key.relid = InvalidOid; /* only overflow rows left: count in this database's */
		entry = fl_table_enter(&key, OidIsValid(key.relid) ? owner : InvalidOid, 0, 0);
	}
	if (entry != NULL)
		fl_table_add(entry, stale);
	LWLockRelease(fl_stats->lock);
}

/*
 * The counts of prepared transactions (observe/count.c hands them over at PREPARE TRANSACTION),
 * each in a slot under its transaction ID until that transaction is no longer in progress: counted
 * if it committed, dropped if it rolled back.  Settling looks at the commit log, not at which
 * command ended the transaction, so it is exact whoever ends it; it runs after every COMMIT
 * PREPARED and ROLLBACK PREPARED statement (observe/count.c), before fencelock.stats and
 * stats_reset read or reset the counters, and when the slots run out.  Shared memory does not
 * survive a restart: a transaction prepared before one is not counted.
 */
typedef struct FlPreparedSlot
{
	TransactionId xid; /* InvalidTransactionId when free */
	uint64 counts[FL_NUM_COUNTERS];
} FlPreparedSlot;

typedef struct FlPrepared
{
	LWLock *lock; /* guards the slots */
	int nslots;
	FlPreparedSlot slots[FLEXIBLE_ARRAY_MEMBER];
} FlPrepared;

static FlPrepared *fl_prepared = NULL;

/*
 * One slot per possible prepared transaction, and one per backend for a transaction between
 * XACT_EVENT_PRE_PREPARE and its prepare (or failure): settled slots are then always enough.
 */
static int
fl_prepared_nslots(void)
{
	return max_prepared_xacts > 0 ? max_prepared_xacts + MaxBackends : 0;
}

Size
fl_prepared_shmem_size(void)
{
	return add_size(offsetof(FlPrepared, slots),
					mul_size(fl_prepared_nslots(), sizeof(FlPreparedSlot)));
}

/* Attach, and initialise when created (with its lock); the caller holds AddinShmemInitLock. */
void
fl_prepared_shmem_attach(LWLock *lock)
{
	bool found;

	fl_prepared = ShmemInitStruct("fencelock prepared counts", fl_prepared_shmem_size(), &found);
	if (!found)
	{
		Assert(lock != NULL);
		fl_prepared->lock = lock;
		fl_prepared->nslots = fl_prepared_nslots();
		for (int i = 0; i < fl_prepared->nslots; i++)
			fl_prepared->slots[i].xid = InvalidTransactionId;
	}
}

/*
 * Count the slots of prepared transactions that have ended and free them; returns how many slots
 * are free.  A transaction older than the commit log's oldest entry (which no reader of the
 * counters or COMMIT PREPARED saw end, for a long time) can no longer be told: dropped.
 */
int
fl_prepared_settle(void)
{
	int free = 0;
	bool clog_locked = false;

	if (fl_prepared == NULL || fl_prepared->nslots == 0)
		return 0;
	LWLockAcquire(fl_prepared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < fl_prepared->nslots; i++)
	{
		FlPreparedSlot *slot = &fl_prepared->slots[i];

		if (TransactionIdIsValid(slot->xid))
		{
			if (!clog_locked)
				LWLockAcquire(XactTruncationLock, LW_SHARED);
			clog_locked = true;
			if (!TransactionIdPrecedes(slot->xid, FL_OLDEST_CLOG_XID))
			{
				if (TransactionIdIsInProgress(slot->xid))
					continue;
				if (TransactionIdDidCommit(slot->xid))
					for (int c = 0; c < FL_NUM_COUNTERS; c++)
						if (slot->counts[c] > 0)
							fl_count((FlCounter) c, slot->counts[c]);
			}
			slot->xid = InvalidTransactionId;
		}
		free++;
	}
	if (clog_locked)
		LWLockRelease(XactTruncationLock);
	LWLockRelease(fl_prepared->lock);
	return free;
}

/*
 * A slot for the transaction being prepared, with its counts; -1 when none is free (or there is
 * no shared memory, or max_prepared_transactions is 0).
 */
int
fl_prepared_fill(TransactionId xid, const uint64 counts[FL_NUM_COUNTERS])
{
	if (fl_prepared == NULL || fl_prepared->nslots == 0)
		return -1;
	for (int attempt = 0; attempt < 2; attempt++)
	{
		int found = -1;

		LWLockAcquire(fl_prepared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < fl_prepared->nslots && found < 0; i++)
			if (!TransactionIdIsValid(fl_prepared->slots[i].xid))
				found = i;
		if (found >= 0)
		{
			fl_prepared->slots[found].xid = xid;
			memcpy(fl_prepared->slots[found].counts, counts,
				   sizeof(fl_prepared->slots[found].counts));
		}
		LWLockRelease(fl_prepared->lock);
		if (found >= 0 || fl_prepared_settle() == 0)
			return found;
	}
	return -1;
}

/* The PREPARE of xid failed after its slot was filled: the slot goes with its transaction. */
void
fl_prepared_free(int slot, TransactionId xid)
{
	LWLockAcquire(fl_prepared->lock, LW_EXCLUSIVE);
	/* Unless a settle found the transaction aborted already and freed the slot. */
	if (TransactionIdEquals(fl_prepared->slots[slot].xid, xid))
		fl_prepared->slots[slot].xid = InvalidTransactionId;
	LWLockRelease(fl_prepared->lock);
}

/* SQL: fencelock.stats view */
Datum
fencelock_stats(PG_FUNCTION_ARGS)
{
	TupleDesc tupdesc;
	Datum values[FL_NUM_COUNTERS + 1];
	bool nulls[FL_NUM_COUNTERS + 1] = {0};
	int ncounters;

	fl_require_preload(fl_stats != NULL, "fencelock.stats");
	/* Prepared transactions that ended: their counts first. */
	(void) fl_prepared_settle();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/*
	 * The counters in enum order, then stats_reset, always the last column: a database still
	 * at an older version of the extension declares fewer counters (0.2.0 has no revokes).
	 */
	ncounters = Min(tupdesc->natts - 1, FL_NUM_COUNTERS);
	for (int i = 0; i < ncounters; i++)
		values[i] = Int64GetDatum((int64) pg_atomic_read_u64(&fl_stats->counters[i]));
	/* wait time is reported as an interval-friendly double of milliseconds */
	values[FL_WAIT_US] =
		Float8GetDatum(pg_atomic_read_u64(&fl_stats->counters[FL_WAIT_US]) / 1000.0);
	values[ncounters] = TimestampTzGetDatum(fl_stats->stats_reset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
fencelock_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;

	fl_require_preload(fl_stats != NULL, "fencelock.stats_reset");
	/* What committed before the reset is reset with the rest. */
	(void) fl_prepared_settle();
	LWLockAcquire(fl_stats->lock, LW_EXCLUSIVE);
	for (int i = 0; i < FL_NUM_COUNTERS; i++)
		pg_atomic_write_u64(&fl_stats->counters[i], 0);
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		hash_search(fl_tables, &entry->key, HASH_REMOVE, NULL);
	fl_stats->stats_reset = GetCurrentTimestamp();
	LWLockRelease(fl_stats->lock);
	PG_RETURN_VOID();
}

/* SQL: per-table rejections in the current database */
Datum
fencelock_table_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;

	fl_require_preload(fl_stats != NULL, "fencelock.table_stats");
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(fl_stats->lock, LW_SHARED);
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum values[3];
		bool nulls[3] = {0};

		if (entry->key.dbid != MyDatabaseId)
			continue;
		values[0] = ObjectIdGetDatum(entry->key.relid);
		nulls[0] = !OidIsValid(entry->key.relid);
		values[1] = Int64GetDatum((int64) pg_atomic_read_u64(&entry->stale));
		values[2] = Int64GetDatum((int64) pg_atomic_read_u64(&entry->unfenced));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(fl_stats->lock);
	return (Datum) 0;
}
