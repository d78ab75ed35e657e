/*
 * lease/lease.h — the lease API's parts, for one another: one attempt at a grant and its side
 * effects (lease/grant.c), and the waiting loop (lease/wait.c).  The request and the grant
 * (FlRequest, FlGrant) are the store's (store/rule.h).
 */
#ifndef FENCELOCK_LEASE_H
#define FENCELOCK_LEASE_H

#include "postgres.h"

#include "fencelock.h"
#include "store/rule.h"

/* lease/grant.c */
extern Name fl_holder_name(void);
extern void fl_try_acquire(text *resource, text *owner, const FlRequest *req, bool want_expiry,
						   bool nowait, FlGrant *g);

/* lease/wait.c */
extern bool fl_acquire_wait(text **res, int n, text *owner, const FlRequest *req, FlGrant *grants);

#endif /* FENCELOCK_LEASE_H */
