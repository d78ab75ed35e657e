/*
 * lease/key.c — fencelock.key(VARIADIC parts text[]): resource keys built from parts.
 *
 * Each part is escaped ('\' becomes '\\', ':' becomes '\:') and the parts are joined with ':'.
 * The encoding is injective: two different lists of parts never give the same key.
 */
#include "postgres.h"

#include "base/args.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(fencelock_key);

Datum
fencelock_key(PG_FUNCTION_ARGS)
{
	ArrayType *parts;
	Datum *elems;
	bool *nulls;
	int n;
	StringInfoData buf;

	fl_arg_not_null(fcinfo, 0, "parts",
					"Pass one or more text parts, e.g. fencelock.key('tenant-1', 'order', '42').");
	parts = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(parts) > 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("key parts must be a one-dimensional array"),
						errhint("Pass the parts as separate arguments.")));
	deconstruct_array(parts, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("a key needs at least one part"),
				 errhint("Pass one or more text parts.")));

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		text *part;
		const char *p;
		int len;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key part %d is null", i + 1),
					 errhint("Every part must be a text value; use '' for an empty part.")));
		part = DatumGetTextPP(elems[i]);
		p = VARDATA_ANY(part);
		len = VARSIZE_ANY_EXHDR(part);
		if (i > 0)
			appendStringInfoChar(&buf, ':');
		for (int j = 0; j < len; j++)
		{
			if (p[j] == '\\' || p[j] == ':')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, p[j]);
		}
	}
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
