/*
 * shmem.c — fencelock's shared memory: counters, per-table rejection counts, and the queue of
 * backends waiting for a lease.
 *
 * The queue has one slot per backend.  A waiting backend takes a ticket; only the oldest ticket
 * for a resource (the head) tries to acquire, so a release wakes one waiter, in arrival order,
 * and a waiting newcomer queues behind those already waiting.  A release signals the head's own
 * condition variable; a head that leaves without the lease signals the next one.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fencelock.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "shmem.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "catalog/pg_class.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

PG_FUNCTION_INFO_V1(fencelock_stats);
PG_FUNCTION_INFO_V1(fencelock_stats_reset);
PG_FUNCTION_INFO_V1(fencelock_table_stats);
PG_FUNCTION_INFO_V1(fencelock_waiters);

typedef struct FlWaiter
{
	uint64 key; /* resource hash; 0 when the slot is free */
	uint64 ticket;
	pg_atomic_uint32 woken; /* set by a wake-up, cleared by the waiter before it looks */
	ConditionVariable cv;
} FlWaiter;

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
	pg_atomic_uint64 last_used; /* fl_shared->table_clock at the latest refusal */
} FlTableEntry;

typedef struct FlShared
{
	LWLock *lock; /* guards the queue and the table hash's shape */
	uint64 next_ticket;
	pg_atomic_uint32 nwaiting; /* slots in use: lets release skip the queue when 0 */
	TimestampTz stats_reset;
	TimestampTz tables_reclaimed; /* the latest look for dropped tables and databases */
	pg_atomic_uint64 table_clock; /* ticks once per refusal counted per table */
	pg_atomic_uint64 counters[FL_NUM_COUNTERS];
	int nslots;
	FlWaiter slots[FLEXIBLE_ARRAY_MEMBER];
} FlShared;

static FlShared *fl_shared = NULL;
static HTAB *fl_tables = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static FlWaiter *my_slot = NULL;
static bool exit_cb_registered = false;

static int
fl_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS;
}

static Size
fl_shmem_size(void)
{
	return add_size(offsetof(FlShared, slots), mul_size(fl_nslots(), sizeof(FlWaiter)));
}

static void
fl_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(fl_shmem_size());
	RequestAddinShmemSpace(hash_estimate_size(fencelock_max_tables + 1, sizeof(FlTableEntry)));
	RequestNamedLWLockTranche("fencelock", 1);
}

static void
fl_shmem_startup(void)
{
	bool found;
	HASHCTL info;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	fl_shared = ShmemInitStruct("fencelock", fl_shmem_size(), &found);
	if (!found)
	{
		fl_shared->lock = &(GetNamedLWLockTranche("fencelock"))->lock;
		fl_shared->next_ticket = 1;
		pg_atomic_init_u32(&fl_shared->nwaiting, 0);
		fl_shared->stats_reset = GetCurrentTimestamp();
		fl_shared->tables_reclaimed = 0;
		pg_atomic_init_u64(&fl_shared->table_clock, 0);
		for (int i = 0; i < FL_NUM_COUNTERS; i++)
			pg_atomic_init_u64(&fl_shared->counters[i], 0);
		fl_shared->nslots = fl_nslots();
		for (int i = 0; i < fl_shared->nslots; i++)
		{
			fl_shared->slots[i].key = 0;
			fl_shared->slots[i].ticket = 0;
			pg_atomic_init_u32(&fl_shared->slots[i].woken, 0);
			ConditionVariableInit(&fl_shared->slots[i].cv);
		}
	}
	info.keysize = sizeof(FlTableKey);
	info.entrysize = sizeof(FlTableEntry);
	fl_tables =
		ShmemInitHash("fencelock tables", fencelock_max_tables + 1, fencelock_max_tables + 1, &info,
					  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init while shared_preload_libraries is being processed. */
void
fl_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = fl_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = fl_shmem_startup;
}

bool
fl_shmem_ready(void)
{
	return fl_shared != NULL;
}

static void
fl_require_shmem(const char *what)
{
	if (fl_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s needs fencelock to be loaded via shared_preload_libraries", what),
				 errhint("Add 'fencelock' to shared_preload_libraries in postgresql.conf and "
						 "restart the server.")));
}

void
fl_count(FlCounter counter, uint64 n)
{
	if (fl_shared != NULL)
		pg_atomic_fetch_add_u64(&fl_shared->counters[counter], n);
}

/*
 * Per-table refusal counts (table_stats).  The slots are cluster-wide and any role whose table
 * has the fence trigger can make writes be refused, so a slot is never kept for good:
 *
 *  - Slots of dropped tables (seen from their own database) and of dropped databases (seen from
 *    any) are given back when the slots run out, at most once per FL_RECLAIM_INTERVAL_MS;
 *    a dropped table's counts move to its database's overflow row (relid NULL).
 *  - Otherwise a new table takes the slot of the least recently refused table of the role that
 *    owns the most slots (fair share): a role that fills the slots with throwaway tables only
 *    ever evicts its own, never the tables of a role with fewer slots.  The evicted counts move
 *    to the overflow row, so a database's totals are kept.
 *
 * At most fencelock.max_tables entries, overflow rows included.
 */
#define FL_RECLAIM_INTERVAL_MS 1000

static void
fl_table_add(FlTableEntry *entry, bool stale)
{
	pg_atomic_fetch_add_u64(stale ? &entry->stale : &entry->unfenced, 1);
	pg_atomic_write_u64(&entry->last_used, pg_atomic_fetch_add_u64(&fl_shared->table_clock, 1));
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

typedef struct FlOwnerSlots
{
	Oid owner;
	int slots;
	FlTableEntry *lru;
} FlOwnerSlots;

/* Evict one per-table row (fair share, see above); false when there is none. */
static bool
fl_table_evict_one(void)
{
	HASHCTL ctl;
	HTAB *owners;
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;
	FlOwnerSlots *o;
	FlOwnerSlots *most = NULL;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(FlOwnerSlots);
	ctl.hcxt = CurrentMemoryContext;
	owners = hash_create("fencelock table owners", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		bool found;

		if (!OidIsValid(entry->key.relid))
			continue;
		o = hash_search(owners, &entry->owner, HASH_ENTER, &found);
		if (!found)
		{
			o->slots = 0;
			o->lru = entry;
		}
		o->slots++;
		if (pg_atomic_read_u64(&entry->last_used) < pg_atomic_read_u64(&o->lru->last_used))
			o->lru = entry;
	}
	hash_seq_init(&status, owners);
	while ((o = hash_seq_search(&status)) != NULL)
		if (most == NULL || o->slots > most->slots ||
			(o->slots == most->slots &&
			 pg_atomic_read_u64(&o->lru->last_used) < pg_atomic_read_u64(&most->lru->last_used)))
			most = o;
	entry = most != NULL ? most->lru : NULL;
	hash_destroy(owners);
	if (entry == NULL)
		return false;
	fl_table_remove(entry, true);
	return true;
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

	LWLockAcquire(fl_shared->lock, LW_EXCLUSIVE);
	if (!TimestampDifferenceExceeds(fl_shared->tables_reclaimed, now, FL_RECLAIM_INTERVAL_MS))
	{
		LWLockRelease(fl_shared->lock);
		return;
	}
	fl_shared->tables_reclaimed = now;
	keys = palloc(sizeof(FlTableKey) * (hash_get_num_entries(fl_tables) + 1));
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (entry->key.dbid != MyDatabaseId || OidIsValid(entry->key.relid))
			keys[n++] = entry->key;
	LWLockRelease(fl_shared->lock);

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

	LWLockAcquire(fl_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ndead; i++)
	{
		entry = hash_search(fl_tables, &keys[i], HASH_FIND, NULL);
		if (entry != NULL)
			fl_table_remove(entry, keys[i].dbid == MyDatabaseId);
	}
	LWLockRelease(fl_shared->lock);
	pfree(keys);
}

static Oid
fl_rel_owner(Oid relid)
{
	HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

void
fl_count_table(Oid relid, bool stale)
{
	FlTableKey key;
	FlTableEntry *entry;
	Oid owner;

	if (fl_shared == NULL)
		return;
	fl_count(stale ? FL_STALE_REJECTED : FL_UNFENCED_REJECTED, 1);
	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	key.relid = relid;
	/*
	 * Increments happen under the shared lock: rows are removed only under the exclusive one.
	 */
	LWLockAcquire(fl_shared->lock, LW_SHARED);
	entry = hash_search(fl_tables, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		fl_table_add(entry, stale);
		LWLockRelease(fl_shared->lock);
		return;
	}
	LWLockRelease(fl_shared->lock);

	/* A new row: look up what needs the catalog before taking the exclusive lock. */
	owner = fl_rel_owner(relid);
	if (hash_get_num_entries(fl_tables) >= fencelock_max_tables)
		fl_tables_reclaim();
	LWLockAcquire(fl_shared->lock, LW_EXCLUSIVE);
	entry = hash_search(fl_tables, &key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		while (hash_get_num_entries(fl_tables) >= fencelock_max_tables && fl_table_evict_one())
			;
		if (hash_get_num_entries(fl_tables) >= fencelock_max_tables)
			key.relid = InvalidOid; /* only overflow rows left: count in this database's */
		entry = fl_table_enter(&key, OidIsValid(key.relid) ? owner : InvalidOid, 0, 0);
	}
	if (entry != NULL)
		fl_table_add(entry, stale);
	LWLockRelease(fl_shared->lock);
}

uint64
fl_resource_key(text *resource)
{
	/* Seeded with the database: the same name in two databases is two resources. */
	uint64 h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(resource),
								   VARSIZE_ANY_EXHDR(resource), MyDatabaseId);

	return h == 0 ? 1 : h;
}

/* Waiters queued for a resource; 0 without shared memory. */
int
fl_queue_length(uint64 key)
{
	int n = 0;

	if (fl_shared == NULL || pg_atomic_read_u32(&fl_shared->nwaiting) == 0)
		return 0;
	LWLockAcquire(fl_shared->lock, LW_SHARED);
	for (int i = 0; i < fl_shared->nslots; i++)
		if (fl_shared->slots[i].key == key)
			n++;
	LWLockRelease(fl_shared->lock);
	return n;
}

static void
fl_queue_exit_cb(int code, Datum arg)
{
	if (my_slot != NULL && my_slot->key != 0)
		fl_queue_leave(true);
}

void
fl_queue_enter(uint64 key)
{
	if (fl_shared == NULL)
		return;
	if (!exit_cb_registered)
	{
		before_shmem_exit(fl_queue_exit_cb, (Datum) 0);
		exit_cb_registered = true;
	}
	my_slot = &fl_shared->slots[FL_MY_PROCNO];
	LWLockAcquire(fl_shared->lock, LW_EXCLUSIVE);
	my_slot->key = key;
	my_slot->ticket = fl_shared->next_ticket++;
	pg_atomic_fetch_add_u32(&fl_shared->nwaiting, 1);
	LWLockRelease(fl_shared->lock);
}

/* The resource this backend is queued for, or 0 (also without shared memory). */
uint64
fl_queue_my_key(void)
{
	if (fl_shared == NULL || my_slot == NULL)
		return 0;
	return my_slot->key;
}

/* The waiting slot with the lowest ticket for key, or NULL; caller holds the lock. */
static FlWaiter *
fl_queue_head(uint64 key)
{
	FlWaiter *head = NULL;

	for (int i = 0; i < fl_shared->nslots; i++)
	{
		FlWaiter *w = &fl_shared->slots[i];

		if (w->key == key && (head == NULL || w->ticket < head->ticket))
			head = w;
	}
	return head;
}

/* Without shared memory every waiter is its own head: it polls. */
bool
fl_queue_is_head(void)
{
	bool head;

	if (fl_shared == NULL || my_slot == NULL)
		return true;
	LWLockAcquire(fl_shared->lock, LW_SHARED);
	head = fl_queue_head(my_slot->key) == my_slot;
	LWLockRelease(fl_shared->lock);
	return head;
}

void
fl_queue_clear_woken(void)
{
	if (fl_shared != NULL && my_slot != NULL)
		pg_atomic_write_u32(&my_slot->woken, 0);
}

/* Whether a wake-up came since fl_queue_clear_woken. */
bool
fl_queue_woken(void)
{
	return fl_shared != NULL && my_slot != NULL && pg_atomic_read_u32(&my_slot->woken) != 0;
}

/* Join the wake-up list before checking whether to sleep, so that no signal is lost. */
void
fl_queue_prepare(void)
{
	if (fl_shared != NULL && my_slot != NULL)
		ConditionVariablePrepareToSleep(&my_slot->cv);
}

/*
 * Sleep until signalled (since fl_queue_prepare) or the timeout; query cancel and
 * statement_timeout interrupt it.
 */
void
fl_queue_sleep(long timeout_ms)
{
	if (timeout_ms < 1)
		timeout_ms = 1;
	if (fl_shared == NULL || my_slot == NULL)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
						 FL_WAIT_EVENT_ACQUIRE);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return;
	}
	(void) ConditionVariableTimedSleep(&my_slot->cv, timeout_ms, FL_WAIT_EVENT_ACQUIRE);
}

/* Leave the queue; when we leave without the lease, the next waiter gets its turn to try. */
void
fl_queue_leave(bool wake_next)
{
	uint64 key;

	if (fl_shared == NULL || my_slot == NULL || my_slot->key == 0)
		return;
	ConditionVariableCancelSleep();
	LWLockAcquire(fl_shared->lock, LW_EXCLUSIVE);
	key = my_slot->key;
	my_slot->key = 0;
	my_slot->ticket = 0;
	pg_atomic_fetch_sub_u32(&fl_shared->nwaiting, 1);
	LWLockRelease(fl_shared->lock);
	if (wake_next)
		fl_queue_wake(key);
}

/* Wake the head waiter for a resource, if any: a release made its turn. */
void
fl_queue_wake(uint64 key)
{
	FlWaiter *head;

	if (fl_shared == NULL || pg_atomic_read_u32(&fl_shared->nwaiting) == 0)
		return;
	LWLockAcquire(fl_shared->lock, LW_SHARED);
	head = fl_queue_head(key);
	LWLockRelease(fl_shared->lock);
	if (head != NULL)
	{
		pg_atomic_write_u32(&head->woken, 1);
		ConditionVariableSignal(&head->cv);
	}
}

/* SQL: fencelock.stats view */
Datum
fencelock_stats(PG_FUNCTION_ARGS)
{
	TupleDesc tupdesc;
	Datum values[FL_NUM_COUNTERS + 1];
	bool nulls[FL_NUM_COUNTERS + 1] = {0};
	int ncounters;

	fl_require_shmem("fencelock.stats");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/*
	 * The counters in enum order, then stats_reset, always the last column: a database still
	 * at an older version of the extension declares fewer counters (0.2.0 has no revokes).
	 */
	ncounters = Min(tupdesc->natts - 1, FL_NUM_COUNTERS);
	for (int i = 0; i < ncounters; i++)
		values[i] = Int64GetDatum((int64) pg_atomic_read_u64(&fl_shared->counters[i]));
	/* wait time is reported as an interval-friendly double of milliseconds */
	values[FL_WAIT_US] =
		Float8GetDatum(pg_atomic_read_u64(&fl_shared->counters[FL_WAIT_US]) / 1000.0);
	values[ncounters] = TimestampTzGetDatum(fl_shared->stats_reset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
fencelock_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;

	fl_require_shmem("fencelock.stats_reset()");
	LWLockAcquire(fl_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < FL_NUM_COUNTERS; i++)
		pg_atomic_write_u64(&fl_shared->counters[i], 0);
	hash_seq_init(&status, fl_tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		hash_search(fl_tables, &entry->key, HASH_REMOVE, NULL);
	fl_shared->stats_reset = GetCurrentTimestamp();
	LWLockRelease(fl_shared->lock);
	PG_RETURN_VOID();
}

/* SQL: per-table rejections in the current database */
Datum
fencelock_table_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	FlTableEntry *entry;

	fl_require_shmem("fencelock.table_stats");
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(fl_shared->lock, LW_SHARED);
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
	LWLockRelease(fl_shared->lock);
	return (Datum) 0;
}

/* SQL: waiters queued for a resource; NULL without shared memory. */
Datum
fencelock_waiters(PG_FUNCTION_ARGS)
{
	if (fl_shared == NULL || PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_INT32(fl_queue_length(fl_resource_key(PG_GETARG_TEXT_PP(0))));
}
