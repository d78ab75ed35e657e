/*
 * claim/claim.h — task tables: fenced worker queues in users' own tables.  The types their files
 * share, and what each file offers the others:
 *
 *   claim/table.c   the table and its columns: the convention (state, lease_owner, lease_until,
 *                  attempt, fence; optional run_after, priority, max_attempts, last_error,
 *                  finished_at; a primary key), the fence and wake triggers it must carry, and
 *                  its row in fencelock.task_tables
 *   claim/sql.c     the statements, built once per table from its columns
 *   claim/cache.c   the per-backend cache of task tables, their plans, running them
 *   claim/claim.c        claim (also waiting)
 *   claim/rows.c     heartbeat, complete, fail and complete_all: a claimed row under its exact
 * fence claim/admin.c   enable_tasks and purge_tasks
 *
 * Calls go down this list, never up it: claim/claim.c, claim/rows.c and claim/admin.c call
 * claim/cache.c and claim/table.c; claim/cache.c calls claim/sql.c and claim/table.c.
 *
 * Unlike the lease API, these functions run their statements as the caller: users own their task
 * tables, so a role claims only in tables it may UPDATE.  Only the statements on
 * fencelock.task_tables run as the extension's owner.  Each table's statements are built once per
 * backend from the catalog, with every identifier quoted and every value a parameter, and kept
 * until a relcache invalidation of the table (ALTER TABLE, DROP TRIGGER, enable_tasks again).
 */
#ifndef FENCELOCK_CLAIM_H
#define FENCELOCK_CLAIM_H

#include "postgres.h"

#include "access/attnum.h"
#include "access/tupdesc.h"
#include "base/args.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

#define TASK_TRIGGER_NAME        "fencelock_fence"
#define WAKE_TRIGGER_NAME        "fencelock_wake"
#define WAKE_INSERT_TRIGGER_NAME "fencelock_wake_insert"

/* The parts a column plays in the convention, in enable_tasks' argument order. */
typedef enum TaskCol
{
	COL_STATE,
	COL_LEASE_OWNER,
	COL_LEASE_UNTIL,
	COL_ATTEMPT,
	COL_FENCE,
	COL_RUN_AFTER,
	COL_PRIORITY,
	COL_MAX_ATTEMPTS,
	COL_LAST_ERROR,
	COL_FINISHED_AT,
	NUM_TASK_COLS
} TaskCol;

typedef enum ColKind
{
	KIND_TEXT,
	KIND_TIMESTAMPTZ,
	KIND_INTEGER, /* smallint, integer or bigint */
	KIND_BIGINT
} ColKind;

typedef struct TaskColSpec
{
	const char *name; /* the conventional name; also the part's name in messages */
	ColKind kind;
	bool required;
	const char *ddl; /* the column's type and default in the suggested DDL */
} TaskColSpec;

/* Which column plays each part; "" for an optional part the table does not have. */
typedef struct TaskMap
{
	NameData cols[NUM_TASK_COLS];
	/* fail's backoff policy: the cap is min(max, base * 2^(attempt - 1)) */
	double backoff_base_s;
	double backoff_max_s;
	double backoff_jitter; /* the random share of the delay: 1 full, 0.5 equal, 0 none */
} TaskMap;

/* The statements kept per table. */
typedef enum TaskStmt
{
	STMT_CLAIM,
	STMT_CLAIM_DEAD, /* the rows claim met but cannot take */
	STMT_HEARTBEAT,
	STMT_COMPLETE,
	STMT_FAIL,
	STMT_READ, /* the row's relation, fence and state, when a helper's UPDATE matched nothing */
	STMT_PURGE,
	STMT_COMPLETE_ALL, /* complete_all: the rows of $1 (keys) under $2 (fences) */
	STMT_READ_ALL,     /* the rows of $1 after complete_all: relation, key's index, fence, state */
	NUM_TASK_STMTS
} TaskStmt;

/* Columns before the table's own in claim's result: tableoid. */
#define CLAIM_LEAD_COLS 1

/* A task table as this backend knows it (claim/cache.c builds it). */
typedef struct TaskTable
{
	Oid relid; /* hash key */
	bool valid;
	bool building;     /* task_table_build is running for it */
	MemoryContext cxt; /* holds the strings below */
	char *relname;
	bool has[NUM_TASK_COLS];
	int npk;
	char *pkname; /* the first (with npk == 1, the only) key column */
	Oid pktype;
	Oid fence_type; /* the fence and state columns' types, as result rows carry them */
	Oid state_type;
	int pos_fence; /* positions among the live columns, for claim's warnings */
	int pos_attempt;
	bool has_wake; /* commits that make rows claimable wake waiting claims */
	TaskMap map;   /* the columns and the backoff policy */
	int pkpos[INDEX_MAX_KEYS];
	int nsort; /* claim order: priority, run_after, the key (claim_sort) */
	int sortpos[INDEX_MAX_KEYS + 2];
	Oid sortop[INDEX_MAX_KEYS + 2];
	Oid sortcoll[INDEX_MAX_KEYS + 2];
	int nparts; /* a partitioned table: its partitions (all levels), each fenced */
	Oid *parts;
	char *sql[NUM_TASK_STMTS];
	SPIPlanPtr plan[NUM_TASK_STMTS];
	int busy;            /* executions in progress: their plans must not be freed */
	List *retired_plans; /* dropped while busy: freed once busy is back to 0 */
	List *retired_cxts;  /* (the statements' text, which an execution may still print) */
} TaskTable;

/* What the statements are built from: the table's names, quoted. */
typedef struct SqlParts
{
	const char *table;              /* schema-qualified, quoted */
	const char *col[NUM_TASK_COLS]; /* quoted, NULL when absent */
	int npk;
	const char *pk[INDEX_MAX_KEYS];   /* quoted */
	const char *pkeq[INDEX_MAX_KEYS]; /* OPERATOR(schema.=) of the key's btree opfamily */
	/* claim's result: each part's position among the table's live columns (0: absent) */
	int pos[NUM_TASK_COLS];
	int pkpos[INDEX_MAX_KEYS];
	const char *attempt_max; /* the attempt column's type's maximum, a literal */
} SqlParts;

/* claim/table.c: the convention */
extern const TaskColSpec fl_task_cols[NUM_TASK_COLS];
extern void fl_task_check_relation(Oid relid);
extern Form_pg_attribute fl_task_find_column(Relation rel, const char *name);
extern void fl_task_check_columns(Relation rel, const char *const names[NUM_TASK_COLS],
								  bool find_optional, TaskMap *map);
extern void fl_task_refuse_inheritance_children(Oid relid);

/* claim/table.c: the triggers */
extern bool fl_task_has_wake_trigger(Relation rel);
extern List *fl_task_require_fence_triggers(Relation rel, const char *fence_col, LOCKMODE lockmode);

/* claim/table.c: the table's row in fencelock.task_tables */
extern Oid fl_task_tables_oid(void);
extern bool fl_task_read_map(Oid relid, TaskMap *map, Oid *claim_index);
extern void fl_task_write_map(Oid relid, const TaskMap *map, Oid claim_index, const Datum *policy);
extern void fl_task_tables_dropped(void);

/* claim/sql.c: the statements' text */
extern const char *fl_task_key_equality(Oid opfamily, Oid opcintype);
extern void fl_task_build_sql(const SqlParts *p, char *sql[NUM_TASK_STMTS]);

/* claim/cache.c: the table's entry, its statements and their results */
extern TaskTable *fl_task_table(Oid relid);
extern uint64 fl_task_run(TaskTable *tt, TaskStmt stmt, int nargs, const Oid *argtypes,
						  Datum *values, const char *nulls);
extern void fl_task_check_result_relation(TaskTable *tt, Oid tableoid);
extern void fl_task_check_result_column(TaskTable *tt, TupleDesc desc, int col, Oid typid,
										int32 typmod);
extern void fl_task_check_result_relations(TaskTable *tt);

/* The task table named by a regclass argument (every SQL function but claim takes one). */
static inline TaskTable *
fl_task_arg_table(FunctionCallInfo fcinfo, int argno)
{
	Oid relid;

	fl_arg_not_null(fcinfo, argno, "tbl", "Pass the task table, e.g. 'jobs'.");
	relid = PG_GETARG_OID(argno);
	fl_task_check_relation(relid);
	return fl_task_table(relid);
}

#endif /* FENCELOCK_CLAIM_H */
