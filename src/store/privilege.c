/*
 * store/privilege.c — who may take which lease: resource privileges by name prefix (issue 22).
 *
 *   grant_resources(prefix, grantee)    reserves the names beginning with prefix to grantee
 *   revoke_resources(prefix, grantee)   takes one such grant back
 *   view resource_privileges            the grants (prefix, grantee)
 *
 * Resource names are one namespace open to every role that may call acquire.  Once a prefix of
 * fencelock.resource_grants covers a name, only members of that prefix's grantees (and
 * superusers) may acquire, renew, release or assert_fence it, or write a table bound to it; where
 * several prefixes cover a name, the longest decides.  Names under no prefix stay open.  The
 * entry points (lease/acquire.c, lease/lease.c, fence/bound.c) call fl_check_resource before they
 * touch the lease; the lease rule (store/rule.c) knows nothing of it.
 *
 * Grants follow their roles (issue 35).  A row names its grantee by role name, a form a dump
 * restores whatever roles the new cluster has; grant_resources also grants the role a marker,
 * SELECT on the column grantee of fencelock.resource_grants, a privilege nothing else grants.
 * When the cache is built, a row matches the role of its name only if that role holds the marker
 * itself (an entry of the column's ACL, by OID; the table's owner, whose privileges are its own,
 * needs none): a name that resolves to no role (a restore without the role, a role dropped), or
 * to a role that is not the one granted (created later under a dropped or renamed grantee's
 * name), matches nobody, so its prefix stays reserved; a grant fails closed, never open.
 * PostgreSQL records the marker in pg_shdepend: DROP ROLE is refused while the role holds it
 * ("privileges for column grantee of table fencelock.resource_grants"), DROP OWNED BY takes it,
 * pg_dump keeps it by role name, and revoke_resources takes it with the role's last grant,
 * leaving any other privilege on the table (a table-level SELECT a DBA granted) alone.  No
 * dependency of a class PostgreSQL cannot describe is made, so DROP ROLE and DROP OWNED BY never
 * fail on one.
 *
 * This file owns fencelock.resource_grants: its statements and this backend's cache of it.  The
 * cache holds the prefixes in a hash table keyed by the prefix's bytes, and the distinct prefix
 * lengths, longest first: the longest prefix covering a name is the first of its leading parts
 * of those lengths found in the table.  With no prefix defined the check is one flag test.  It is
 * dropped at any invalidation of the table's relcache entry (grant_resources and
 * revoke_resources send one; a GRANT or REVOKE on the table or its columns sends one: pg_class's
 * or pg_attribute's row changes) or of a role, and rebuilt
 * at the next check.  It is valid only once built completely from a snapshot taken then: a build
 * that an error interrupts (a cancel, a statement_timeout) leaves it invalid, so the check that
 * could not be made raises that error and the next one builds again (issue 35, defect 1).
 */
#include "postgres.h"

#include "access/xact.h"
#include "base/args.h"
#include "base/asowner.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "fencelock.h"
#include "miscadmin.h"
#include "store/privilege.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(fencelock_grant_resources);
PG_FUNCTION_INFO_V1(fencelock_revoke_resources);

/* One prefix and the roles granted it. */
typedef struct FlPrefix
{
	char *bytes; /* not NUL-terminated */
	int len;
	uint32 hash;
	int ngrantees;
	Oid *grantees;
} FlPrefix;

static struct
{
	bool valid;           /* built completely, and no invalidation came while it was built */
	bool any;             /* some prefix exists: the flag the check tests first */
	uint64 invalidations; /* counted by the callbacks: a build that saw one is not kept */
	Oid relid; /* fencelock.resource_grants, InvalidOid when the table is missing (before 0.4.0) */
	MemoryContext cxt;
	FlPrefix *slots; /* open addressing, nslots a power of two, NULL bytes: empty */
	int nslots;
	int *lengths; /* distinct prefix lengths, longest first */
	int nlengths;
} cache;

/*
 * Read with a snapshot taken now, whatever the caller's isolation level: a cache built from a
 * repeatable read transaction's older snapshot would miss a grant committed since, and be kept.
 */
static FlStmt grants_select = {"SELECT g.prefix, CAST(g.grantee AS pg_catalog.text) "
							   "FROM fencelock.resource_grants AS g ORDER BY g.prefix",
							   0,
							   {InvalidOid}};

static FlStmt grant_insert = {"INSERT INTO fencelock.resource_grants AS g (prefix, grantee) "
							  "VALUES ($1, $2) ON CONFLICT (prefix, grantee) DO NOTHING",
							  2,
							  {TEXTOID, TEXTOID}};

static FlStmt grant_delete = {"DELETE FROM fencelock.resource_grants AS g "
							  "WHERE g.prefix OPERATOR(pg_catalog.=) $1 "
							  "AND g.grantee OPERATOR(pg_catalog.=) $2",
							  2,
							  {TEXTOID, TEXTOID}};

static FlStmt grantee_rows = {"SELECT 1 FROM fencelock.resource_grants AS g "
							  "WHERE g.grantee OPERATOR(pg_catalog.=) $1 LIMIT 1",
							  1,
							  {TEXTOID}};

static const FlTextArg prefix_arg = {
	"prefix", FENCELOCK_MAX_RESOURCE_LEN,
	"Pass the beginning of the resource names to reserve, such as 'order-'.",
	"A prefix is no longer than a resource name."};

static const FlTextArg grantee_arg = {"grantee", FENCELOCK_MAX_RESOURCE_LEN,
									  "Pass the grantee as resource_privileges shows it.",
									  "No grant names a grantee that long."};

static void
cache_invalidate(Datum arg, Oid relid)
{
	/* A missing table: any invalidation may be the update that creates it. */
	if (relid == InvalidOid || relid == cache.relid || !OidIsValid(cache.relid))
	{
		cache.valid = false;
		cache.invalidations++;
	}
}

/* A role was created, renamed or dropped: the grantees' names resolve anew. */
static void
cache_invalidate_roles(Datum arg, int cacheid, uint32 hashvalue)
{
	cache.valid = false;
	cache.invalidations++;
}

static FlPrefix *
slot_for(const char *bytes, int len, uint32 hash)
{
	int mask = cache.nslots - 1;

	for (int i = hash & mask;; i = (i + 1) & mask)
	{
		FlPrefix *p = &cache.slots[i];

		if (p->bytes == NULL ||
			(p->hash == hash && p->len == len && memcmp(p->bytes, bytes, len) == 0))
			return p;
	}
}

/* Row R's prefix, of the grants just read (never NULL: the column is NOT NULL). */
static text *
row_prefix(uint64 r)
{
	bool isnull;
	Datum d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);

	return isnull ? cstring_to_text("") : DatumGetTextPP(d);
}

static bool
texts_equal(text *a, text *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		   memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * The roles that hold the marker, SELECT on column grantee of RELID, themselves: the grantees of
 * the column's ACL entries (never a membership, never the table-level SELECT).  In the caller's
 * memory; *N of them.  A missing column (a superuser's ALTER TABLE): none.
 */
static Oid *
marker_holders(Oid relid, int *n)
{
	HeapTuple tup = SearchSysCacheAttName(relid, "grantee");
	Oid *holders = NULL;
	bool isnull;
	Datum d;

	*n = 0;
	if (!HeapTupleIsValid(tup))
		return NULL;
	d = SysCacheGetAttr(ATTNAME, tup, Anum_pg_attribute_attacl, &isnull);
	if (!isnull)
	{
		Acl *acl = DatumGetAclPCopy(d);
		AclItem *items = ACL_DAT(acl);

		holders = palloc(sizeof(Oid) * Max(ACL_NUM(acl), 1));
		for (int i = 0; i < ACL_NUM(acl); i++)
			if ((ACLITEM_GET_PRIVS(items[i]) & ACL_SELECT) != 0)
				holders[(*n)++] = items[i].ai_grantee;
		pfree(acl);
	}
	ReleaseSysCache(tup);
	return holders;
}

/* The role a grant row names, NAME (NULL when unreadable), if it is the one granted; else 0. */
static Oid
granted_role(const char *name, Oid owner, const Oid *holders, int nholders)
{
	Oid role = name != NULL ? get_role_oid(name, true) : InvalidOid;

	if (!OidIsValid(role) || role == owner)
		return role;
	for (int i = 0; i < nholders; i++)
		if (holders[i] == role)
			return role;
	return InvalidOid;
}

/* Read the grants into the cache, in its own memory context. */
static void
cache_read(void)
{
	FlSession s;
	uint64 n;
	bool *seen_length;
	Oid owner;
	Oid *holders;
	int nholders;

	/* In the caller's memory: SPI_finish frees what is allocated in between. */
	seen_length = palloc0(sizeof(bool) * (FENCELOCK_MAX_RESOURCE_LEN + 1));
	fl_begin(&s);
	n = fl_run_latest(&grants_select, NULL, NULL);
	/* After the read, whose lock took the invalidations committed before it. */
	owner = fl_rel_owner(cache.relid);
	holders = marker_holders(cache.relid, &nholders);
	cache.nslots = 16;
	while (cache.nslots < 2 * (int) n)
		cache.nslots *= 2;
	cache.slots = MemoryContextAllocZero(cache.cxt, sizeof(FlPrefix) * cache.nslots);
	cache.lengths = MemoryContextAlloc(cache.cxt, sizeof(int) * (FENCELOCK_MAX_RESOURCE_LEN + 1));
	/* Ordered by prefix: the grants of one prefix are one run of rows. */
	for (uint64 r = 0, next; r < n; r = next)
	{
		text *t = row_prefix(r);
		int len = VARSIZE_ANY_EXHDR(t);
		uint32 hash = hash_bytes((const unsigned char *) VARDATA_ANY(t), len);
		FlPrefix *p;

		for (next = r + 1; next < n && texts_equal(row_prefix(next), t); next++)
			;
		if (len == 0 || len > FENCELOCK_MAX_RESOURCE_LEN)
			continue;
		p = slot_for(VARDATA_ANY(t), len, hash);
		p->bytes = MemoryContextAlloc(cache.cxt, len);
		memcpy(p->bytes, VARDATA_ANY(t), len);
		p->len = len;
		p->hash = hash;
		p->grantees = MemoryContextAlloc(cache.cxt, sizeof(Oid) * (next - r));
		/* A grantee that is not the role granted matches nobody: the prefix stays reserved. */
		for (uint64 g = r; g < next; g++)
		{
			Oid role = granted_role(SPI_getvalue(SPI_tuptable->vals[g], SPI_tuptable->tupdesc, 2),
									owner, holders, nholders);

			if (OidIsValid(role))
				p->grantees[p->ngrantees++] = role;
		}
		seen_length[len] = true;
		cache.any = true;
	}
	fl_end(&s);
	for (int len = FENCELOCK_MAX_RESOURCE_LEN; len > 0; len--)
		if (seen_length[len])
			cache.lengths[cache.nlengths++] = len;
	pfree(seen_length);
}

/*
 * Build the cache from the table.  It is marked valid only at the end, and only when no
 * invalidation came in between: an error on the way (a cancel, a timeout, a missing relation)
 * leaves it invalid, with the error raised to the caller, whose check is thereby refused.  The
 * caller may use what a build read even when an invalidation kept it from being marked valid: it
 * was read completely, from a snapshot taken during the check.
 */
static void
cache_build(void)
{
	static bool registered = false;
	uint64 invalidations = cache.invalidations;
	Oid relid;

	cache.valid = false;
	if (!registered)
	{
		CacheRegisterRelcacheCallback(cache_invalidate, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, cache_invalidate_roles, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHNAME, cache_invalidate_roles, (Datum) 0);
		registered = true;
	}
	if (cache.cxt == NULL)
		cache.cxt = AllocSetContextCreate(TopMemoryContext, "fencelock resource privileges",
										  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(cache.cxt);
	cache.slots = NULL;
	cache.nslots = 0;
	cache.lengths = NULL;
	cache.nlengths = 0;
	cache.any = false;
	relid = get_relname_relid("resource_grants", fl_extension_schema());
	cache.relid = relid;
	if (OidIsValid(relid))
		cache_read();
	cache.valid = cache.invalidations == invalidations;
}

/* The longest prefix covering NAME (LEN bytes), or NULL. */
static const FlPrefix *
covering(const char *name, int len)
{
	for (int i = 0; i < cache.nlengths; i++)
	{
		int l = cache.lengths[i];
		const FlPrefix *p;

		if (l > len)
			continue;
		p = slot_for(name, l, hash_bytes((const unsigned char *) name, l));
		if (p->bytes != NULL)
			return p;
	}
	return NULL;
}

static bool
member_of_any(Oid role, const FlPrefix *p)
{
	if (superuser_arg(role))
		return true;
	for (int i = 0; i < p->ngrantees; i++)
		if (has_privs_of_role(role, p->grantees[i]))
			return true;
	return false;
}

/*
 * Raise 42501 unless the current role may use RESOURCE (NAME, LEN bytes): it is under no prefix,
 * or the role is a member of a grantee of the longest prefix covering it.
 */
static void
check_name(const char *name, int len)
{
	const FlPrefix *p;

	if (!cache.valid)
		cache_build();
	if (!cache.any)
		return;
	p = covering(name, len);
	if (p == NULL || member_of_any(GetUserId(), p))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for resource \"%.*s\"", len, name),
			 errdetail("Resource names beginning with \"%.*s\" are reserved to the roles granted "
					   "that prefix.",
					   p->len, p->bytes),
			 errhint("Call as a member of such a role; the extension's owner grants the prefix "
					 "with fencelock.grant_resources('%.*s', role).",
					 p->len, p->bytes)));
}

void
fl_check_resource(text *resource)
{
	/* The one flag test when no prefix is defined. */
	if (likely(cache.valid && !cache.any))
		return;
	check_name(VARDATA_ANY(resource), VARSIZE_ANY_EXHDR(resource));
}

void
fl_check_resource_cstring(const char *resource)
{
	if (likely(cache.valid && !cache.any))
		return;
	check_name(resource, strlen(resource));
}

/* The grantee argument of grant_resources: not null, an existing role. */
static Oid
arg_grantee(FunctionCallInfo fcinfo, int argno)
{
	Oid role;

	fl_arg_not_null(fcinfo, argno, "grantee", "Pass a role, such as 'app'.");
	role = PG_GETARG_OID(argno);
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("role with OID %u does not exist", role),
				 errhint("Pass a role, such as 'app'.")));
	return role;
}

static Oid
grants_relid(void)
{
	Oid relid = get_relname_relid("resource_grants", fl_extension_schema());

	if (!OidIsValid(relid))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("fencelock.resource_grants does not exist"),
						errhint("Update the extension: ALTER EXTENSION fencelock UPDATE.")));
	return relid;
}

/*
 * Give role NAME the marker that ties it to its grants, SELECT on column grantee (GRANT), or take
 * it (REVOKE), as the extension's owner, inside fl_begin.  A column privilege only: a REVOKE
 * leaves the role's table-level SELECT, which is not the marker, to whoever granted it.  Never for
 * the table's owner, whose privileges are its own.
 */
static void
holder_privilege(Oid relid, const char *name, bool grant)
{
	Oid role = get_role_oid(name, true);
	char *sql;
	int rc;

	if (!OidIsValid(role) || role == fl_rel_owner(relid))
		return;
	sql = psprintf(grant ? "GRANT SELECT (grantee) ON TABLE fencelock.resource_grants TO %s"
						 : "REVOKE SELECT (grantee) ON TABLE fencelock.resource_grants FROM %s",
				   quote_identifier(name));
	rc = SPI_execute(sql, false, 0);
	(void) fl_spi_result(sql, rc);
	pfree(sql);
}

/*
 * Change the grants by STMT and bring the grantee's privilege in line: held while it has a grant
 * here, revoked with its last one.  Every backend's cache is dropped when the change commits.
 */
static bool
change_grants(FlStmt *stmt, text *prefix, text *grantee)
{
	Datum values[2] = {PointerGetDatum(prefix), PointerGetDatum(grantee)};
	Oid relid = grants_relid();
	char *name = text_to_cstring(grantee);
	FlSession s;
	bool changed;
	bool holds;

	/*
	 * One change at a time, to the transaction's end: the marker of every grantee is one
	 * pg_attribute row, and two GRANTs of it racing fail with "tuple concurrently updated"
	 * (XX000).  Self-conflicting, and no conflict with the cache's reads (ACCESS SHARE).
	 */
	LockRelationOid(relid, ShareRowExclusiveLock);
	fl_begin(&s);
	changed = fl_run(stmt, values, NULL, false) > 0;
	holds = fl_run(&grantee_rows, &values[1], NULL, false) > 0;
	holder_privilege(relid, name, holds);
	fl_end(&s);
	CacheInvalidateRelcacheByRelid(relid);
	pfree(name);
	return changed;
}

/* grant_resources(prefix, grantee regrole): true when the grant is new */
Datum
fencelock_grant_resources(PG_FUNCTION_ARGS)
{
	text *prefix = fl_arg_text(fcinfo, 0, &prefix_arg);
	Oid role = arg_grantee(fcinfo, 1);

	PG_RETURN_BOOL(
		change_grants(&grant_insert, prefix, cstring_to_text(GetUserNameFromId(role, false))));
}

/*
 * revoke_resources(prefix, grantee text): true when there was such a grant.  The grantee by the
 * name the grant keeps, so that a grant whose role is gone can still be taken back.
 */
Datum
fencelock_revoke_resources(PG_FUNCTION_ARGS)
{
	text *prefix = fl_arg_text(fcinfo, 0, &prefix_arg);
	text *grantee = fl_arg_text(fcinfo, 1, &grantee_arg);

	PG_RETURN_BOOL(change_grants(&grant_delete, prefix, grantee));
}

/*
 * Only a member of the role that took the latest grant (HOLDER, NULL when unknown), or a
 * superuser, may pin a lease row: anyone else could hold the row lock and block the holder's
 * renew and release, and a takeover.  assert_fence and lease-bound writes ask.
 */
bool
fl_lease_holder_member(Oid role, const char *holder)
{
	Oid holder_role = holder != NULL ? get_role_oid(holder, true) : InvalidOid;

	return superuser_arg(role) || (OidIsValid(holder_role) && has_privs_of_role(role, holder_role));
}
