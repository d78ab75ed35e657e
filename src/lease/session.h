/*
 * lease/session.h — leases that end with the session that took them (lease/session.c).
 */
#ifndef FENCELOCK_SESSION_H
#define FENCELOCK_SESSION_H

#include "postgres.h"

/* This session's id (a request's session), and a grant bound to it (lease/grant.c). */
extern int64 fl_session_id(void);
extern void fl_session_bound(text *resource, bool group);

#endif /* FENCELOCK_SESSION_H */
