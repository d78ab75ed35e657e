/*
 * store/rulesql.h — the SQL fragments of the lease rule that more than one file's statements are
 * built from: whom a lease row is free for, a holder's deadline, the next fence.  The rule itself,
 * in both of its forms, is store/rule.c's (its header says how); store/group.c builds a group's
 * statements from the same fragments, so that a group row is free exactly when the rule says so.
 *
 * Parameters: $2 the owner asking, $3 now.
 */
#ifndef FENCELOCK_LEASERULE_H
#define FENCELOCK_LEASERULE_H

/* The same owner's live lease keeps its fence; any other grant takes a new one. */
#define SQL_SAME_LIVE_OWNER                                                                        \
	"l.owner OPERATOR(pg_catalog.=) $2 AND l.expires_at OPERATOR(pg_catalog.>) $3"

/* A new fence: above the row's and above every fence of earlier timelines. */
#define SQL_NEXT_FENCE(base) "GREATEST(l.fence, " base ") OPERATOR(pg_catalog.+) 1"

/*
 * Whom a lease row is free for.  0.1.0: nobody holds it, its lease expired, or it is the same
 * owner's.  Later: a lease that expired without a release stays another owner's for its
 * lock_delay (kept in the row: the granting session's fencelock.lock_delay) after its deadline.
 * 0.3.0: a lease whose session has ended is free.
 */
#define SQL_FREE_V1                                                                                \
	"(l.owner IS NULL OR l.expires_at OPERATOR(pg_catalog.<=) $3 "                                 \
	" OR l.owner OPERATOR(pg_catalog.=) $2)"
#define SQL_HOLDER_DEADLINE "l.expires_at OPERATOR(pg_catalog.+) COALESCE(l.lock_delay, '0')"
#define SQL_FREE_V2                                                                                \
	"(l.owner IS NULL OR l.owner OPERATOR(pg_catalog.=) $2 "                                       \
	" OR " SQL_HOLDER_DEADLINE " OPERATOR(pg_catalog.<=) $3)"
#define SQL_FREE_V3                                                                                \
	"(" SQL_FREE_V2 " OR (l.session_id IS NOT NULL "                                               \
	" AND NOT fencelock.session_alive(l.session_id)))"

#endif /* FENCELOCK_LEASERULE_H */
