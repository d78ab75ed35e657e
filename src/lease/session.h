/*
 * lease/session.h — leases that end with the session that took them (lease/session.c).
 */
#ifndef FENCELOCK_SESSION_H
#define FENCELOCK_SESSION_H

#include "postgres.h"

/* The session the grants of the current call bind to (0: ordinary leases), and its id. */
extern int64 fl_grant_session;
extern int64 fl_session_id(void);
extern void fl_session_bound(text *resource, bool group);

#endif /* FENCELOCK_SESSION_H */
