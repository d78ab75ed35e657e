/*
 * session.c — leases that end with the session that took them.
 *
 *   SELECT fencelock.acquire('leader', 'node-1', '30 s', wait => '0', session => true);
 *
 * A session-bound lease carries the id of the backend session that took it (lease.session_id).
 * It is released (its fence kept) when that session ends:
 *
 *   - on any exit that runs the backend's exit callbacks (the client disconnected or vanished,
 *     pg_terminate_backend, a FATAL error, a server shutdown), fl_session_exit releases the
 *     session's leases in a transaction of its own and wakes their waiters;
 *   - when a backend dies without them (a crash, which restarts the server), its id is simply no
 *     longer registered: a grant treats a lease whose session is not alive as free
 *     (fencelock.session_alive in the grant's WHERE clause), as the leases view does.
 *
 * Session ids live in shared memory, one slot per PGPROC, so only a preloaded library can bind a
 * lease to a session.  An id is the slot number in its low bits and a serial above it; the serial
 * starts from the clock at every start of the server, so an id of a session from before a restart
 * (or from a dumped cluster) matches no live session.  The TTL still applies: a session that hangs
 * loses its lease when the lease expires.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "shmem.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fencelock_session_alive);

/* Slot numbers fit in the low bits of an id: MaxBackends is at most 2^18 - 1. */
#define FL_SESSION_SLOT_BITS 18
#define FL_SESSION_SLOT_MASK ((UINT64CONST(1) << FL_SESSION_SLOT_BITS) - 1)

typedef struct FlSessions
{
	pg_atomic_uint64 next_serial;
	int nslots;
	pg_atomic_uint64 slots[FLEXIBLE_ARRAY_MEMBER]; /* the live id of each slot; 0 when none */
} FlSessions;

static FlSessions *fl_sessions = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* This backend's session id (0 until its first session-bound grant) and what it bound. */
static int64 my_session_id = 0;
static List *my_session_resources = NIL; /* text *, in TopMemoryContext */

/* The session the grants of the current call bind to; 0 for ordinary leases. */
int64 fl_grant_session = 0;

/* $1 resources this session bound, $2 its id, $3 now: release what it still holds */
static FlStmt session_release = {
	"UPDATE fencelock.lease AS l SET owner = NULL, expires_at = $3 "
	"WHERE l.resource OPERATOR(pg_catalog.=) ANY ($1) "
	" AND l.session_id OPERATOR(pg_catalog.=) $2 AND l.owner IS NOT NULL "
	" AND l.expires_at OPERATOR(pg_catalog.>) $3 "
	"RETURNING l.resource, l.fence, l.holder",
	3,
	{TEXTARRAYOID, INT8OID, TIMESTAMPTZOID}};

static int
fl_session_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS;
}

static Size
fl_session_shmem_size(void)
{
	return add_size(offsetof(FlSessions, slots),
					mul_size(fl_session_nslots(), sizeof(pg_atomic_uint64)));
}

static void
fl_session_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(fl_session_shmem_size());
}

static void
fl_session_shmem_startup(void)
{
	bool found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	fl_sessions = ShmemInitStruct("fencelock sessions", fl_session_shmem_size(), &found);
	if (!found)
	{
		/* Milliseconds since 2000: above every serial handed out before this start. */
		pg_atomic_init_u64(&fl_sessions->next_serial, (uint64) (GetCurrentTimestamp() / 1000) + 1);
		fl_sessions->nslots = fl_session_nslots();
		for (int i = 0; i < fl_sessions->nslots; i++)
			pg_atomic_init_u64(&fl_sessions->slots[i], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init while shared_preload_libraries is being processed. */
void
fl_session_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = fl_session_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = fl_session_shmem_startup;
}

/* Whether the session with this id is still connected (false without preload). */
bool
fl_session_alive(int64 id)
{
	uint64 slot = (uint64) id & FL_SESSION_SLOT_MASK;

	if (fl_sessions == NULL || id <= 0 || slot >= (uint64) fl_sessions->nslots)
		return false;
	return pg_atomic_read_u64(&fl_sessions->slots[slot]) == (uint64) id;
}

/*
 * Release the leases this session still holds, in a transaction of its own, as the temporary
 * schema's cleanup does at exit.  Waiters are woken after the commit.  Any error here is
 * reported and swallowed: the session id is unregistered all the same, which frees the leases
 * for the next grant.
 */
static void
fl_session_exit(int code, Datum arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	List *woken = NIL;

	if (my_session_id == 0)
		return;
	if (my_session_resources != NIL && IsUnderPostmaster && MyDatabaseId != InvalidOid)
	{
		AbortOutOfAnyTransaction();
		PG_TRY();
		{
			Datum *elems = palloc(sizeof(Datum) * list_length(my_session_resources));
			Datum values[3];
			FlSession session;
			ListCell *lc;
			int n = 0;
			TimestampTz now = GetCurrentTimestamp();

			StartTransactionCommand();
			PushActiveSnapshot(GetTransactionSnapshot());
			foreach (lc, my_session_resources)
				elems[n++] = PointerGetDatum(lfirst(lc));
			values[0] =
				PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
			values[1] = Int64GetDatum(my_session_id);
			values[2] = TimestampTzGetDatum(now);
			fl_begin(&session);
			fl_run(&session_release, values, NULL, false);
			for (uint64 r = 0; r < SPI_processed; r++)
			{
				HeapTuple tuple = SPI_tuptable->vals[r];
				TupleDesc desc = SPI_tuptable->tupdesc;
				bool isnull;
				text *resource = DatumGetTextPP(SPI_getbinval(tuple, desc, 1, &isnull));
				int64 fence = DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
				Datum holder = SPI_getbinval(tuple, desc, 3, &isnull);

				if (fencelock_history)
					fl_history_update(resource, fence, now, now, true);
				fl_notify("session_ended", resource, fence,
						  isnull ? NULL : NameStr(*DatumGetName(holder)));
				fl_count_at_commit(FL_RELEASES, 1);
				{
					/* Woken after SPI_finish and the commit: the name is kept outside SPI. */
					MemoryContext spi = MemoryContextSwitchTo(TopMemoryContext);

					woken = lappend(woken, cstring_to_text_with_len(VARDATA_ANY(resource),
																	VARSIZE_ANY_EXHDR(resource)));
					MemoryContextSwitchTo(spi);
				}
			}
			fl_end(&session);
			PopActiveSnapshot();
			CommitTransactionCommand();
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			AbortOutOfAnyTransaction();
			woken = NIL;
		}
		PG_END_TRY();
	}
	pg_atomic_write_u64(&fl_sessions->slots[FL_MY_PROCNO], 0);
	my_session_id = 0;
	{
		ListCell *lc;

		foreach (lc, woken)
			fl_queue_wake((text *) lfirst(lc));
	}
}

/*
 * The id the current call's grants bind to; registers this session on first use.  Raises 55000
 * without shared memory: only a preloaded library sees every session's end.
 */
int64
fl_session_id(void)
{
	if (fl_sessions == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("session-bound leases need fencelock to be loaded via "
						"shared_preload_libraries"),
				 errhint("Add 'fencelock' to shared_preload_libraries in postgresql.conf and "
						 "restart the server, or acquire with session => false.")));
	if (my_session_id == 0)
	{
		uint64 serial = pg_atomic_fetch_add_u64(&fl_sessions->next_serial, 1);

		my_session_id = (int64) ((serial << FL_SESSION_SLOT_BITS) | (uint64) FL_MY_PROCNO);
		pg_atomic_write_u64(&fl_sessions->slots[FL_MY_PROCNO], (uint64) my_session_id);
		before_shmem_exit(fl_session_exit, (Datum) 0);
	}
	return my_session_id;
}

/* A grant bound to this session succeeded: remember the resource for the exit callback. */
void
fl_session_bound(text *resource)
{
	MemoryContext old;
	ListCell *lc;

	foreach (lc, my_session_resources)
	{
		text *t = lfirst(lc);

		if (VARSIZE_ANY_EXHDR(t) == VARSIZE_ANY_EXHDR(resource) &&
			memcmp(VARDATA_ANY(t), VARDATA_ANY(resource), VARSIZE_ANY_EXHDR(t)) == 0)
			return;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	my_session_resources =
		lappend(my_session_resources, DatumGetTextPCopy(PointerGetDatum(resource)));
	MemoryContextSwitchTo(old);
}

/*
 * Whether this database's lease table can bind leases to sessions: from 0.3.0 on.  The library
 * keeps serving a database not yet updated with the statements of its version.  Cached, and
 * looked up again after any invalidation of the lease table (ALTER EXTENSION ... UPDATE).
 */
static int lease_has_sessions = -1;
static Oid lease_relid = InvalidOid;

static void
fl_session_relcache_cb(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == lease_relid)
		lease_has_sessions = -1;
}

bool
fl_lease_has_sessions(void)
{
	static bool registered = false;

	if (lease_has_sessions < 0)
	{
		Oid nsp = get_namespace_oid("fencelock", true);

		if (!registered)
		{
			CacheRegisterRelcacheCallback(fl_session_relcache_cb, (Datum) 0);
			registered = true;
		}
		lease_relid = OidIsValid(nsp) ? get_relname_relid("lease", nsp) : InvalidOid;
		lease_has_sessions =
			OidIsValid(lease_relid) && get_attnum(lease_relid, "session_id") != InvalidAttrNumber;
	}
	return lease_has_sessions > 0;
}

/* SQL: whether the session with this id is still connected (false without preload). */
Datum
fencelock_session_alive(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!PG_ARGISNULL(0) && fl_session_alive(PG_GETARG_INT64(0)));
}
