/*
 * store/value.h — a value on a lease (store/value.c): fencelock.lease_value, one value per
 * resource, stamped with the fence of the grant it belongs to.
 */
#ifndef FENCELOCK_LEASEVALUE_H
#define FENCELOCK_LEASEVALUE_H

#include "postgres.h"

#include "utils/jsonb.h"

extern bool fl_lease_value_set(text *resource, int64 fence, Jsonb *value);
extern void fl_lease_value_purge(void);

#endif /* FENCELOCK_LEASEVALUE_H */
