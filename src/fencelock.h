/*
 * fencelock.h — what every part of fencelock shares: its SQLSTATEs, its input limits, how fences
 * encode the timeline, the versions of its SQL API and how a lease was granted.  Each part's
 * own declarations are in that part's header.
 */
#ifndef FENCELOCK_H
#define FENCELOCK_H

#include "postgres.h"

/* Our own SQLSTATEs (class FL), documented in README's error table. */
#define ERRCODE_FENCELOCK_STALE_FENCE MAKE_SQLSTATE('F', 'L', '0', '0', '1')
#define ERRCODE_FENCELOCK_UNFENCED    MAKE_SQLSTATE('F', 'L', '0', '0', '2')

/* Documented input limits, in bytes. */
#define FENCELOCK_MAX_RESOURCE_LEN 1024
#define FENCELOCK_MAX_OWNER_LEN    256

/*
 * Fences carry the server's timeline in their top bits: a grant on timeline T gets a fence of at
 * least (T - 1) << FENCELOCK_TIMELINE_SHIFT, so every fence issued after a promotion exceeds every
 * fence issued on the timeline before it, even when an asynchronous standby lost the last grants.
 */
#define FENCELOCK_TIMELINE_SHIFT 48
#define FENCELOCK_MAX_TIMELINE   ((1U << (63 - FENCELOCK_TIMELINE_SHIFT)) - 1)

/*
 * The SQL entry points of each version of the extension's scripts: a database keeps its
 * version's definitions (and its lease table's columns) until ALTER EXTENSION ... UPDATE.
 */
typedef enum FlApi
{
	FL_API_0_1 = 1, /* no granted_how, no lock_delay, no counts or history */
	FL_API_0_2 = 2  /* also 0.3.0's: sessions are found from the lease table's columns */
} FlApi;

/* How a lease was granted: fencelock.lease.granted_how, history's granted_how in words. */
typedef enum FlGrantedHow
{
	FL_GRANTED_NEW = 'n',           /* the resource's first grant, or after a purge */
	FL_GRANTED_AFTER_RELEASE = 'r', /* after a release, a revoke or the holder's session ended */
	FL_GRANTED_AFTER_EXPIRY = 'e',  /* to the same owner, after its own lease expired */
	FL_GRANTED_TAKEOVER = 't',      /* to another owner, after the holder's lease expired */
	FL_GRANTED_REVOKED = 'v',       /* not a grant: revoke's new fence, nobody holds it */
	FL_GRANTED_JOINED = 'j'         /* a share or permit of a group that holds the lease already */
} FlGrantedHow;

#endif /* FENCELOCK_H */
