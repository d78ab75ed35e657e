/*
 * flrun_proc.c
 *		Signals, the supervised command, and bounded waiting.
 *
 * Signal handlers only write the signal number into a non-blocking pipe
 * (the self-pipe trick).  Every wait in the program goes through
 * flrun_wait(), which polls that pipe next to the libpq socket, so that a
 * signal or the command's exit is acted upon at once and no wait outlasts
 * the deadline it was given.
 *
 * The command runs in its own process group, so that it can be stopped
 * together with whatever it started.  Terminal signals reach fencelock-run
 * (still in the terminal's foreground group) and are forwarded to that
 * process group.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "flrun.h"

/* Signals passed on to the command; while none runs, the first four stop us. */
static const int forwarded_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

#define NFORWARDED (sizeof(forwarded_signals) / sizeof(forwarded_signals[0]))

static int sig_pipe[2] = {-1, -1};
static bool sig_handled[NFORWARDED];
static sigset_t original_mask;

static pid_t child_pid = 0; /* also its process group */
static bool child_reaped = false;
static bool child_acknowledged = false;
static int child_status = 0;
static int stop_signal = 0;
static bool stop_interrupts = true;

/* "SIGTERM" rather than strsignal's "Terminated", for the trace */
static const char *
signal_name(int signo)
{
	switch (signo)
	{
		case SIGHUP:
			return "SIGHUP";
		case SIGINT:
			return "SIGINT";
		case SIGQUIT:
			return "SIGQUIT";
		case SIGTERM:
			return "SIGTERM";
		case SIGUSR1:
			return "SIGUSR1";
		case SIGUSR2:
			return "SIGUSR2";
		case SIGKILL:
			return "SIGKILL";
	}
	return strsignal(signo);
}

static void
on_signal(int signo)
{
	int save_errno = errno;
	unsigned char b = (unsigned char) signo;
	ssize_t rc;

	rc = write(sig_pipe[1], &b, 1);
	(void) rc; /* a full pipe already wakes the loop */
	errno = save_errno;
}

static bool
set_pipe_flags(int fd)
{
	return fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 &&
		   fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0;
}

/*
 * Install the handlers.  A forwarded signal that was ignored when we
 * started (nohup, a shell's background job) stays ignored, for us and for
 * the command, as a shell would leave it.
 */
bool
flrun_signals_init(void)
{
	struct sigaction sa;
	sigset_t chld;
	size_t i;

	if (pipe(sig_pipe) != 0 || !set_pipe_flags(sig_pipe[0]) || !set_pipe_flags(sig_pipe[1]))
	{
		flrun_error("cannot create a pipe: %s", strerror(errno));
		return false;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < NFORWARDED; i++)
	{
		struct sigaction old;

		sigaction(forwarded_signals[i], NULL, &old);
		if (old.sa_handler == SIG_IGN)
			continue;
		sigaction(forwarded_signals[i], &sa, NULL);
		sig_handled[i] = true;
	}
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);

	/* we must hear of the command's exit even if our parent blocked it */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &chld, &original_mask);
	return true;
}

static void
trace_exit(int status)
{
	if (WIFSIGNALED(status))
		flrun_trace("command exited on signal %d (%s)", WTERMSIG(status),
					signal_name(WTERMSIG(status)));
	else
		flrun_trace("command exited with status %d", WEXITSTATUS(status));
}

static void
reap_child(void)
{
	int status;
	pid_t r;

	if (child_pid <= 0 || child_reaped)
		return;
	do
		r = waitpid(child_pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == child_pid)
	{
		child_reaped = true;
		child_status = status;
		trace_exit(status);
	}
	else if (r < 0)
	{
		flrun_error("cannot wait for the command: %s", strerror(errno));
		child_reaped = true;
		child_status = FLRUN_EXIT_OSERR << 8;
	}
}

static void
handle_signal(int signo)
{
	if (signo == SIGCHLD)
		return;
	if (child_pid > 0 && !child_reaped)
	{
		flrun_trace("forwarding %s to the command", signal_name(signo));
		kill(-child_pid, signo);
	}
	else if (signo != SIGUSR1 && signo != SIGUSR2 && stop_signal == 0)
	{
		flrun_trace("got %s: stopping", signal_name(signo));
		stop_signal = signo;
	}
}

static void
drain_signals(void)
{
	unsigned char buf[64];
	ssize_t n;
	ssize_t i;

	while ((n = read(sig_pipe[0], buf, sizeof(buf))) > 0)
		for (i = 0; i < n; i++)
			handle_signal(buf[i]);
	reap_child();
}

/*
 * A wait ends early when a stop signal arrived while no command runs (unless
 * turned off), or when the command has exited and the main loop has not yet
 * seen it.
 */
static bool
interrupted(void)
{
	return (stop_signal != 0 && stop_interrupts) ||
		   (child_pid > 0 && child_reaped && !child_acknowledged);
}

/*
 * Wait until sock (when >= 0) is ready for reading and/or writing, the
 * deadline passes, or the wait is interrupted (see above).  Signals are
 * handled in the meantime.
 */
FlWait
flrun_wait(int sock, bool for_read, bool for_write, msec_t deadline)
{
	for (;;)
	{
		struct pollfd pfd[2];
		nfds_t nfds = 1;
		msec_t now;
		int timeout;
		int rc;

		drain_signals();
		if (interrupted())
			return FL_WAIT_INTERRUPTED;
		now = flrun_now();
		if (now >= deadline)
			return FL_WAIT_TIMEOUT;
		timeout =
			deadline == FLRUN_FOREVER ? -1 : (int) flrun_min(deadline - now, 24 * 3600 * 1000);

		pfd[0].fd = sig_pipe[0];
		pfd[0].events = POLLIN;
		pfd[0].revents = 0;
		if (sock >= 0)
		{
			pfd[1].fd = sock;
			pfd[1].events = (for_read ? POLLIN : 0) | (for_write ? POLLOUT : 0);
			pfd[1].revents = 0;
			nfds = 2;
		}
		rc = poll(pfd, nfds, timeout);
		if (rc < 0 && errno != EINTR)
		{
			flrun_error("poll failed: %s", strerror(errno));
			return FL_WAIT_TIMEOUT;
		}
		if (rc > 0 && nfds == 2 && pfd[1].revents != 0)
		{
			drain_signals();
			return interrupted() ? FL_WAIT_INTERRUPTED : FL_WAIT_READY;
		}
	}
}

/*
 * Whether a stop signal ends waits.  Off while a call whose outcome matters
 * (acquire, release) is in flight: those are bounded anyway.
 */
void
flrun_stop_interrupts(bool on)
{
	stop_interrupts = on;
}

/* The first stop signal received while no command ran, else 0. */
int
flrun_stop_signal(void)
{
	return stop_signal;
}

/* In the child: put back what the command should inherit, then exec. */
static void
exec_command(char **argv, pid_t parent)
{
	int save_errno;
	size_t i;

	setpgid(0, 0);
	for (i = 0; i < NFORWARDED; i++)
		if (sig_handled[i])
			signal(forwarded_signals[i], SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_SETMASK, &original_mask, NULL);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
#ifdef __linux__

	/*
	 * If fencelock-run dies without stopping us (SIGKILL, OOM), nobody renews
	 * the lease: have the kernel send SIGTERM.
	 */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(FLRUN_EXIT_LOST);
#else
	(void) parent;
#endif
	execvp(argv[0], argv);
	save_errno = errno;
	fprintf(stderr, "fencelock-run: cannot run \"%s\": %s\n", argv[0], strerror(save_errno));
	_exit(save_errno == ENOENT ? FLRUN_EXIT_NOTFOUND : FLRUN_EXIT_NOEXEC);
}

/* Start argv in a new process group. */
bool
flrun_spawn(char **argv, pid_t *child)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
	{
		flrun_error("cannot fork: %s", strerror(errno));
		return false;
	}
	if (pid == 0)
		exec_command(argv, parent);

	/* also here, so that no signal can be forwarded before it is done */
	setpgid(pid, pid);
	child_pid = pid;
	*child = pid;
	return true;
}

/* Has the command exited?  Marks its exit as seen by the main loop. */
bool
flrun_child_done(int *status)
{
	drain_signals();
	if (child_pid <= 0 || !child_reaped)
		return false;
	child_acknowledged = true;
	*status = child_status;
	return true;
}

static bool
group_alive(void)
{
	return kill(-child_pid, 0) == 0 || errno == EPERM;
}

/*
 * Stop the command's process group: SIGTERM (and SIGCONT, in case it is
 * stopped), then SIGKILL to whatever is left once the grace period is over.
 * Returns when the command itself has been reaped.
 */
void
flrun_stop_child(msec_t grace)
{
	msec_t deadline = flrun_now() + grace;

	if (child_pid <= 0)
		return;
	flrun_trace("sending SIGTERM to the command's process group %ld", (long) child_pid);
	kill(-child_pid, SIGTERM);
	kill(-child_pid, SIGCONT);

	while (flrun_now() < deadline)
	{
		if (!child_reaped)
		{
			if (flrun_wait(-1, false, false, deadline) == FL_WAIT_INTERRUPTED && !child_reaped)
				poll(NULL, 0, 50); /* a stop signal: nothing to do */
			child_acknowledged = child_reaped;
		}
		else if (!group_alive())
			return;
		else
			poll(NULL, 0, (int) flrun_min(50, deadline - flrun_now()));
	}
	if (group_alive())
	{
		flrun_trace("grace period over: sending SIGKILL to process group %ld", (long) child_pid);
		kill(-child_pid, SIGKILL);
	}
	while (!child_reaped)
	{
		int status;
		pid_t r = waitpid(child_pid, &status, 0);

		if (r == child_pid)
		{
			child_reaped = true;
			child_status = status;
			trace_exit(status);
		}
		else if (r < 0 && errno != EINTR)
			break;
	}
	child_acknowledged = true;
}

/* The exit code that reports a wait status: N, or 128+N for signal N. */
int
flrun_status_to_exit(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return FLRUN_EXIT_OSERR;
}
