/*
 * fence/bound.c — lease-bound writes: a table guarded by a lease checks every write against the
 * lease's latest fence, not against the fence stored in the row.
 *
 * The first lease-bound write of a transaction under a lease share-locks the lease's row and reads
 * its latest fence (fl_lease_lock, as SELECT ... FOR SHARE run as the extension's owner would): a
 * grant updates that row, so no takeover can commit while this transaction is open, and a
 * takeover that committed first is seen (the row-lock protocol, store/README.md).  The fence
 * shown is then remembered for the rest of the transaction, so later rows under the same lease cost
 * a hash lookup.  fencelock.assert_fence records its fence here too.
 *
 * A row lock taken inside a subtransaction that rolls back is released with it; so are the
 * entries made in that subtransaction or below it.  Subtransaction ids grow within a transaction,
 * and every subtransaction started after S while S is open is inside S, so when S aborts the
 * entries to forget are those with an id of S or more.
 *
 * The entries live for one transaction, but a hash table never gives back the memory of its
 * entries: one transaction that showed the fences of many leases (a lease_column table whose
 * rows name thousands) would keep about 1 kB per lease for the rest of the session.  A table that
 * grew past FL_SHOWN_KEEP entries is dropped at the transaction's end instead (issue 35's search
 * for unbounded inputs).
 */
#include "postgres.h"

#include "base/xact.h"
#include "access/xact.h"
#include "compat.h"
#include "fencelock.h"
#include "fence/bound.h"
#include "store/fence.h"
#include "store/group.h"
#include "miscadmin.h"
#include "store/privilege.h"
#include "observe/resstats.h"
#include "settings.h"
#include "observe/stats.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

typedef struct ShownFence
{
	char lease[FENCELOCK_MAX_RESOURCE_LEN + 1]; /* hash key */
	int64 fence;
	Oid role;               /* the role the resource and holder checks passed for */
	SubTransactionId subid; /* where the row lock was taken */
} ShownFence;

/* The most entries a table keeps its memory for after the transaction that made them */
#define FL_SHOWN_KEEP 64

static HTAB *shown = NULL;
static long shown_peak = 0; /* the most entries of this transaction */
static bool shown_callbacks = false;

static void
forget(SubTransactionId from)
{
	HASH_SEQ_STATUS status;
	ShownFence *entry;

	if (shown == NULL || hash_get_num_entries(shown) == 0)
		return;
	hash_seq_init(&status, shown);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (entry->subid >= from)
			hash_search(shown, entry->lease, HASH_REMOVE, NULL);
}

static void
at_xact_end(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (shown != NULL && shown_peak > FL_SHOWN_KEEP)
			{
				hash_destroy(shown);
				shown = NULL;
			}
			else
				forget(InvalidSubTransactionId);
			shown_peak = 0;
			break;
		default:
			break;
	}
}

static void
at_subxact_end(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
			   void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget(mySubid);
}

static HTAB *
shown_fences(void)
{
	if (shown == NULL)
	{
		HASHCTL ctl;

		ctl.keysize = FENCELOCK_MAX_RESOURCE_LEN + 1;
		ctl.entrysize = sizeof(ShownFence);
		ctl.hcxt = TopMemoryContext;
		shown = hash_create("fencelock fences shown", 16, &ctl,
							HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
		if (!shown_callbacks)
		{
			fl_xact_join(FL_XACT_BOUND, at_xact_end, at_subxact_end);
			shown_callbacks = true;
		}
	}
	return shown;
}

/*
 * What was checked is a fence of the lease and the current role's right to write under it: the
 * entry remembers that role, and a write made as another one (a SECURITY DEFINER function, SET
 * ROLE) checks again (issue 35, shown fences remembered without their role).
 */
static void
remember(const char *lease, int64 fence)
{
	bool found;
	ShownFence *entry = hash_search(shown_fences(), lease, HASH_ENTER, &found);

	/* Checked again for another role: the row lock is still the one taken first. */
	if (!found || entry->fence != fence)
		entry->subid = GetCurrentSubTransactionId();
	entry->fence = fence;
	entry->role = GetUserId();
	shown_peak = Max(shown_peak, hash_get_num_entries(shown));
}

void
fl_note_shown_fence(text *resource, int64 fence)
{
	char *lease = text_to_cstring(resource);

	if (strlen(lease) <= FENCELOCK_MAX_RESOURCE_LEN)
		remember(lease, fence);
	pfree(lease);
}

static ShownFence *
lookup(const char *lease)
{
	if (shown == NULL || strlen(lease) > FENCELOCK_MAX_RESOURCE_LEN)
		return NULL;
	return hash_search(shown, lease, HASH_FIND, NULL);
}

pg_noreturn static void refuse_stale(Relation rel, AttrNumber attnum, const char *lease,
									 int64 fence, bool found, int64 latest, bool group);

static void
refuse_stale(Relation rel, AttrNumber attnum, const char *lease, int64 fence, bool found,
			 int64 latest, bool group)
{
	const char *table = RelationGetRelationName(rel);
	const char *column = get_attname(RelationGetRelid(rel), attnum, false);
	int64 late_us = found && fence < latest ? fl_lease_locked_age() : -1;

	fl_count_table(RelationGetRelid(rel), true);
	fl_resstats_stale(cstring_to_text(lease), late_us); /* observe/resstats.c: how late it came */
	if (fencelock_log_level >= 0)
		ereport(fencelock_log_level,
				(errmsg("fence " INT64_FORMAT " under lease \"%s\" refused by table \"%s\"", fence,
						lease, table)));
	if (!found)
		ereport(
			ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg("no fence has been issued for lease \"%s\"", lease),
			 errdetail("Table \"%s\", column \"%s\": writes must carry the lease's latest fence.",
					   table, column),
			 errhint("Acquire the lease before writing under it."), errtablecol(rel, attnum)));
	if (group && fence <= latest)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is not held by any holder of lease \"%s\"", fence,
						lease),
				 errdetail("Table \"%s\", column \"%s\": the share or permit granted with this "
						   "fence was released, expired and was replaced, or never existed.",
						   table, column),
				 errhint("This writer has lost its lease: roll back and stop; do not retry with "
						 "the same fence."),
				 errtablecol(rel, attnum)));
	/* How late the write came is told from a second on: a test's outputs stay the same. */
	if (fence < latest)
		ereport(ERROR,
				(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
				 errmsg("fence " INT64_FORMAT " is older than the latest fence " INT64_FORMAT
						" of lease \"%s\"",
						fence, latest, lease),
				 late_us >= USECS_PER_SEC
					 ? errdetail("Table \"%s\", column \"%s\": the lease was granted again after "
								 "this writer's grant, superseded by fence " INT64_FORMAT
								 " %.1f s ago.",
								 table, column, latest, late_us / (double) USECS_PER_SEC)
					 : errdetail("Table \"%s\", column \"%s\": the lease was granted again after "
								 "this writer's grant.",
								 table, column),
				 errhint("This writer has lost its lease: roll back and stop; do not retry with "
						 "the same fence."),
				 errtablecol(rel, attnum)));
	ereport(ERROR,
			(errcode(ERRCODE_FENCELOCK_STALE_FENCE),
			 errmsg("fence " INT64_FORMAT " was never issued for lease \"%s\", whose latest fence "
					"is " INT64_FORMAT,
					fence, lease, latest),
			 errdetail("Table \"%s\", column \"%s\": writes must carry the lease's latest fence.",
					   table, column),
			 errhint("Pass the fence that acquire returned, after its transaction committed."),
			 errtablecol(rel, attnum)));
}

/*
 * Only a member of the role that took the latest grant (or a superuser) may write under a lease,
 * as only it may call assert_fence (fl_lease_holder_member): the write row-locks the lease until
 * the transaction ends, which would otherwise let any role that can write the table hold off the
 * holder's renew and release, and a takeover.
 */
static void
check_may_write(const char *lease, Oid writer, const char *holder)
{
	if (fl_lease_holder_member(writer, holder))
		return;
	ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					errmsg("permission denied to write under lease \"%s\"", lease),
					errdetail("Only members of the role that took the lease may write under it."),
					errhint("Write as the role that called acquire.")));
}

void
fl_check_lease_write(Relation rel, AttrNumber attnum, const char *lease, int64 fence)
{
	ShownFence *entry = lookup(lease);
	NameData holder;
	bool holder_null = true;
	bool found = false;
	bool group = false;
	int64 latest = 0;

	if (entry != NULL && entry->fence == fence && entry->role == GetUserId())
		return; /* shown and row-locked earlier in this transaction, by this role */
	fl_check_resource_cstring(lease);

	if (strlen(lease) <= FENCELOCK_MAX_RESOURCE_LEN)
	{
		text *key = cstring_to_text(lease);

		fl_lease_lock(key, &found, &latest, &holder, &holder_null, &group);
		/*
		 * A group holds the lease: the write carries one of its holders' fences, and may be
		 * made by that holder's role, while the holder is in the group (store/group.c).
		 */
		if (group && fl_group_fence_holder(key, fence, &holder))
		{
			pfree(key);
			check_may_write(lease, GetUserId(), NameStr(holder));
			remember(lease, fence);
			return;
		}
		pfree(key);
		if (found && fence == latest && !group)
			check_may_write(lease, GetUserId(), holder_null ? NULL : NameStr(holder));
	}
	if (!found || fence != latest || group)
		refuse_stale(rel, attnum, lease, fence, found, latest, group);
	remember(lease, latest);
}

/*
 * One complete message per kind of write (not a verb phrase put into a sentence), in the style
 * of PostgreSQL's errdetail_relkind_not_supported.
 */
int
fl_errmsg_unfenced(FlWrite write, Relation rel)
{
	const char *table = RelationGetRelationName(rel);

	switch (write)
	{
		case FL_WRITE_INSERT:
			return errmsg("insert into table \"%s\" carries no fence", table);
		case FL_WRITE_UPDATE:
			return errmsg("update of table \"%s\" carries no fence", table);
		case FL_WRITE_DELETE:
			return errmsg("delete from table \"%s\" carries no fence", table);
		case FL_WRITE_TRUNCATE:
			return errmsg("truncate of table \"%s\" carries no fence", table);
	}
	return 0;
}

void
fl_check_lease_shown(Relation rel, AttrNumber attnum, const char *lease, FlWrite write)
{
	ShownFence *entry = lookup(lease);

	if (entry != NULL && entry->role == GetUserId())
		return;
	/* Shown as another role: this role may use the fence only if it passes the same checks. */
	if (entry != NULL)
	{
		fl_check_lease_write(rel, attnum, lease, entry->fence);
		return;
	}
	fl_count_table(RelationGetRelid(rel), false);
	if (fencelock_log_level >= 0)
		ereport(
			fencelock_log_level,
			(fl_errmsg_unfenced(write, rel),
			 errdetail("This transaction has not shown the latest fence of lease \"%s\".", lease)));
	ereport(ERROR,
			(errcode(ERRCODE_FENCELOCK_UNFENCED), fl_errmsg_unfenced(write, rel),
			 errdetail("This transaction has not shown the latest fence of lease \"%s\".", lease),
			 errhint("Call fencelock.assert_fence for the lease, or write a row under it with its "
					 "fence, earlier in the same transaction."),
			 errtablecol(rel, attnum)));
}
