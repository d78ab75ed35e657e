/*
 * base/args.h — argument checks shared by the SQL functions.  Each runs before anything is written
 * and raises the same error, in the same words, for the same fault of any function's argument:
 *
 *   NAME must not be null                      22004
 *   NAME must not be empty                     22023
 *   NAME is N bytes long, longer than ...      54000
 *   NAME must not be negative                  22023   (intervals)
 *   NAME is out of range                       22023   (intervals: infinite, or beyond int64 us)
 *   NAME must be positive, not N               22023   (counts)
 *
 * NAME is the parameter's name as the SQL signature spells it (an identifier, not prose).  An
 * argument whose NULL means something (claim's wait, fail's backoff) is tested for NULL by its
 * function before it is checked here.
 */
#ifndef FENCELOCK_ARGS_H
#define FENCELOCK_ARGS_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* A text argument: not null, not empty, at most maxlen bytes. */
typedef struct FlTextArg
{
	const char *name;
	int maxlen;
	const char *hint;      /* for a null or empty value */
	const char *long_hint; /* for a value longer than maxlen */
} FlTextArg;

extern const FlTextArg fl_resource_arg; /* at most FENCELOCK_MAX_RESOURCE_LEN */
extern const FlTextArg fl_owner_arg;    /* at most FENCELOCK_MAX_OWNER_LEN */

extern void fl_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name, const char *hint);
extern text *fl_arg_text(FunctionCallInfo fcinfo, int argno, const FlTextArg *arg);
/* A text[] of resource names, each checked as a resource; *resources palloc'd; returns the count */
#define FL_MAX_RESOURCES 1000
extern int fl_arg_resources(FunctionCallInfo fcinfo, int argno, text ***resources);
extern text *fl_arg_resource(FunctionCallInfo fcinfo, int argno);
extern text *fl_arg_owner(FunctionCallInfo fcinfo, int argno);
extern int64 fl_arg_fence(FunctionCallInfo fcinfo, int argno, const char *hint);
extern int32 fl_arg_count(FunctionCallInfo fcinfo, int argno, const char *name, const char *hint);

extern int64 fl_arg_interval(FunctionCallInfo fcinfo, int argno, const char *name,
							 const char *hint);
extern int64 fl_arg_wait(FunctionCallInfo fcinfo, int argno, const char *hint);
extern int64 fl_arg_ttl(FunctionCallInfo fcinfo, int argno);
extern Jsonb *fl_arg_value(FunctionCallInfo fcinfo, int argno);

/* The longest wait (and backoff_max): a deadline beyond a century is no deadline. */
#define FL_MAX_WAIT_US ((int64) 100 * 365 * USECS_PER_DAY)

#endif /* FENCELOCK_ARGS_H */
