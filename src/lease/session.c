/*
 * lease/session.c — leases that end with the session that took them.
 *
 *   SELECT fencelock.acquire('leader', 'node-1', '30 s', wait => '0', session => true);
 *
 * A session-bound lease carries the id of the backend session that took it (lease.session_id).
 * Session ids live in shared memory, one slot per PGPROC (store/sessionslot.c), so only a preloaded
 * library can bind a lease to a session.  The TTL still applies: a session that hangs
 * loses its lease when the lease expires.
 *
 * The rule is liveness: a grant treats a lease whose session is not alive as free
 * (fencelock.session_alive in the grant's WHERE clause, fl_session_alive on the direct path in
 * store/rule.c, and the leases view), so the lease row itself need not change when a session ends.
 * The same for a share or permit: a group grant does not count a holder whose session has ended
 * (store/group.c's SQL_H_OCCUPIES), and an exclusive grant ends a group left with such holders only
 * (fl_group_end_dead), so that a share whose sweep skipped its group's locked row ends with its
 * session all the same (issue 35, defect 3).
 * That is what makes a session's end safe to handle in an exit callback, where nothing may wait
 * (interrupts are held off: pg_terminate_backend and lock_timeout cannot end a wait there, and a
 * shutdown waits for the backend) and where an ERROR becomes FATAL (elog.c does that once
 * proc_exit has begun), which would skip the rest of the callback.  fl_session_exit:
 *
 *   1. fl_session_release_rows tidies the rows, best effort: in a transaction of its own, with
 *      conditional locks only (the lease table, the history table, NOTIFY's commit lock), the
 *      rows another transaction has locked skipped (FOR UPDATE SKIP LOCKED), synchronous_commit
 *      off (a standby that is gone must not hold the exit up), READ COMMITTED and read-write
 *      whatever the session had set (as the temporary schema's cleanup writes at exit).  Any
 *      error is caught, logged and rolled back.  What it skips, the liveness rule frees.
 *   2. fl_session_end_slot clears the slot, under the slot's spinlock: from then on every grant
 *      sees the session as ended.  It comes after step 1 so that a grant never finds a row the
 *      exit is about to release (it would take it over, and the holder's release, its history
 *      and its session_ended notification would be lost); step 1 cannot wait, so it does not
 *      hold the slot up.  Should step 1 still end in FATAL, fl_session_backstop, an on_shmem_exit
 *      callback (those run after every before_shmem_exit one, also after such a FATAL), clears it.
 *   3. The waiters of every resource the session bound are woken, from backend-local memory.
 *
 * lock_delay (as in Chubby and Consul) is for exactly this involuntary loss: a holder whose session
 * ended — its client disconnected or vanished, pg_terminate_backend, a FATAL error, a shutdown —
 * did not release its lease and may still act on it.  So when a session ends holding a lease
 * granted with a lock_delay, the lease ends as if it had expired at that moment: the same owner
 * may take it again at once, another owner only lock_delay after the session's end.  Step 1
 * writes that into the row (the deadline moved to the end, the session unbound, the owner kept:
 * the grant's expiry rule then applies its lock_delay).  For a row step 1 skipped, step 2 leaves
 * a record of the ended session in its slot: fl_session_alive answers true for it until its end
 * plus the largest lock_delay of its grants, so the grant's statement and the direct path give
 * the same answer there too.  A lease granted without a lock_delay is released at the session's
 * end as release() does.  release() and revoke() free a lease at once, delay or not.  After a
 * crash restart (no exit callbacks, shared memory made anew) the leases of the sessions the crash
 * ended are free at once.
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "base/asowner.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "observe/count.h"
#include "observe/history.h"
#include "store/group.h"
#include "store/rule.h"
#include "miscadmin.h"
#include "observe/notify.h"
#include "port/atomics.h"
#include "lease/session.h"
#include "store/sessionslot.h"
#include "settings.h"
#include "observe/stats.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "store/clock.h"
#include "utils/timestamp.h"
#include "wait/leasequeue.h"

/*
 * This backend's session id (0 until its first session-bound grant), what it bound, and the
 * largest lock_delay of those grants (microseconds).
 *
 * What it bound is a hash table keyed by resource (a grant looks its resource up in constant
 * time), in a memory context of its own ("fencelock session resources", visible in
 * pg_backend_memory_contexts).  It is pruned, so that a pooled connection that binds ever new
 * names does not keep them all (issue 35, defect 9): when it has grown to twice what the last
 * prune kept (at least FL_SESSION_PRUNE_MIN entries), the resources this session holds bound no
 * longer leave it (fl_session_prune).  The cost is bounded per grant: a prune looks at the
 * entries by their primary key, and as many grants again come before the next one.
 */
typedef struct FlBoundResource
{
	text *resource;  /* the key: in my_session_cxt */
	uint64 bound_in; /* the top-level transaction (my_session_xact) that last bound it */
	bool pinned;     /* bound in a prepared transaction: never pruned */
	bool keep;       /* fl_session_prune's mark */
} FlBoundResource;

#define FL_SESSION_PRUNE_MIN 1024

static int64 my_session_id = 0;
static MemoryContext my_session_cxt = NULL;
static HTAB *my_session_resources = NULL; /* FlBoundResource, in my_session_cxt */
static long my_session_prune_at = FL_SESSION_PRUNE_MIN;
static uint64 my_session_xact = 0; /* counts this backend's top-level transactions */
static int64 my_session_lock_delay = 0;
static bool my_session_holders = false; /* a share or permit among them (store/group.c) */

/* The entries of my_session_resources (0 before the first session-bound grant). */
static long
fl_session_resource_count(void)
{
	return my_session_resources != NULL ? hash_get_num_entries(my_session_resources) : 0;
}

/* The resources this session bound, as a text[] (for the exit sweep's statements). */
static Datum
fl_session_resource_array(void)
{
	Datum *elems = palloc(sizeof(Datum) * Max(fl_session_resource_count(), 1));
	HASH_SEQ_STATUS seq;
	FlBoundResource *e;
	int n = 0;

	hash_seq_init(&seq, my_session_resources);
	while ((e = hash_seq_search(&seq)) != NULL)
		elems[n++] = PointerGetDatum(e->resource);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Step 2 of a session's end: the slot is cleared, and when its grants had a lock_delay, a record
 * keeps the session alive for that long (store/sessionslot.c: nothing there can fail).
 */
static void
fl_session_end_slot(TimestampTz now)
{
	fl_session_slot_end(my_session_id, my_session_lock_delay, now);
	my_session_id = 0;
}

/* For the exit transaction only, whatever the session had set. */
static void
fl_session_exit_settings(void)
{
	(void) set_config_option("transaction_isolation", "read committed", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	(void) set_config_option("transaction_read_only", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	(void) set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * NOTIFY's queue is written at commit under a lock that every committing notifier holds until its
 * commit is done, synchronous replication included.  Take it now, trying for a bounded moment
 * (an ordinary commit holds it for well under that), or send nothing: a notifier stuck waiting
 * for a standby that is gone must not hold the exit up.
 */
#define FL_NOTIFY_LOCK_TRIES  50
#define FL_NOTIFY_LOCK_NAP_US 2000

static bool
fl_session_notify_lock(void)
{
	LOCKTAG tag;

	SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, InvalidOid, 0);
	for (int i = 0; i < FL_NOTIFY_LOCK_TRIES; i++)
	{
		if (LockAcquire(&tag, AccessExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL)
			return true;
		pg_usleep(FL_NOTIFY_LOCK_NAP_US);
	}
	ereport(LOG_SERVER_ONLY,
			(errmsg("session_ended notifications of ended session " INT64_FORMAT " not sent: "
					"another transaction has been committing notifications for %d ms",
					my_session_id, FL_NOTIFY_LOCK_TRIES * FL_NOTIFY_LOCK_NAP_US / 1000)));
	return false;
}

/* Logged when step 1 leaves rows to the liveness rule: nobody waits for the tidying. */
#define FL_LEFT_TO_LIVENESS                                                                        \
	errdetail("Grants treat the leases of a session that has ended as ended all the same.")

/* The rows of step 1, in the exit transaction; skips what it cannot lock at once. */
static void
fl_session_release_rows_xact(TimestampTz now)
{
	Datum resources;
	FlSession session;
	SPITupleTable *ended;
	SPITupleTable *ended_holders;
	uint64 holders;
	Oid history = InvalidOid;
	bool history_ok = false;
	uint64 rows;

	if (!ConditionalLockRelationOid(fl_lease_relid(), RowExclusiveLock))
	{
		ereport(LOG_SERVER_ONLY,
				(errmsg("lease rows of ended session " INT64_FORMAT " not updated: table "
						"fencelock.lease is locked by another transaction",
						my_session_id),
				 FL_LEFT_TO_LIVENESS));
		return;
	}
	if (fencelock_history)
	{
		history = get_relname_relid("history", fl_extension_schema());
		history_ok = OidIsValid(history) && ConditionalLockRelationOid(history, RowExclusiveLock);
	}
	resources = fl_session_resource_array();
	fl_begin(&session);
	rows = fl_lease_end_session(resources, my_session_id, now);
	ended = SPI_tuptable; /* kept till fl_end, while the history statements run */
	/* Its shares and permits (store/group.c), when it took any. */
	holders = 0;
	if (my_session_holders)
	{
		Oid relid = get_relname_relid("lease_holder", fl_extension_schema());

		/* Not waited for, as the lease table is not: a dead session's holder occupies nothing. */
		if (OidIsValid(relid) && ConditionalLockRelationOid(relid, RowExclusiveLock))
			holders = fl_group_end_session(resources, my_session_id, now);
	}
	ended_holders = SPI_tuptable;
	for (uint64 r = 0; r < rows + holders; r++)
	{
		SPITupleTable *t = r < rows ? ended : ended_holders;
		HeapTuple tuple = t->vals[r < rows ? r : r - rows];
		bool isnull;
		bool released = r >= rows || DatumGetBool(SPI_getbinval(tuple, t->tupdesc, 4, &isnull));

		if (released)
			fl_count_at_commit(FL_RELEASES, 1);
		if (history_ok)
			fl_history_session_end(SPI_getbinval(tuple, t->tupdesc, 1, &isnull),
								   SPI_getbinval(tuple, t->tupdesc, 2, &isnull), now, released);
	}
	/* Last, so that NOTIFY's lock, once taken, is held only till the commit that follows. */
	if (rows + holders > 0 && fencelock_notify && fl_session_notify_lock())
		for (uint64 r = 0; r < rows + holders; r++)
		{
			SPITupleTable *t = r < rows ? ended : ended_holders;
			HeapTuple tuple = t->vals[r < rows ? r : r - rows];
			bool isnull;
			text *resource = DatumGetTextPP(SPI_getbinval(tuple, t->tupdesc, 1, &isnull));
			int64 fence = DatumGetInt64(SPI_getbinval(tuple, t->tupdesc, 2, &isnull));
			Datum holder = SPI_getbinval(tuple, t->tupdesc, 3, &isnull);

			fl_notify("session_ended", resource, fence,
					  isnull ? NULL : NameStr(*DatumGetName(holder)), NULL);
		}
	fl_end(&session);
}

/*
 * Step 1: the rows, best effort.  Once proc_exit has begun, elog.c turns every ERROR into FATAL,
 * which would end this callback half-way; the flag is lifted only inside the PG_TRY below, so that
 * an error comes back here, and is restored before anything else runs.  Signals that came in
 * meanwhile are forgotten again, as proc_exit_prepare forgot them (interrupts stay held off).
 */
static void
fl_session_release_rows(TimestampTz now)
{
	MemoryContext cxt = MemoryContextSwitchTo(TopMemoryContext);
	bool exiting = proc_exit_inprogress;
	/* An ERROR zeroes these (errfinish) before it jumps; proc_exit had interrupts held off. */
	uint32 holdoff = InterruptHoldoffCount;
	uint32 cancel_holdoff = QueryCancelHoldoffCount;

	proc_exit_inprogress = false;
	PG_TRY();
	{
		AbortOutOfAnyTransaction();
		StartTransactionCommand();
		fl_session_exit_settings();
		PushActiveSnapshot(GetTransactionSnapshot());
		fl_session_release_rows_xact(now);
		PopActiveSnapshot();
		CommitTransactionCommand();
		proc_exit_inprogress = exiting;
	}
	PG_CATCH();
	{
		ErrorData *edata;

		proc_exit_inprogress = exiting;
		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		ereport(LOG_SERVER_ONLY,
				(errcode(edata->sqlerrcode),
				 errmsg("could not update the lease rows of ended session " INT64_FORMAT ": %s",
						my_session_id, edata->message),
				 FL_LEFT_TO_LIVENESS));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	InterruptHoldoffCount = holdoff;
	QueryCancelHoldoffCount = cancel_holdoff;
	InterruptPending = false;
	ProcDiePending = false;
	QueryCancelPending = false;
	MemoryContextSwitchTo(cxt);
}

/* The exit callback: the three steps of a session's end (see the top of this file). */
static void
fl_session_exit(int code, Datum arg)
{
	TimestampTz now;
	HASH_SEQ_STATUS seq;
	FlBoundResource *e;

	if (my_session_id == 0)
		return;
	now = fl_lease_clock_read();
	if (fl_session_resource_count() > 0 && IsUnderPostmaster && OidIsValid(MyDatabaseId) &&
		!RecoveryInProgress())
		fl_session_release_rows(now);
	fl_session_end_slot(now);
	if (my_session_resources == NULL)
		return;
	hash_seq_init(&seq, my_session_resources);
	while ((e = hash_seq_search(&seq)) != NULL)
		fl_queue_wake(e->resource);
}

/* on_shmem_exit: the slot is cleared even when fl_session_exit did not get to it. */
static void
fl_session_backstop(int code, Datum arg)
{
	if (my_session_id != 0)
		fl_session_end_slot(fl_lease_clock_read());
}

/*
 * The id the current call's grants bind to; registers this session on first use.  Raises 55000
 * without shared memory: only a preloaded library sees every session's end.
 */
int64
fl_session_id(void)
{
	if (!fl_session_slots_attached())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("session-bound leases need fencelock to be loaded via "
						"shared_preload_libraries"),
				 errhint("Add 'fencelock' to shared_preload_libraries in postgresql.conf and "
						 "restart the server, or acquire with session => false.")));
	if (my_session_id == 0)
	{
		my_session_id = fl_session_slot_take();
		on_shmem_exit(fl_session_backstop, (Datum) 0);
		before_shmem_exit(fl_session_exit, (Datum) 0);
	}
	return my_session_id;
}

/* The hash table's key is a text *: hashed and compared by its bytes. */
static uint32
fl_bound_hash(const void *key, Size keysize)
{
	const text *t = *(text *const *) key;

	return hash_bytes((const unsigned char *) VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

static int
fl_bound_match(const void *key1, const void *key2, Size keysize)
{
	const text *a = *(text *const *) key1;
	const text *b = *(text *const *) key2;

	if (VARSIZE_ANY_EXHDR(a) != VARSIZE_ANY_EXHDR(b))
		return 1;
	return memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a));
}

/*
 * A prepared transaction's grant may commit at any time, its row invisible to a prune until then:
 * what it bound is kept for the exit sweep (prepared transactions are few).
 */
static void
fl_session_xact_end(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PREPARE)
	{
		HASH_SEQ_STATUS seq;
		FlBoundResource *e;

		hash_seq_init(&seq, my_session_resources);
		while ((e = hash_seq_search(&seq)) != NULL)
			if (e->bound_in == my_session_xact)
				e->pinned = true;
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		my_session_xact++;
}

static void
fl_session_resources_create(void)
{
	HASHCTL ctl;

	my_session_cxt = AllocSetContextCreate(TopMemoryContext, "fencelock session resources",
										   ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(text *);
	ctl.entrysize = sizeof(FlBoundResource);
	ctl.hash = fl_bound_hash;
	ctl.match = fl_bound_match;
	ctl.hcxt = my_session_cxt;
	my_session_resources = hash_create("fencelock session resources", 256, &ctl,
									   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	fl_xact_join(FL_XACT_SESSION, fl_session_xact_end, NULL);
}

/*
 * $1 the resources this session bound, $2 its id, $3 now: the lease rows among them, each with
 * whether the exit sweep still has something to end there (step 1: the session's live lease,
 * store/rule.c's session_end; a holder of it, store/group.c's), and the row's xmin.
 */
#define SESSION_BOUND_SELECT(holders)                                                              \
	"SELECT l.resource, l.xmin, (l.session_id OPERATOR(pg_catalog.=) $2 "                          \
	" AND l.owner IS NOT NULL AND l.expires_at OPERATOR(pg_catalog.>) $3) " holders " "            \
	"FROM fencelock.lease AS l WHERE l.resource OPERATOR(pg_catalog.=) ANY ($1)"

static FlStmt session_bound[2] = {
	{SESSION_BOUND_SELECT(""), 3, {TEXTARRAYOID, INT8OID, TIMESTAMPTZOID}},
	{SESSION_BOUND_SELECT("OR EXISTS (SELECT FROM fencelock.lease_holder AS h "
						  " WHERE h.resource OPERATOR(pg_catalog.=) l.resource "
						  "  AND h.session_id OPERATOR(pg_catalog.=) $2)"),
	 3,
	 {TEXTARRAYOID, INT8OID, TIMESTAMPTZOID}}};

/*
 * Forget the resources the exit sweep would find nothing of this session's in: no row bound to it
 * (released, expired, revoked, taken over, purged).  Kept also: a row this transaction has changed
 * (its release may still roll back; it goes at a later prune), and what a prepared transaction
 * bound (fl_session_xact_end).  Nothing here errs once the statement has run: the table stays
 * whole whatever happens.
 */
static void
fl_session_prune(void)
{
	Datum values[3];
	FlSession s;
	HASH_SEQ_STATUS seq;
	FlBoundResource *e;
	uint64 rows;

	values[0] = fl_session_resource_array();
	values[1] = Int64GetDatum(my_session_id);
	values[2] = TimestampTzGetDatum(fl_lease_now());
	fl_begin(&s);
	rows = fl_run(&session_bound[my_session_holders], values, NULL, false);
	hash_seq_init(&seq, my_session_resources);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->keep = e->pinned;
	for (uint64 r = 0; r < rows; r++)
	{
		HeapTuple t = SPI_tuptable->vals[r];
		TupleDesc d = SPI_tuptable->tupdesc;
		bool isnull;
		text *resource = DatumGetTextPP(SPI_getbinval(t, d, 1, &isnull));
		TransactionId xmin = DatumGetTransactionId(SPI_getbinval(t, d, 2, &isnull));
		Datum bound = SPI_getbinval(t, d, 3, &isnull);

		if ((!isnull && DatumGetBool(bound)) || TransactionIdIsCurrentTransactionId(xmin))
		{
			e = hash_search(my_session_resources, &resource, HASH_FIND, NULL);
			if (e != NULL)
				e->keep = true;
		}
	}
	fl_end(&s);
	hash_seq_init(&seq, my_session_resources);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (!e->keep)
		{
			text *resource = e->resource;

			(void) hash_search(my_session_resources, &resource, HASH_REMOVE, NULL);
			pfree(resource);
		}
	my_session_prune_at = Max(FL_SESSION_PRUNE_MIN, 2 * fl_session_resource_count());
}

/*
 * A grant bound to this session succeeded: remember the resource for the exit callback (GROUP: a
 * share or a permit, whose holder row the exit releases too).  Constant time per grant (the prune
 * above, amortized).
 */
void
fl_session_bound(text *resource, bool group)
{
	MemoryContext old;
	FlBoundResource *e;
	bool found;

	/* The grant stored the caller's fencelock.lock_delay in the row (store/rule.c). */
	my_session_lock_delay = Max(my_session_lock_delay, (int64) fencelock_lock_delay_ms * 1000);
	my_session_holders |= group;
	if (my_session_resources == NULL)
		fl_session_resources_create();
	e = hash_search(my_session_resources, &resource, HASH_FIND, NULL);
	if (e != NULL)
	{
		e->bound_in = my_session_xact;
		return;
	}
	if (fl_session_resource_count() >= my_session_prune_at)
		fl_session_prune();
	/* The copy first: an error leaves no entry without its key. */
	old = MemoryContextSwitchTo(my_session_cxt);
	resource = DatumGetTextPCopy(PointerGetDatum(resource));
	MemoryContextSwitchTo(old);
	e = hash_search(my_session_resources, &resource, HASH_ENTER, &found);
	e->resource = resource;
	e->bound_in = my_session_xact;
	e->pinned = false;
	e->keep = true;
}
