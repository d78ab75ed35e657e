/*
 * chaos.c — fencelock chaos harness: options, the workers' lifecycle and the freezes.
 *
 * The parent forks the workers, then only answers their "about to write" handshakes and freezes
 * them: at the handshake (SIGSTOP for longer than the TTL, so the write surely lands after the
 * lease ran out) and at random moments (any phase: inside acquire, holding the business row
 * lock, before release).  It never blocks on a worker.  At the deadline it stops freezing, lets
 * the freezes in progress end, waits for the workers to finish their round, thaws and kills
 * stragglers, reaps them all, and audits.
 */
#include "chaos.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct Slot
{
	pid_t pid;
	int reply_fd; /* parent -> worker: one byte per handshake */
	bool alive;
	bool frozen;
	int64_t thaw_at;
} Slot;

typedef struct Parent
{
	const ChaosOptions *opt;
	RunFigures *fig;
	Slot slots[CHAOS_MAX_WORKERS];
	int alive;
	int ready_fd; /* workers -> parent: ChaosMsg */
	uint64_t rng;
	int64_t started;
	int64_t deadline;
	bool ending;
	int64_t kill_at;
	int64_t next_random_stop;
} Parent;

static volatile sig_atomic_t interrupted = 0;

static void
on_interrupt(int signo)
{
	(void) signo;
	interrupted++;
}

static void usage(FILE *out) __attribute__((noreturn));

static void
usage(FILE *out)
{
	fprintf(
		out,
		"Usage: chaos [options]\n"
		"Workers take short fencelock leases, get frozen (SIGSTOP) past them, write with\n"
		"their fence, and the run is audited at the end.  Exit 0 only if it passes.\n\n"
		"  -m MODE      workload: exclusive (acquire; the default), shared (readers\n"
		"               acquire_shared, writers acquire) or permit (acquire_permit)\n"
		"  -P K         permit: permits per resource (default 2)\n"
		"  -W PCT       shared: share of rounds that are writers (default 25)\n"
		"  -d CONNINFO  connection string or URI (default: the libpq environment)\n"
		"  -w N         worker processes (default 6, at most %d)\n"
		"  -r N         resources (default 3)\n"
		"  -s SECONDS   duration (default 20)\n"
		"  -t MS        lease TTL in milliseconds (default 300)\n"
		"  -S SEED      random seed (default: from the clock; printed at start)\n"
		"  -p PCT       share of writes frozen past the lease at the handshake (default 20)\n"
		"  -a MS        mean gap between freezes at random moments (default: the TTL; 0: none)\n"
		"  -z           pass even if no stale write was rejected\n"
		"  -k           keep the workers' logs\n"
		"  -v           print every freeze\n",
		CHAOS_MAX_WORKERS);
	exit(out == stdout ? 0 : 2);
}

static int
parse_int(const char *arg, int lo, int hi, char flag)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno != 0 || end == arg || *end != '\0' || v < lo || v > hi)
	{
		fprintf(stderr, "chaos: -%c must be an integer from %d to %d, not \"%s\"\n", flag, lo, hi,
				arg);
		exit(2);
	}
	return (int) v;
}

static void
parse_options(int argc, char **argv, ChaosOptions *opt)
{
	bool seeded = false;
	bool random_stop_set = false;
	int c;

	memset(opt, 0, sizeof(*opt));
	opt->workers = 6;
	opt->resources = 3;
	opt->seconds = 20;
	opt->ttl_ms = 300;
	opt->stall_pct = 20;
	opt->mode = MODE_EXCLUSIVE;
	opt->permits = 2;
	opt->writer_pct = 25;
	while ((c = getopt(argc, argv, "m:P:W:d:w:r:s:t:S:p:a:zkvh")) != -1)
	{
		switch (c)
		{
			case 'm':
				if (strcmp(optarg, "exclusive") == 0)
					opt->mode = MODE_EXCLUSIVE;
				else if (strcmp(optarg, "shared") == 0)
					opt->mode = MODE_SHARED;
				else if (strcmp(optarg, "permit") == 0)
					opt->mode = MODE_PERMIT;
				else
				{
					fprintf(stderr, "chaos: -m must be exclusive, shared or permit, not \"%s\"\n",
							optarg);
					exit(2);
				}
				break;
			case 'P':
				opt->permits = parse_int(optarg, 1, 1000, c);
				break;
			case 'W':
				opt->writer_pct = parse_int(optarg, 0, 100, c);
				break;
			case 'd':
				opt->conninfo = optarg;
				break;
			case 'w':
				opt->workers = parse_int(optarg, 1, CHAOS_MAX_WORKERS, c);
				break;
			case 'r':
				opt->resources = parse_int(optarg, 1, CHAOS_MAX_RESOURCES, c);
				break;
			case 's':
				opt->seconds = parse_int(optarg, 1, 7 * 24 * 3600, c);
				break;
			case 't':
				opt->ttl_ms = parse_int(optarg, 10, 600000, c);
				break;
			case 'S':
			{
				char *end;

				errno = 0;
				opt->seed = strtoull(optarg, &end, 0);
				if (errno != 0 || end == optarg || *end != '\0')
				{
					fprintf(stderr, "chaos: -S must be an unsigned integer, not \"%s\"\n", optarg);
					exit(2);
				}
				seeded = true;
			}
			break;
			case 'p':
				opt->stall_pct = parse_int(optarg, 0, 100, c);
				break;
			case 'a':
				opt->random_stop_ms = parse_int(optarg, 0, 3600000, c);
				random_stop_set = true;
				break;
			case 'z':
				opt->allow_no_stale = true;
				break;
			case 'k':
				opt->keep_logs = true;
				break;
			case 'v':
				opt->verbose = true;
				break;
			case 'h':
				usage(stdout);
			default:
				usage(stderr);
		}
	}
	if (optind < argc)
		usage(stderr);
	if (!random_stop_set)
		opt->random_stop_ms = opt->ttl_ms;
	if (!seeded)
	{
		uint64_t s = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32) ^ (uint64_t) now_us();

		opt->seed = rng_next(&s) % UINT64_C(1000000000000);
	}
}

/* SIGSTOP worker I until NOW + DUR (or later, if it is already frozen longer). */
static bool
freeze(Parent *p, int i, int64_t dur, int64_t now, const char *why)
{
	Slot *s = &p->slots[i];

	if (!s->alive || kill(s->pid, SIGSTOP) != 0)
		return false;
	if (p->opt->verbose)
		fprintf(stderr, "%8.3f s  freeze w%d for %lld ms %s\n", (double) (now - p->started) / 1e6,
				i, (long long) (dur / 1000), why);
	if (!s->frozen || s->thaw_at < now + dur)
		s->thaw_at = now + dur;
	s->frozen = true;
	return true;
}

static void
thaw(Parent *p, int64_t now, bool all)
{
	int i;

	for (i = 0; i < p->opt->workers; i++)
	{
		Slot *s = &p->slots[i];

		if (s->alive && s->frozen && (all || s->thaw_at <= now))
		{
			kill(s->pid, SIGCONT);
			s->frozen = false;
		}
	}
}

static void
reap(Parent *p, bool block)
{
	pid_t pid;
	int status;
	int i;

	while (p->alive > 0 && (pid = waitpid(-1, &status, block ? 0 : WNOHANG)) > 0)
	{
		for (i = 0; i < p->opt->workers; i++)
			if (p->slots[i].alive && p->slots[i].pid == pid)
				break;
		if (i == p->opt->workers)
			continue;
		p->slots[i].alive = false;
		p->alive--;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		p->fig->workers_failed++;
		if (WIFEXITED(status))
			chaos_warn("chaos: worker w%d exited with status %d", i, WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			chaos_warn("chaos: worker w%d was killed by signal %d", i, WTERMSIG(status));
	}
}

/* A worker is about to write: let it go, or freeze it for longer than its lease first. */
static void
answer(Parent *p, int i, int64_t now)
{
	int64_t ttl_us = (int64_t) p->opt->ttl_ms * 1000;
	char reply = REPLY_GO;

	if (!p->ending && rng_range(&p->rng, 0, 99) < p->opt->stall_pct &&
		freeze(p, i, rng_range(&p->rng, ttl_us * 11 / 10 + 10000, ttl_us * 5 / 2 + 10000), now,
			   "at write"))
	{
		/*
		 * The SIGSTOP is pending before the reply is written, and a process does not return to
		 * user space with a stop pending: the worker reads this byte only after it was thawed.
		 */
		reply = REPLY_FROZEN;
		p->fig->frozen_at_write++;
	}
	if (write(p->slots[i].reply_fd, &reply, 1) != 1 && p->opt->verbose)
		chaos_warn("chaos: cannot answer w%d: %s", i, strerror(errno));
}

/* Freeze a random running worker for 0.2 to 2.5 TTLs, whatever it is doing. */
static void
random_stop(Parent *p, int64_t now)
{
	const ChaosOptions *opt = p->opt;
	int64_t ttl_us = (int64_t) opt->ttl_ms * 1000;
	int start = (int) rng_range(&p->rng, 0, opt->workers - 1);
	int k;

	for (k = 0; k < opt->workers; k++)
	{
		int i = (start + k) % opt->workers;

		if (p->slots[i].alive && !p->slots[i].frozen)
		{
			if (freeze(p, i, rng_range(&p->rng, ttl_us / 5, ttl_us * 5 / 2), now, "at random"))
				p->fig->frozen_at_random++;
			break;
		}
	}
	p->next_random_stop = now + rng_range(&p->rng, 0, (int64_t) opt->random_stop_ms * 2000);
}

static void
read_messages(Parent *p, int64_t now)
{
	ChaosMsg msgs[64];
	ssize_t n;
	int k;

	n = read(p->ready_fd, msgs, sizeof(msgs));
	if (n <= 0)
		return;
	/* Each message is written atomically, so reads come in whole messages. */
	for (k = 0; k < (int) (n / (ssize_t) sizeof(ChaosMsg)); k++)
		if (msgs[k].kind == MSG_ABOUT_TO_WRITE && msgs[k].worker >= 0 &&
			msgs[k].worker < p->opt->workers)
			answer(p, msgs[k].worker, now);
}

/*
 * Enter the end phase: no new freezes; the workers finish their round and exit by themselves
 * within a grace period.  When interrupted, thaw them now and ask them to stop.
 */
static void
begin_ending(Parent *p, int64_t now)
{
	int i;

	p->ending = true;
	p->kill_at = now + 10000000 + (int64_t) p->opt->ttl_ms * 5000;
	if (!interrupted)
		return; /* freezes in progress run their course: each still straddles its lease */
	thaw(p, now, true);
	for (i = 0; i < p->opt->workers; i++)
		if (p->slots[i].alive)
			kill(p->slots[i].pid, SIGTERM);
}

static void
kill_stragglers(Parent *p)
{
	int i;

	for (i = 0; i < p->opt->workers; i++)
	{
		Slot *s = &p->slots[i];

		if (!s->alive)
			continue;
		chaos_warn("chaos: worker w%d did not stop in time; killing it", i);
		kill(s->pid, SIGCONT);
		kill(s->pid, SIGKILL);
	}
	reap(p, true);
}

static int
poll_timeout_ms(const Parent *p, int64_t now)
{
	int64_t next = now + 50000; /* reap at least every 50 ms */
	int i;

	for (i = 0; i < p->opt->workers; i++)
		if (p->slots[i].alive && p->slots[i].frozen && p->slots[i].thaw_at < next)
			next = p->slots[i].thaw_at;
	if (!p->ending)
	{
		if (p->deadline < next)
			next = p->deadline;
		if (p->opt->random_stop_ms > 0 && p->next_random_stop < next)
			next = p->next_random_stop;
	}
	else if (p->kill_at < next)
		next = p->kill_at;
	return next <= now ? 0 : (int) ((next - now + 999) / 1000);
}

static void
parent_loop(Parent *p)
{
	struct pollfd pfd;

	pfd.fd = p->ready_fd;
	pfd.events = POLLIN;
	for (;;)
	{
		int64_t now = now_us();

		thaw(p, now, false);
		reap(p, false);
		if (p->alive == 0)
			return;
		if (!p->ending && (now >= p->deadline || interrupted))
			begin_ending(p, now);
		if (p->ending && (now >= p->kill_at || interrupted > 1))
		{
			kill_stragglers(p);
			return;
		}
		if (!p->ending && p->opt->random_stop_ms > 0 && now >= p->next_random_stop)
			random_stop(p, now);

		pfd.revents = 0;
		if (poll(&pfd, 1, poll_timeout_ms(p, now)) > 0 && (pfd.revents & POLLIN))
			read_messages(p, now_us());
	}
}

static void
parent_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Fork the workers and run them to the end.  Returns false if they could not be started. */
static bool
run_workers(const ChaosOptions *opt, RunFigures *fig)
{
	static Parent p;
	int ready[2];
	int reply[CHAOS_MAX_WORKERS][2];
	int64_t started = now_us();
	int i;
	int j;

	memset(&p, 0, sizeof(p));
	p.opt = opt;
	p.fig = fig;
	p.rng = opt->seed;
	p.started = started;
	p.deadline = started + (int64_t) opt->seconds * 1000000;
	p.next_random_stop = started + rng_range(&p.rng, 0, (int64_t) opt->random_stop_ms * 2000);
	if (pipe(ready) != 0)
	{
		chaos_warn("chaos: pipe: %s", strerror(errno));
		return false;
	}
	for (i = 0; i < opt->workers; i++)
		if (pipe(reply[i]) != 0)
		{
			chaos_warn("chaos: pipe: %s", strerror(errno));
			return false;
		}

	fflush(NULL);
	for (i = 0; i < opt->workers; i++)
	{
		pid_t pid = fork();

		if (pid < 0)
		{
			chaos_warn("chaos: fork: %s", strerror(errno));
			interrupted = 1; /* end the ones already started */
			break;
		}
		if (pid == 0)
		{
			close(ready[0]);
			for (j = 0; j < opt->workers; j++)
			{
				close(reply[j][1]);
				if (j != i)
					close(reply[j][0]);
			}
			worker_main(opt, i, ready[1], reply[i][0], p.deadline);
		}
		p.slots[i].pid = pid;
		p.slots[i].alive = true;
		p.slots[i].reply_fd = reply[i][1];
		p.alive++;
	}
	close(ready[1]);
	for (j = 0; j < opt->workers; j++)
		close(reply[j][0]);
	p.ready_fd = ready[0];

	parent_loop(&p);

	close(ready[0]);
	for (j = 0; j < opt->workers; j++)
		close(reply[j][1]);
	fig->elapsed_s = (double) (now_us() - started) / 1e6;
	return i == opt->workers && !interrupted;
}

static void
remove_logs(const ChaosOptions *opt)
{
	char path[512];
	int i;

	for (i = 0; i < opt->workers; i++)
	{
		snprintf(path, sizeof(path), "%s/w%d.log", opt->logdir, i);
		unlink(path);
	}
	rmdir(opt->logdir);
}

int
main(int argc, char **argv)
{
	ChaosOptions opt;
	RunFigures fig;
	PGconn *conn;
	const char *tmp = getenv("TMPDIR");
	int rc;

	parse_options(argc, argv, &opt);
	memset(&fig, 0, sizeof(fig));
	printf(
		"fencelock chaos: %s workload, seed %llu (rerun with -S %llu), %d workers, %d resources, "
		"%d s, ttl %d ms, %d%% frozen at write, random freeze every ~%d ms",
		mode_name(opt.mode), (unsigned long long) opt.seed, (unsigned long long) opt.seed,
		opt.workers, opt.resources, opt.seconds, opt.ttl_ms, opt.stall_pct, opt.random_stop_ms);
	if (opt.mode == MODE_SHARED)
		printf(", %d%% writers", opt.writer_pct);
	else if (opt.mode == MODE_PERMIT)
		printf(", %d permits", opt.permits);
	printf("\n");

	conn = chaos_connect(opt.conninfo, "fencelock-chaos");
	if (conn == NULL || !setup_schema(conn, &opt))
		return 2;
	PQfinish(conn); /* a forked child must not share this connection */

	snprintf(opt.logdir, sizeof(opt.logdir), "%s/fencelock-chaos.XXXXXX",
			 tmp && tmp[0] ? tmp : "/tmp");
	if (mkdtemp(opt.logdir) == NULL)
	{
		chaos_warn("chaos: cannot create a directory for the logs: %s", strerror(errno));
		return 2;
	}

	parent_signals();
	fig.cut_short = !run_workers(&opt, &fig);
	if (fig.cut_short)
		chaos_warn("chaos: the run was cut short");

	conn = chaos_connect(opt.conninfo, "fencelock-chaos-audit");
	if (conn == NULL || !load_worker_logs(conn, &opt, &fig))
	{
		chaos_warn("chaos: workers' logs kept in %s", opt.logdir);
		return 2;
	}
	rc = audit_and_report(conn, &opt, &fig);
	PQfinish(conn);
	if (opt.keep_logs || rc != 0)
		printf("workers' logs: %s\n", opt.logdir);
	else
		remove_logs(&opt);
	return rc;
}
