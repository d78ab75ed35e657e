/*
 * fence/inhguard.h — the inheritance guard's checks (fence/inhguard.c), called by the DDL event
 * trigger (src/ddl.c).
 */
#ifndef FENCELOCK_INHGUARD_H
#define FENCELOCK_INHGUARD_H

#include "postgres.h"

/* ddl_command_end: what each command did to a fence trigger or to inheritance */
extern void fl_inh_commands_end(void);
/* sql_drop: the tables whose fence triggers the command dropped */
extern void fl_inh_dropped(void);

#endif /* FENCELOCK_INHGUARD_H */
