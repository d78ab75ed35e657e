/*
 * observe/notify.c — lease events as NOTIFY on channel "fencelock" (fencelock.notify = on).
 *
 *   LISTEN fencelock;
 *   -- Asynchronous notification "fencelock" with payload
 *   --   {"resource": "leader", "event": "released", "fence": 7, "holder": "app"}
 *
 * A notification is queued in the transaction that made the change and delivered only when it
 * commits (a grant rolled back, or a waiting attempt's subtransaction rolled back, sends
 * nothing).  The payload names the resource, the event, the fence and the role that holds (or
 * held) the lease; never the owner token, which is the capability to renew and release.  A grant
 * made with a value, and set_value, carry the value too ("value"), unless the payload would be
 * longer than NOTIFY allows: then "value_omitted": true (read it from fencelock.leases).
 */
#include "postgres.h"

#include "commands/async.h"
#include "lib/stringinfo.h"
#include "observe/notify.h"
#include "settings.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

/* Async_Notify's limit (async.c's NOTIFY_PAYLOAD_MAX_LENGTH, not in a header): shorter than it */
#define FL_NOTIFY_PAYLOAD_MAX (BLCKSZ - NAMEDATALEN - 128)

/*
 * A share's or permit's event (MODE "shared" or "permit") also names its mode and, for a permit,
 * its slot.
 */
void
fl_notify_holder(const char *event, text *resource, int64 fence, const char *holder, Jsonb *value,
				 const char *mode, int slot)
{
	StringInfoData buf;

	if (!fencelock_notify)
		return;
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"resource\": ");
	escape_json(&buf, text_to_cstring(resource));
	appendStringInfo(&buf, ", \"event\": \"%s\", \"fence\": " INT64_FORMAT ", \"holder\": ", event,
					 fence);
	if (holder != NULL)
		escape_json(&buf, holder);
	else
		appendStringInfoString(&buf, "null");
	if (mode != NULL)
		appendStringInfo(&buf, ", \"mode\": \"%s\"", mode);
	if (slot > 0)
		appendStringInfo(&buf, ", \"slot\": %d", slot);
	if (value != NULL)
	{
		char *json = JsonbToCString(NULL, &value->root, VARSIZE(value));
		/* what follows: ", \"value\": " before the value, "}" after it */
		if (buf.len + strlen(json) + 13 < FL_NOTIFY_PAYLOAD_MAX)
			appendStringInfo(&buf, ", \"value\": %s", json);
		else
			appendStringInfoString(&buf, ", \"value_omitted\": true");
		pfree(json);
	}
	appendStringInfoChar(&buf, '}');
	Async_Notify(FENCELOCK_NOTIFY_CHANNEL, buf.data);
	pfree(buf.data);
}

void
fl_notify(const char *event, text *resource, int64 fence, const char *holder, Jsonb *value)
{
	fl_notify_holder(event, resource, fence, holder, value, NULL, 0);
}
