/*
 * store/privilege.h — who may take which lease: resource privileges by name prefix
 * (store/privilege.c). The entry points call these before they touch a lease.
 */
#ifndef FENCELOCK_PRIVILEGE_H
#define FENCELOCK_PRIVILEGE_H

#include "postgres.h"

/* Raise 42501 unless the current role may use the resource (text, or a C string). */
extern void fl_check_resource(text *resource);
extern void fl_check_resource_cstring(const char *resource);

/* Whether ROLE may pin a lease whose latest grant was taken by role HOLDER (NULL: unknown) */
extern bool fl_lease_holder_member(Oid role, const char *holder);

#endif /* FENCELOCK_PRIVILEGE_H */
