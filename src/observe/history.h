/*
 * observe/history.h — the optional record of grants and their endings (observe/history.c;
 * fencelock.history = on).  Each function runs inside its caller's base/asowner.c session.
 */
#ifndef FENCELOCK_HISTORY_H
#define FENCELOCK_HISTORY_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* A new grant, as the grant's side effects record it (lease/grant.c); opens its own session */
typedef struct FlHistoryGrant
{
	int64 fence;
	char how; /* an FlGrantedHow */
	TimestampTz granted_at;
	TimestampTz expires_at;
	const char *mode; /* "shared" or "permit"; NULL for the lease alone */
	int slot;         /* a permit's slot; 0 otherwise */
	bool released;    /* the transaction's own grant (acquire_xact): ends where it starts */
} FlHistoryGrant;

extern void fl_history_grant(text *resource, text *owner, const FlHistoryGrant *h);
extern void fl_history_ended(text *resource, int64 fence, TimestampTz now, const char *how);
extern void fl_history_update(text *resource, int64 fence, TimestampTz now, TimestampTz expires,
							  bool released);
extern void fl_history_purge(Datum gone, TimestampTz now);
extern void fl_history_revoke(text *resource, int64 fence, TimestampTz now);
extern void fl_history_session_end(Datum resource, Datum fence, TimestampTz now, bool released);

/* Rows of history a grant deletes, now and then, and a purge in each of its steps. */
#define FL_HISTORY_PRUNE_BATCH 500
#define FL_HISTORY_PURGE_BATCH 10000

#endif /* FENCELOCK_HISTORY_H */
