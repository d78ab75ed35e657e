/*
 * flrun_util.c
 *		Messages, clocks, durations and randomness for fencelock-run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/random.h>
#endif

#include "flrun.h"

bool flrun_verbose = false;

/* Durations above this are refused (a year is no lease length). */
#define FLRUN_MAX_DURATION ((msec_t) 366 * 24 * 3600 * 1000)

static void flrun_vmessage(const char *fmt, va_list ap) FLRUN_PRINTF(1, 0);

static void
flrun_vmessage(const char *fmt, va_list ap)
{
	char buf[4096];
	size_t len;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* libpq messages end in a newline; print exactly one */
	len = strlen(buf);
	while (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	fprintf(stderr, "fencelock-run: %s\n", buf);
	fflush(stderr);
}

/* An error or warning: always printed on stderr. */
void
flrun_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	flrun_vmessage(fmt, ap);
	va_end(ap);
}

/* A lease event: printed on stderr with -v only. */
void
flrun_trace(const char *fmt, ...)
{
	va_list ap;

	if (!flrun_verbose)
		return;
	va_start(ap, fmt);
	flrun_vmessage(fmt, ap);
	va_end(ap);
}

msec_t
flrun_min(msec_t a, msec_t b)
{
	return a < b ? a : b;
}

msec_t
flrun_max(msec_t a, msec_t b)
{
	return a > b ? a : b;
}

/*
 * The clock that lease deadlines are measured on.  It never jumps with the
 * wall clock.  CLOCK_BOOTTIME is CLOCK_MONOTONIC plus the time the machine
 * was suspended; the server's lease keeps ageing during a suspend, so the
 * local deadline must too.
 */
msec_t
flrun_now(void)
{
	struct timespec ts;

#ifdef CLOCK_BOOTTIME
	if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
		return (msec_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
#endif
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
	{
		flrun_error("cannot read the monotonic clock: %s", strerror(errno));
		exit(FLRUN_EXIT_OSERR);
	}
	return (msec_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds since the Unix epoch, for FENCELOCK_EXPIRES only. */
msec_t
flrun_wallclock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (msec_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static msec_t
duration_unit(const char *unit)
{
	if (strcmp(unit, "") == 0 || strcmp(unit, "s") == 0)
		return 1000;
	if (strcmp(unit, "ms") == 0)
		return 1;
	if (strcmp(unit, "m") == 0)
		return 60 * 1000;
	if (strcmp(unit, "h") == 0)
		return 3600 * 1000;
	return 0;
}

/*
 * Parse DIGITS[.DIGITS][UNIT] where UNIT is ms, s, m or h and no unit means
 * seconds: 30s, 500ms, 2m, 1h, 1.5s, 10.  Nothing else is accepted: no sign,
 * no spaces, no exponent.  The result is rounded to the nearest millisecond.
 */
bool
flrun_parse_duration(const char *text, msec_t *result)
{
	const char *p = text;
	msec_t whole = 0;
	msec_t frac = 0;
	msec_t scale = 1;
	msec_t unit;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++)
	{
		whole = whole * 10 + (*p - '0');
		if (whole > FLRUN_MAX_DURATION)
			return false;
	}
	if (*p == '.')
	{
		p++;
		if (*p < '0' || *p > '9')
			return false;
		for (; *p >= '0' && *p <= '9'; p++)
		{
			/* digits past the ninth cannot matter for milliseconds */
			if (scale < 1000000000)
			{
				frac = frac * 10 + (*p - '0');
				scale *= 10;
			}
		}
	}
	unit = duration_unit(p);
	if (unit == 0 || whole > FLRUN_MAX_DURATION / unit)
		return false;
	*result = whole * unit + (frac * unit + scale / 2) / scale;
	return *result <= FLRUN_MAX_DURATION;
}

/* "500ms", "30s", "1.250s": for messages. */
const char *
flrun_format_duration(msec_t ms, char *buf, size_t len)
{
	if (ms < 1000)
		snprintf(buf, len, "%lldms", (long long) ms);
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%llds", (long long) (ms / 1000));
	else
		snprintf(buf, len, "%lld.%03llds", (long long) (ms / 1000), (long long) (ms % 1000));
	return buf;
}

/* Fill buf from the kernel's random source: getrandom(2) or /dev/urandom. */
bool
flrun_random_bytes(unsigned char *buf, size_t len)
{
	size_t done = 0;
	int fd;

#ifdef __linux__
	while (done < len)
	{
		ssize_t n = getrandom(buf + done, len - done, 0);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			break; /* ENOSYS and friends: use the device */
		}
		done += (size_t) n;
	}
	if (done == len)
		return true;
#endif
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while (done < len)
	{
		ssize_t n = read(fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
		{
			close(fd);
			return false;
		}
		done += (size_t) n;
	}
	close(fd);
	return true;
}

/*
 * A delay in [base/2, base], so that many waiters polling one resource
 * spread out (xorshift64*, seeded once from the random source; this is
 * for spreading load, not for secrets).
 */
msec_t
flrun_jitter(msec_t base)
{
	static uint64_t state = 0;
	uint64_t r;

	if (base < 2)
		return base;
	if (state == 0)
	{
		if (!flrun_random_bytes((unsigned char *) &state, sizeof(state)) || state == 0)
			state = (uint64_t) flrun_now() * 2654435761u + (uint64_t) getpid();
		if (state == 0)
			state = 1;
	}
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	r = state * UINT64_C(2685821657736338717);
	return base / 2 + (msec_t) (r % (uint64_t) (base / 2 + 1));
}

/*
 * HOST:PID:HEX, HEX being 16 random bytes: unique per run, and tells an
 * operator looking at fencelock.leases where the holder runs.
 */
char *
flrun_default_owner(void)
{
	char host[65];
	unsigned char rnd[16];
	char hex[sizeof(rnd) * 2 + 1];
	char *owner;
	size_t i;

	if (!flrun_random_bytes(rnd, sizeof(rnd)))
		return NULL;
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	owner = malloc(sizeof(host) + sizeof(hex) + 24);
	if (owner == NULL)
		return NULL;
	sprintf(owner, "%s:%ld:%s", host, (long) getpid(), hex);
	return owner;
}
