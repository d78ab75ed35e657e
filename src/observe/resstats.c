/*
 * observe/resstats.c — contention per resource: one row per resource (its database and whole name)
 * in a shared hash of at most fencelock.max_resources rows, and the SQL functions that read and
 * reset them (fencelock.resource_stats, resource_stats_info, resource_stats_reset).
 *
 * A server-wide average hides the one hot resource whose waiters wait for seconds; each row
 * counts, for its resource, grants and takeovers, busy attempts, waits (their time, the longest,
 * those that timed out, those fencelock.max_waiters turned away, the most waiters queued at
 * once), hold time (the sum and the longest: from the grant to its release, or to its deadline
 * when it ended without one, or to the next grant if that came sooner), refused releases, and
 * refused stale fences with the longest time a refused write came after the grant that
 * superseded it.  Grants, renewals and releases count when their transaction commits
 * (observe/count.c holds them until then); attempts count at once, as in observe/stats.c.  The hold
 * time needs the grant: the row keeps the latest committed grant's fence, start and deadline, so a
 * lease granted before a restart, or before its row was evicted, has no hold time counted.
 *
 * The rows are cluster-wide and any role that may acquire can name new resources, so a row is never
 * kept for good.  Each row belongs to the role whose call made it.  When the table is full, the
 * role that brings the new name pays first (the eviction rule of observe/stats.h, which table_stats
 * follows too): if it has rows, it gives up its own least recently used ones, FL_EVICT_PERCENT of
 * the table at a time (as pg_stat_statements deallocates in batches) but never more than it has.
 * Only a role with no row yet takes rows from another: from the role with the most rows, down to
 * that role's fair share (max_resources divided by the number of roles with rows, the newcomer
 * counted) and never below it.  So a role that floods the table with throwaway names evicts only
 * its own, whichever role has the most rows (issue 35: before, the role with the most rows paid,
 * and another role's flood took an application from 80 rows down to 50), and a role at or under its
 * fair share is never evicted by another's names.  Once the table is full a role keeps the number
 * of rows it has: a newcomer gets in, but grows only into room that others free
 * (resource_stats_reset empties the table).  Evicted rows are counted (resource_stats_info).  Owner
 * tokens are never kept.
 *
 * Locking (the protocol is written in shmem.c's header): FL_LOCK_RESOURCES guards the hash's
 * shape, generation, evicted and stats_reset; a row found under the shared lock has its counts
 * changed under its own spinlock.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fencelock.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "preload.h"
#include "observe/resstats.h"
#include "settings.h"
#include "observe/stats.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_resource_stats);
PG_FUNCTION_INFO_V1(fencelock_resource_stats_info);
PG_FUNCTION_INFO_V1(fencelock_resource_stats_reset);

#define FL_EVICT_PERCENT 5

typedef struct FlResKey
{
	Oid dbid;
	uint32 len;
	char name[FENCELOCK_MAX_RESOURCE_LEN]; /* only len bytes are hashed, compared, copied */
} FlResKey;

typedef struct FlResEntry
{
	FlResKey key;
	Oid role;                   /* the role whose call made the row */
	pg_atomic_uint64 last_used; /* fl_res->clock at the latest event */
	slock_t mutex;              /* guards everything below */
	int64 grants;
	int64 takeovers;
	int64 busy;
	int64 waits;
	int64 wait_us;
	int64 max_wait_us;
	int64 wait_timeouts;
	int64 waiters_refused;
	int32 max_waiters;
	int64 holds; /* leases whose hold time is counted */
	int64 hold_us;
	int64 max_hold_us;
	int64 releases_refused;
	int64 stale_rejected;
	int64 max_stale_us;
	TimestampTz last_grant; /* 0: none seen */
	/* the latest committed grant */
	bool held;
	int64 fence;
	TimestampTz granted_at;
	TimestampTz expires_at;
} FlResEntry;

typedef struct FlResShared
{
	LWLock *lock;
	uint64 generation; /* rows removed: bumped by every eviction and reset */
	int64 evicted;
	TimestampTz stats_reset;
	pg_atomic_uint64 clock;
} FlResShared;

static FlResShared *fl_res = NULL;
static HTAB *fl_res_hash = NULL;

static uint32
res_hash(const void *key, Size keysize)
{
	const FlResKey *k = key;

	return hash_combine(hash_bytes((const unsigned char *) k->name, k->len), k->dbid);
}

static int
res_match(const void *key1, const void *key2, Size keysize)
{
	const FlResKey *a = key1;
	const FlResKey *b = key2;

	return !(a->dbid == b->dbid && a->len == b->len && memcmp(a->name, b->name, a->len) == 0);
}

static void *
res_keycopy(void *dest, const void *src, Size keysize)
{
	const FlResKey *s = src;
	FlResKey *d = dest;

	d->dbid = s->dbid;
	d->len = s->len;
	memcpy(d->name, s->name, s->len);
	return dest;
}

Size
fl_resstats_shmem_size(void)
{
	if (fencelock_max_resources == 0)
		return 0;
	return add_size(MAXALIGN(sizeof(FlResShared)),
					hash_estimate_size(fencelock_max_resources, sizeof(FlResEntry)));
}

/* Attach, and initialise when created (with its lock); the caller holds AddinShmemInitLock. */
void
fl_resstats_shmem_attach(LWLock *lock)
{
	bool found;
	HASHCTL info;

	if (fencelock_max_resources == 0)
		return;
	fl_res = ShmemInitStruct("fencelock resources", sizeof(FlResShared), &found);
	if (!found)
	{
		Assert(lock != NULL);
		fl_res->lock = lock;
		fl_res->generation = 0;
		fl_res->evicted = 0;
		fl_res->stats_reset = GetCurrentTimestamp();
		pg_atomic_init_u64(&fl_res->clock, 0);
	}
	info.keysize = sizeof(FlResKey);
	info.entrysize = sizeof(FlResEntry);
	info.hash = res_hash;
	info.match = res_match;
	info.keycopy = res_keycopy;
	fl_res_hash = ShmemInitHash(
		"fencelock resource stats", fencelock_max_resources, fencelock_max_resources, &info,
		HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_KEYCOPY | HASH_FIXED_SIZE);
}

bool
fl_resstats_kept(void)
{
	return fl_res != NULL;
}

/* The key of a resource of the current database; false for a name too long to be one. */
static bool
res_key(text *resource, FlResKey *key)
{
	key->dbid = MyDatabaseId;
	key->len = VARSIZE_ANY_EXHDR(resource);
	if (key->len > FENCELOCK_MAX_RESOURCE_LEN || !OidIsValid(key->dbid))
		return false;
	memcpy(key->name, VARDATA_ANY(resource), key->len);
	return true;
}

static int
cmp_last_used(const void *a, const void *b)
{
	uint64 x = pg_atomic_read_u64(&(*(FlResEntry *const *) a)->last_used);
	uint64 y = pg_atomic_read_u64(&(*(FlResEntry *const *) b)->last_used);

	return (x > y) - (x < y);
}

/*
 * Make room for a row of ROLE, the caller's, by the eviction rule of observe/stats.h (the file's
 * header): the payer's least recently used rows go, a batch at a time but never more than the rule
 * allows. Caller holds the exclusive lock.
 */
static void
res_evict(Oid role)
{
	HTAB *roles = fl_role_rows_create();
	HASH_SEQ_STATUS status;
	FlResEntry *entry;
	FlResEntry **victims;
	Oid payer;
	int limit;
	int n = 0;
	int batch = Max(1, fencelock_max_resources * FL_EVICT_PERCENT / 100);

	hash_seq_init(&status, fl_res_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
		fl_role_rows_add(roles, entry->role);
	payer = fl_evict_payer(roles, role, fencelock_max_resources, &limit);
	hash_destroy(roles);
	batch = Min(batch, limit);
	if (!OidIsValid(payer) || batch <= 0)
		return;
	victims = palloc(sizeof(FlResEntry *) * hash_get_num_entries(fl_res_hash));
	hash_seq_init(&status, fl_res_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (entry->role == payer)
			victims[n++] = entry;
	qsort(victims, n, sizeof(FlResEntry *), cmp_last_used);
	batch = Min(batch, n);
	for (int i = 0; i < batch; i++)
		hash_search(fl_res_hash, &victims[i]->key, HASH_REMOVE, NULL);
	fl_res->evicted += batch;
	fl_res->generation++;
	pfree(victims);
}

/* The row of a resource, made when it has none; NULL when not kept.  Returns under no lock. */
static FlResEntry *
res_enter(FlResKey *key)
{
	FlResEntry *entry;
	bool found;

	LWLockAcquire(fl_res->lock, LW_EXCLUSIVE);
	entry = hash_search(fl_res_hash, key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		if (hash_get_num_entries(fl_res_hash) >= fencelock_max_resources)
			res_evict(GetUserId());
		entry = hash_search(fl_res_hash, key, HASH_ENTER_NULL, &found);
		if (entry != NULL && !found)
		{
			char *start = (char *) entry + offsetof(FlResEntry, mutex);

			memset(start, 0, sizeof(FlResEntry) - offsetof(FlResEntry, mutex));
			SpinLockInit(&entry->mutex);
			entry->role = GetUserId();
			pg_atomic_init_u64(&entry->last_used, pg_atomic_read_u64(&fl_res->clock));
		}
	}
	LWLockRelease(fl_res->lock);
	return entry;
}

/*
 * Find (or make) RESOURCE's row and hold the shared lock, which keeps it in place; NULL (and no
 * lock) when not kept or there is no room.
 */
static FlResEntry *
res_lock(text *resource)
{
	FlResKey key;
	FlResEntry *entry;

	if (fl_res == NULL || !res_key(resource, &key))
		return NULL;
	for (int attempt = 0; attempt < 2; attempt++)
	{
		LWLockAcquire(fl_res->lock, LW_SHARED);
		entry = hash_search(fl_res_hash, &key, HASH_FIND, NULL);
		if (entry != NULL)
		{
			pg_atomic_write_u64(&entry->last_used, pg_atomic_fetch_add_u64(&fl_res->clock, 1));
			return entry;
		}
		LWLockRelease(fl_res->lock);
		if (res_enter(&key) == NULL)
			return NULL;
	}
	return NULL;
}

void
fl_resstats_count(text *resource, FlResCount what)
{
	FlResEntry *e = res_lock(resource);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	switch (what)
	{
		case FL_RES_BUSY:
			e->busy++;
			break;
		case FL_RES_RELEASE_REFUSED:
			e->releases_refused++;
			break;
		case FL_RES_WAITERS_REFUSED:
			e->waiters_refused++;
			break;
	}
	SpinLockRelease(&e->mutex);
	LWLockRelease(fl_res->lock);
}

void
fl_resstats_wait(text *resource, int64 us, bool granted)
{
	FlResEntry *e = res_lock(resource);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	e->waits++;
	e->wait_us += us;
	e->max_wait_us = Max(e->max_wait_us, us);
	if (!granted)
		e->wait_timeouts++;
	SpinLockRelease(&e->mutex);
	LWLockRelease(fl_res->lock);
}

bool
fl_resstats_queued(text *resource, int waiters)
{
	FlResEntry *e;

	if (waiters <= 0)
	{
		fl_resstats_count(resource, FL_RES_WAITERS_REFUSED);
		return false;
	}
	e = res_lock(resource);
	if (e == NULL)
		return true;
	SpinLockAcquire(&e->mutex);
	e->max_waiters = Max(e->max_waiters, waiters);
	SpinLockRelease(&e->mutex);
	LWLockRelease(fl_res->lock);
	return true;
}

void
fl_resstats_stale(text *resource, int64 since_us)
{
	FlResEntry *e = res_lock(resource);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	e->stale_rejected++;
	e->max_stale_us = Max(e->max_stale_us, since_us);
	SpinLockRelease(&e->mutex);
	LWLockRelease(fl_res->lock);
}

void
fl_resstats_touch(text *resource, FlResEvent *event)
{
	FlResEntry *e = res_lock(resource);

	event->entry = e;
	if (e == NULL)
		return;
	event->generation = fl_res->generation;
	LWLockRelease(fl_res->lock);
}

/* A hold ended at END: counted when it is the grant this row saw.  Caller holds the mutex. */
static void
res_hold_ended(FlResEntry *e, TimestampTz end)
{
	int64 us = end - e->granted_at;

	e->held = false;
	if (us < 0)
		return;
	e->holds++;
	e->hold_us += us;
	e->max_hold_us = Max(e->max_hold_us, us);
}

void
fl_resstats_apply(Oid dbid, const char *name, int len, const FlResEvent *ev)
{
	FlResEntry *e;

	if (fl_res == NULL || ev->entry == NULL)
		return;
	LWLockAcquire(fl_res->lock, LW_SHARED);
	e = ev->entry;
	if (ev->generation != fl_res->generation)
	{
		FlResKey key;

		key.dbid = dbid;
		key.len = len;
		memcpy(key.name, name, len);
		e = hash_search(fl_res_hash, &key, HASH_FIND, NULL);
	}
	if (e != NULL)
	{
		SpinLockAcquire(&e->mutex);
		switch (ev->kind)
		{
			case FL_RES_GRANT:
				if (e->held && e->fence == ev->fence)
				{
					/* the same owner's live lease again */
					e->expires_at = Max(e->expires_at, ev->expires);
					break;
				}
				e->grants++;
				if (ev->takeover)
					e->takeovers++;
				if (e->held && e->fence < ev->fence)
					res_hold_ended(e, Min(e->expires_at, ev->at));
				e->held = true;
				e->fence = ev->fence;
				e->granted_at = ev->at;
				e->expires_at = ev->expires;
				e->last_grant = ev->at;
				break;
			case FL_RES_RENEW:
				if (e->held && e->fence == ev->fence)
					e->expires_at = ev->expires;
				break;
			case FL_RES_RELEASE:
				if (e->held && e->fence == ev->fence)
					res_hold_ended(e, ev->at);
				break;
		}
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(fl_res->lock);
}

static Datum
ms(int64 us)
{
	return Float8GetDatum(us / 1000.0);
}

/* SQL: one row per resource of the current database */
Datum
fencelock_resource_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	FlResEntry *e;

	/* Preloaded with fencelock.max_resources = 0: nothing is kept, no row. */
	fl_require_preload(fl_res != NULL || fencelock_max_resources == 0, "fencelock.resource_stats");
	InitMaterializedSRF(fcinfo, 0);
	if (fl_res == NULL)
		return (Datum) 0;
	LWLockAcquire(fl_res->lock, LW_SHARED);
	hash_seq_init(&status, fl_res_hash);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		Datum values[18];
		bool nulls[18] = {0};
		FlResEntry c;

		if (e->key.dbid != MyDatabaseId)
			continue;
		SpinLockAcquire(&e->mutex);
		memcpy((char *) &c + offsetof(FlResEntry, grants),
			   (char *) e + offsetof(FlResEntry, grants),
			   sizeof(FlResEntry) - offsetof(FlResEntry, grants));
		SpinLockRelease(&e->mutex);
		values[0] = PointerGetDatum(cstring_to_text_with_len(e->key.name, e->key.len));
		values[1] = Int64GetDatum(c.grants);
		values[2] = Int64GetDatum(c.takeovers);
		values[3] = Int64GetDatum(c.busy);
		values[4] = Int64GetDatum(c.waits);
		values[5] = ms(c.wait_us);
		values[6] = ms(c.max_wait_us);
		values[7] = Int64GetDatum(c.wait_timeouts);
		values[8] = Int64GetDatum(c.waiters_refused);
		values[9] = Int32GetDatum(c.max_waiters);
		values[10] = Int64GetDatum(c.holds);
		values[11] = ms(c.hold_us);
		values[12] = ms(c.max_hold_us);
		values[13] = Int64GetDatum(c.releases_refused);
		values[14] = Int64GetDatum(c.stale_rejected);
		values[15] = ms(c.max_stale_us);
		values[16] = TimestampTzGetDatum(c.last_grant);
		nulls[16] = c.last_grant == 0;
		values[17] = BoolGetDatum(c.held);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(fl_res->lock);
	return (Datum) 0;
}

/* SQL: the table's size, its bound, the rows evicted, and when it was last reset */
Datum
fencelock_resource_stats_info(PG_FUNCTION_ARGS)
{
	TupleDesc tupdesc;
	Datum values[4];
	bool nulls[4] = {0};

	fl_require_preload(fl_res != NULL || fencelock_max_resources == 0,
					   "fencelock.resource_stats_info");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (fl_res == NULL)
	{
		/* fencelock.max_resources = 0: nothing is kept */
		values[0] = values[2] = Int64GetDatum(0);
		values[1] = Int32GetDatum(0);
		nulls[3] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}
	LWLockAcquire(fl_res->lock, LW_SHARED);
	values[0] = Int64GetDatum(hash_get_num_entries(fl_res_hash));
	values[1] = Int32GetDatum(fencelock_max_resources);
	values[2] = Int64GetDatum(fl_res->evicted);
	values[3] = TimestampTzGetDatum(fl_res->stats_reset);
	LWLockRelease(fl_res->lock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
fencelock_resource_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	FlResEntry *e;

	fl_require_preload(fl_res != NULL || fencelock_max_resources == 0,
					   "fencelock.resource_stats_reset");
	if (fl_res == NULL)
		PG_RETURN_VOID();
	LWLockAcquire(fl_res->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, fl_res_hash);
	while ((e = hash_seq_search(&status)) != NULL)
		hash_search(fl_res_hash, &e->key, HASH_REMOVE, NULL);
	fl_res->evicted = 0;
	fl_res->generation++;
	fl_res->stats_reset = GetCurrentTimestamp();
	LWLockRelease(fl_res->lock);
	PG_RETURN_VOID();
}
