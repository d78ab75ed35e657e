/*
 * fencelock.c — module entry point, and every setting.
 *
 * The lease functions and the fence trigger work in any backend that loads the library.  Loaded
 * through shared_preload_libraries, fencelock also keeps statistics, the queue of waiting
 * acquires, session ids and waiting claims in shared memory (shmem.c); without it, _PG_init
 * defines the settings and installs the MERGE guard, and waits fall back to polling.
 */
#include "postgres.h"

#include <limits.h>

#include "compat.h"
#include "observe/count.h"
#include "fence/mergeguard.h"
#include "miscadmin.h"
#include "settings.h"
#include "shmem.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/memutils.h"

FL_MODULE_MAGIC;

/* The settings' variables (settings.h), at their defaults. */
int fencelock_max_ttl_s = 86400;
static int fencelock_default_ttl_ms = 30000; /* read through current_setting() */
int fencelock_lock_delay_ms = 0;
bool fencelock_history = false;
int fencelock_history_retention_s = 7 * 86400;
bool fencelock_notify = false;
int fencelock_log_level = -1;
int fencelock_claim_recheck_ms = 1000;
int fencelock_wait_recheck_ms = 1000;
int fencelock_max_tables = 1000;
int fencelock_max_resources = 5000;
int fencelock_max_waiters = 0;
bool fencelock_direct_path = true;
int fencelock_max_value_bytes = 8192;

/*
 * fencelock.max_waiters: a cap an ordinary role may only tighten.  The server's value (set in
 * postgresql.conf, by ALTER SYSTEM or on the command line) is the loosest a session of an ordinary
 * role may set; a superuser may set any.  0 is no cap, the loosest of all.
 */
static int max_waiters_server = 0;

static bool
cap_within(int value, int bound)
{
	return bound == 0 || (value != 0 && value <= bound);
}

static bool
check_max_waiters(int *newval, void **extra, GucSource source)
{
	if (source <= PGC_S_ARGV)
	{
		max_waiters_server = *newval;
		return true;
	}
	if (cap_within(*newval, max_waiters_server) || superuser())
		return true;
	GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
	GUC_check_errmsg("permission denied to raise fencelock.max_waiters above the server's %d",
					 max_waiters_server);
	GUC_check_errdetail("Only superusers may loosen the cap the server sets (0 is no cap).");
	GUC_check_errhint("Set a value between 1 and %d.", max_waiters_server);
	return false;
}

static const struct config_enum_entry log_level_options[] = {
	{"off", -1, false},        {"debug", DEBUG1, false},    {"log", LOG, false},
	{"notice", NOTICE, false}, {"warning", WARNING, false}, {NULL, 0, false}};

void _PG_init(void);

void
_PG_init(void)
{
	DefineCustomIntVariable("fencelock.max_ttl", "Longest lease that acquire and renew grant.",
							"A longer ttl is rejected; a lease that outlives its holder blocks the "
							"resource until it expires.",
							&fencelock_max_ttl_s, 86400, 1, INT_MAX, PGC_SUSET, GUC_UNIT_S, NULL,
							NULL, NULL);
	DefineCustomIntVariable(
		"fencelock.default_ttl", "Lease length of calls that name no ttl (0.2.0 API).",
		"Read by fencelock.default_ttl(), the default of every ttl argument.",
		&fencelock_default_ttl_ms, 30000, 1, INT_MAX, PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("fencelock.lock_delay",
							"How long a lease that expired without a release stays ungrantable to "
							"another owner.",
							"For resources that cannot check fences: gives a paused holder time to "
							"notice it lost the lease before anyone else acts.",
							&fencelock_lock_delay_ms, 0, 0, 86400 * 1000, PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("fencelock.history", "Records grants and how they ended.",
							 "Rows go to fencelock.history and are kept for "
							 "fencelock.history_retention.",
							 &fencelock_history, false, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("fencelock.history_retention",
							"How long fencelock.history keeps a row.", NULL,
							&fencelock_history_retention_s, 7 * 86400, 60, INT_MAX, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomBoolVariable("fencelock.notify",
							 "Sends a NOTIFY on channel \"fencelock\" for every lease event.",
							 "Grants, releases, takeovers, revokes and ended sessions, delivered "
							 "when the transaction that made them commits.",
							 &fencelock_notify, false, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("fencelock.claim_recheck",
							"Longest sleep of a waiting claim between two attempts.",
							"A waiting claim is woken by the commit that makes rows claimable; it "
							"also looks again this often for rows no commit announced (lapsed "
							"leases, run_after reached).",
							&fencelock_claim_recheck_ms, 1000, 10, 3600 * 1000, PGC_USERSET,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("fencelock.wait_recheck",
							"Longest sleep of a queued waiting acquire between two attempts.",
							"A queued waiter is woken when the release, revoke or grant before it "
							"commits, and at the holder's deadline; it also looks again this "
							"often, for wake-ups that never come.",
							&fencelock_wait_recheck_ms, 1000, 10, 3600 * 1000, PGC_USERSET,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable(
		"fencelock.direct_path",
		"Lets acquire, renew, release and lease-bound writes change or lock a lease row without a "
		"statement where that is equivalent.",
		"Off, every change runs its statement: slower, with the same results.",
		&fencelock_direct_path, true, PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable(
		"fencelock.max_waiters", "Most waiting acquires queued for one resource (0: no cap).",
		"A waiting acquire that would exceed it returns NULL at once.  Ordinary "
		"roles may only lower the server's value.",
		&fencelock_max_waiters, 0, 0, INT_MAX, PGC_USERSET, 0, check_max_waiters, NULL, NULL);
	DefineCustomIntVariable(
		"fencelock.max_value_bytes", "Largest value a lease, share or permit may carry.",
		"A longer value given to acquire, acquire_shared, acquire_permit or set_value is refused; "
		"every reader of fencelock.leases and fencelock.lease_holders fetches the values.",
		&fencelock_max_value_bytes, 8192, 64, MaxAllocSize, PGC_SUSET, GUC_UNIT_BYTE, NULL, NULL,
		NULL);
	DefineCustomEnumVariable(
		"fencelock.log_level",
		"Server log level for takeovers and rejected stale or unfenced writes.", NULL,
		&fencelock_log_level, -1, log_level_options, PGC_SUSET, 0, NULL, NULL, NULL);
	/*
	 * Shared memory, and the one setting that sizes it, exist only when preloaded: a
	 * PGC_POSTMASTER setting cannot be defined once the server runs.  It is defined before the
	 * prefix is reserved, which would otherwise discard its value from postgresql.conf.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomIntVariable(
			"fencelock.max_tables",
			"How many tables get their own rejection counters in fencelock.table_stats.",
			"Further tables are counted together in one row with a NULL table.",
			&fencelock_max_tables, 1000, 16, 1000000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
		DefineCustomIntVariable(
			"fencelock.max_resources",
			"How many resources get their own row in fencelock.resource_stats (0: none).",
			"When full, the role that brings a new name gives up its own least recently used rows; "
			"a role with none takes from the role with the most rows, down to its fair share.",
			&fencelock_max_resources, 5000, 0, 1000000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	}

	MarkGUCPrefixReserved("fencelock");

	/* One init per subsystem.  fence_trigger needs to see MERGE's actions, preloaded or not. */
	fl_merge_guard_init();
	if (process_shared_preload_libraries_in_progress)
	{
		fl_shmem_init(); /* every part of shared memory */
		fl_count_init(); /* counts that follow COMMIT PREPARED and ROLLBACK PREPARED */
	}
}
