/*
 * base/monotonic.h — the monotonic clock, for measuring how long something lasts: a wait's
 * deadline, a recheck timer, the lease clock's anchor (store/clock.c).  PostgreSQL's instr_time
 * reads CLOCK_MONOTONIC (on macOS CLOCK_MONOTONIC_RAW), which a step of the wall clock (an NTP
 * step, date -s) does not move.  Never a moment of the calendar: only differences mean anything.
 */
#ifndef FENCELOCK_MONOTONIC_H
#define FENCELOCK_MONOTONIC_H

#include "postgres.h"

#include "portability/instr_time.h"

/* Microseconds on the monotonic clock (since an unspecified start, the same for every process). */
static inline int64
fl_mono_us(void)
{
	instr_time t;

	INSTR_TIME_SET_CURRENT(t);
	return (int64) INSTR_TIME_GET_MICROSEC(t);
}

#endif /* FENCELOCK_MONOTONIC_H */
