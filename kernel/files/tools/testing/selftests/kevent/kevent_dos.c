// SPDX-License-Identifier: GPL-2.0
/*
 * kevent_dos: what an unprivileged user can do to the rest of the machine with kevent
 * (issue 20 findings 3-7). Each attack runs as uid 65534 (setuid after setup, the program
 * itself runs as root) until a limit stops it, then keeps what it got alive while a victim
 * process (root) measures its own latencies:
 *
 *   timers   periodic 100 us TIMER kevents in as many queues as allowed, never consumed
 *   sigchld  SIGCHLD kevents (the duplicates of finding 4 refused) in as many queues as
 *            allowed, then fork/exit churn
 *   inode    INODE kevents on one shared directory (/tmp), then create/unlink churn there
 *   ready    a kevent_ctl(READY) of 2^31 - 1 read-only zero-page entries naming one key
 *            (SOCKET 0, the key of an all-zero ukevent);
 *            SIGKILLed, it must be dead within 1 s
 *   pipe     PIPE kevents on one pipe through as many fds and queues as allowed, then
 *            write/read churn on it
 *
 * The victim measures fork+exit+wait, the lateness of nanosleep(1 ms) and create+unlink of
 * a file in /tmp (percentiles in microseconds), without and with each attack. Only
 * correctness is asserted (TAP): the attack is stopped by the documented errno (ENOSPC from
 * max_user_kevents, EMFILE from max_user_queues or RLIMIT_NOFILE, EINVAL/EEXIST for
 * refused keys), and the killed READY caller dies in time. The latencies are printed only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "kevent_util.h"

#define SAMPLES 300
/* An attack that has not met a limit after this many kevents is not stopped by one. */
#define ATTACK_CAP (1L << 22)
#define BATCH 1024

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct stats {
	double p50, p99, max;
};

struct victim {
	struct stats fork, sleep, file;
};

static struct stats summarize(double *v, int n)
{
	struct stats s;

	qsort(v, n, sizeof(*v), cmp_double);
	s.p50 = v[n / 2];
	s.p99 = v[(n * 99) / 100];
	s.max = v[n - 1];
	return s;
}

/* The victim's own measurements, in a child (root) so that its process is a fresh one. */
static int victim_measure(struct victim *out)
{
	static double v[SAMPLES];
	struct timespec ms = { 0, 1000000 };
	char path[64];
	int p[2], i, fd;
	pid_t pid;
	double t;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct victim r;

		for (i = 0; i < SAMPLES; i++) {
			pid_t c;

			t = now_us();
			c = fork();
			if (c == 0)
				_exit(0);
			waitpid(c, NULL, 0);
			v[i] = now_us() - t;
		}
		r.fork = summarize(v, SAMPLES);
		for (i = 0; i < SAMPLES; i++) {
			t = now_us();
			nanosleep(&ms, NULL);
			v[i] = now_us() - t - 1000.0;
		}
		r.sleep = summarize(v, SAMPLES);
		snprintf(path, sizeof(path), "/tmp/kevent-dos-victim.%d", getpid());
		for (i = 0; i < SAMPLES; i++) {
			t = now_us();
			fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
			if (fd >= 0)
				close(fd);
			unlink(path);
			v[i] = now_us() - t;
		}
		r.file = summarize(v, SAMPLES);
		if (write(p[1], &r, sizeof(r)) != sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	i = read(p[0], out, sizeof(*out)) == sizeof(*out) ? 0 : -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return i;
}

static void print_stats(const char *attack, const char *what, const struct stats *idle,
			const struct stats *hit)
{
	ksft_print_msg("%s: victim %s us p50/p99/max: %.0f/%.0f/%.0f without, %.0f/%.0f/%.0f with the attack\n",
		       attack, what, idle->p50, idle->p99, idle->max, hit->p50, hit->p99, hit->max);
}

static void print_victim(const char *attack, const struct victim *idle, const struct victim *hit)
{
	print_stats(attack, "fork+exit+wait", &idle->fork, &hit->fork);
	print_stats(attack, "nanosleep(1 ms) lateness", &idle->sleep, &hit->sleep);
	print_stats(attack, "create+unlink in /tmp", &idle->file, &hit->file);
}

/* What an attacker reports once its setup met a limit. */
struct report {
	long kevents;	/* kevents registered */
	long queues;	/* queues made */
	int err;	/* the errno that stopped it (0: none did) */
	int refused;	/* keys refused as they must be (attack-specific), or -1 */
	char what[96];	/* how it was stopped, in words */
};

typedef void (*attack_fn)(struct report *r, int report_fd);

static void send_report(int fd, struct report *r)
{
	if (write(fd, r, sizeof(*r)) != sizeof(*r))
		_exit(3);
	close(fd);
}

static int queues[1 << 16];

/* Queues until kevent_init fails (max_user_queues: EMFILE) or @cap. */
static long make_queues(struct report *r, long cap)
{
	long n = 0;
	int q;

	while (n < cap) {
		q = k_init(NULL, 0, 0);
		if (q < 0) {
			r->err = errno;
			break;
		}
		queues[n++] = q;
	}
	r->queues = n;
	return n;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * ADD of @m entries of @b to queue @q, counted in @r; the first failing entry's errno (or the
 * call's), 0 if all were registered.
 */
static int add_batch(struct report *r, int q, struct ukevent *b, int m)
{
	int i, n = k_ctl(q, KEVENT_CTL_ADD, m, b);

	if (n < 0)
		return errno;
	r->kevents += m - n;
	for (i = 0; i < n; i++)
		if (b[i].ret_flags & KEVENT_RET_BROKEN)
			return -(int)b[i].ret_data[1];
	return 0;
}

/*
 * Adds periodic TIMER kevents to the queues round robin, BATCH entries per call, until an
 * entry fails or ATTACK_CAP; returns the failing entry's errno (0 if none failed).
 */
static int fill_timers(struct report *r, long nq)
{
	static struct ukevent b[BATCH];
	long qi = 0, id = 0;
	int i, err;

	while (r->kevents < ATTACK_CAP) {
		for (i = 0; i < BATCH; i++) {
			/* 100 us to 1.1 ms: distinct periods are distinct keys. */
			b[i] = uk(KEVENT_TIMER, 0, KEVENT_TIMER_FIRED, 0);
			b[i].id.raw[1] = 100000 + (id + i) % 1000000;
		}
		err = add_batch(r, queues[qi], b, BATCH);
		if (err)
			return err;
		id += BATCH;
		qi = (qi + 1) % nq;
	}
	return 0;
}

/* Adds a PIPE kevent for each of @fds to queue @q; the first failing entry's errno, or 0. */
static int fill_pipe(struct report *r, int q, const int *fds, long nfds)
{
	static struct ukevent b[BATCH];
	long done = 0;
	int i, m, err;

	while (done < nfds) {
		m = nfds - done < BATCH ? nfds - done : BATCH;
		for (i = 0; i < m; i++)
			b[i] = uk_fd(KEVENT_PIPE, fds[done + i], KEVENT_SOCKET_RECV);
		err = add_batch(r, q, b, m);
		if (err)
			return err;
		done += m;
	}
	return 0;
}

static void stopped(struct report *r, int err, const char *how)
{
	r->err = err;
	snprintf(r->what, sizeof(r->what), "%s (%s)", how, err ? strerror(err) : "no error");
}

/* Timers: 100 us periodic TIMER kevents (distinct periods, so distinct keys), never read. */
static void attack_timers(struct report *r, int fd)
{
	long nq = make_queues(r, 1 << 16);
	int err;

	if (nq == 0) {
		stopped(r, r->err, "no queue at all");
		send_report(fd, r);
		_exit(0);
	}
	err = fill_timers(r, nq);
	stopped(r, err, err ? "ADD of a TIMER kevent failed" : "cap reached, no limit met");
	send_report(fd, r);
	for (;;)
		pause();
}

/* SIGCHLD: one kevent per queue (the variants refused), then fork/exit churn. */
static void attack_sigchld(struct report *r, int fd)
{
	long nq = make_queues(r, 1 << 16), i;
	int bit, refused = 0, res;

	for (i = 0; i < nq; i++) {
		if (add1(queues[i], uk(KEVENT_SIGNAL, SIGCHLD, KEVENT_SIGNAL_DELIVERY, 0)) == 0)
			r->kevents++;
		res = add1(queues[i], uk(KEVENT_SIGNAL, SIGCHLD | KEVENT_SIGNAL_NOMASK,
					 KEVENT_SIGNAL_DELIVERY, 0));
		refused += res == -EEXIST;
		if (res == 0)
			r->kevents++;
	}
	/* Finding 4: the same signal with id bits 32-62 set. */
	for (bit = 32; bit <= 62 && nq > 0; bit++) {
		res = add1(queues[0], uk(KEVENT_SIGNAL, SIGCHLD | (1ULL << bit),
					 KEVENT_SIGNAL_DELIVERY, 0));
		refused += res == -EINVAL;
		if (res == 0)
			r->kevents++;
	}
	r->refused = refused;
	snprintf(r->what, sizeof(r->what), "%ld queues (%s); %d of %ld duplicate keys refused",
		 nq, strerror(r->err), refused, nq + 31);
	send_report(fd, r);
	for (;;) {
		pid_t c = fork();

		if (c == 0)
			_exit(0);
		if (c > 0)
			waitpid(c, NULL, 0);
	}
}

/* INODE: marks on /tmp, one per queue (a second fd of /tmp: EEXIST), then churn there. */
static void attack_inode(struct report *r, int fd)
{
	long nq = make_queues(r, 1 << 16), i;
	int d1 = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int d2 = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int refused = 0, res, err = 0;
	struct ukevent e = uk_fd(KEVENT_INODE, d1, KEVENT_INODE_CREATE | KEVENT_INODE_REMOVE);
	char path[64];

	for (i = 0; i < nq; i++) {
		res = add1(queues[i], e);
		if (res == 0)
			r->kevents++;
		else if (!err)
			err = -res;
		res = add1(queues[i], uk_fd(KEVENT_INODE, d2, KEVENT_INODE_CREATE));
		refused += res == -EEXIST;
		if (res == 0)
			r->kevents++;
	}
	e.id.raw[1] = 1;
	res = add1(queues[0], e);
	refused += res == -EINVAL;
	r->refused = refused;
	snprintf(r->what, sizeof(r->what),
		 "%ld queues (%s), first ADD error %s; %d of %ld second marks refused",
		 nq, strerror(r->err), err ? strerror(err) : "none", refused, nq + 1);
	send_report(fd, r);
	snprintf(path, sizeof(path), "/tmp/kevent-dos-attacker.%d", getpid());
	for (;;) {
		int f = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

		if (f >= 0)
			close(f);
		unlink(path);
	}
}

/*
 * READY over read-only zero-page entries, each naming the one kevent (zero_key_queue()):
 * 2^31 - 1 of them, and if that is refused at once, the most the kernel may accept (INT_MAX
 * bytes' worth). @ready_phase (shared with the parent, read after the child is dead) says which
 * call was in progress.
 */
static int *ready_phase;

static void attack_ready(struct report *r, int fd)
{
	const unsigned long n = (1UL << 31) - 1, n2 = INT_MAX / sizeof(struct ukevent);
	struct ukevent *arr;
	int q = zero_key_queue(), res;

	arr = mmap(NULL, n * sizeof(*arr), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (q < 0 || arr == MAP_FAILED) {
		stopped(r, errno, "setup failed");
		send_report(fd, r);
		_exit(1);
	}
	r->queues = 1;
	r->kevents = 1;
	snprintf(r->what, sizeof(r->what), "READY over %lu entries in progress", n);
	send_report(fd, r);
	ready_phase[0] = 1;
	res = k_ctl(q, KEVENT_CTL_READY, (unsigned int)n, arr);
	ready_phase[1] = res < 0 ? errno : 0;
	ready_phase[0] = 2;
	res = k_ctl(q, KEVENT_CTL_READY, (unsigned int)n2, arr);
	ready_phase[2] = res < 0 ? errno : 0;
	ready_phase[0] = 3;
	_exit(0);
}

/* Pipe: PIPE kevents on one pipe through every fd and queue allowed, then write/read churn. */
static void attack_pipe(struct report *r, int fd)
{
	static int fds[1 << 16];
	long nfds = 0, nq, qi;
	int p[2], err = 0, d;
	char c = 'x';

	raise_nofile();
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC)) {
		stopped(r, errno, "pipe failed");
		send_report(fd, r);
		_exit(1);
	}
	nq = make_queues(r, 1 << 16);
	while (nfds < (1 << 16)) {
		d = dup(p[0]);
		if (d < 0)
			break;
		fds[nfds++] = d;
	}
	for (qi = 0; qi < nq && !err; qi++)
		err = fill_pipe(r, queues[qi], fds, nfds);
	snprintf(r->what, sizeof(r->what), "%ld fds x %ld queues (%s); stopped by %s", nfds, nq,
		 strerror(r->err), err ? strerror(err) : "nothing");
	r->err = err;
	send_report(fd, r);
	for (;;) {
		if (write(p[1], &c, 1) == 1)
			while (read(p[0], &c, 1) == 1)
				;
	}
}

/*
 * Runs one attack: the victim idle, the attacker up to its limit, the victim under the
 * attack, then SIGKILL; fills *r and returns how long the attacker took to die after it.
 */
static double run_attack(const char *name, attack_fn fn, struct report *r)
{
	struct victim idle, hit;
	int p[2], st;
	double t;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	r->refused = -1;
	if (victim_measure(&idle))
		ksft_exit_fail_msg("%s: the idle victim failed\n", name);
	if (pipe(p))
		ksft_exit_fail_msg("pipe: %s\n", strerror(errno));
	pid = fork();
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		if (setgroups(0, NULL) || setgid(UNPRIV_UID) || setuid(UNPRIV_UID))
			_exit(2);
		fn(r, p[1]);
		_exit(0);
	}
	close(p[1]);
	t = now_us();
	if (read(p[0], r, sizeof(*r)) != sizeof(*r))
		ksft_exit_fail_msg("%s: the attacker died during its setup\n", name);
	close(p[0]);
	ksft_print_msg("%s: setup %.1f s: %ld kevents in %ld queues; %s\n", name,
		       (now_us() - t) / 1e6, r->kevents, r->queues, r->what);
	/* Let the attack run a moment before measuring (the READY loop is under way). */
	usleep(200 * 1000);
	if (victim_measure(&hit))
		ksft_exit_fail_msg("%s: the victim under attack failed\n", name);
	print_victim(name, &idle, &hit);
	t = now_us();
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	t = (now_us() - t) / 1e6;
	if (WIFSIGNALED(st))
		ksft_print_msg("%s: attacker died %.3f s after SIGKILL\n", name, t);
	else
		ksft_print_msg("%s: attacker had exited (status %d) before SIGKILL\n", name,
			       WEXITSTATUS(st));
	return t;
}

int main(void)
{
	struct report r;
	double dead;
	long kev, q;

	ksft_print_header();
	if (read_syscalls())
		ksft_exit_skip("no /sys/kernel/kevent/syscalls (CONFIG_KEVENT=n?)\n");
	if (getuid() != 0)
		ksft_exit_skip("must start as root (it drops to uid %d per attack)\n", UNPRIV_UID);
	/* Without the limits (a kernel before issue 20) the attacks run anyway, and fail. */
	if (sysctl_read("max_user_kevents", &kev) || sysctl_read("max_user_queues", &q)) {
		ksft_print_msg("no %smax_user_kevents or max_user_queues\n", SYSCTL_DIR);
		kev = LONG_MAX;
		q = -1;
	}
	ksft_print_msg("limits: max_user_kevents %ld, max_user_queues %ld\n", kev, q);
	ksft_set_plan(5);

	run_attack("timers", attack_timers, &r);
	ksft_test_result((r.err == ENOSPC || r.err == EMFILE) && r.kevents <= kev,
			 "timers stopped by ENOSPC/EMFILE within max_user_kevents\n");

	run_attack("sigchld", attack_sigchld, &r);
	ksft_test_result(r.refused == r.queues + 31 && r.err == EMFILE && r.kevents == r.queues,
			 "sigchld: one per queue, duplicates refused, queues stopped by EMFILE\n");

	run_attack("inode", attack_inode, &r);
	ksft_test_result(r.refused == r.queues + 1 && r.err == EMFILE && r.kevents <= r.queues,
			 "inode: one mark per directory per queue, queues stopped by EMFILE\n");

	ready_phase = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ready_phase == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	dead = run_attack("ready", attack_ready, &r);
	ksft_print_msg("ready: 2^31-1 entries: %s; INT_MAX/%zu entries: %s\n",
		       ready_phase[0] == 1 ? "killed in it" :
		       ready_phase[1] ? strerror(ready_phase[1]) : "returned",
		       sizeof(struct ukevent),
		       ready_phase[0] == 1 ? "not reached" : ready_phase[0] == 2 ? "killed in it" :
		       ready_phase[2] ? strerror(ready_phase[2]) : "returned");
	if (ready_phase[0] == 3)
		ksft_test_result_skip("ready: both READY calls returned before the SIGKILL\n");
	else
		ksft_test_result(dead < 1.0,
				 "ready: the killed caller of a huge READY died within 1 s\n");

	run_attack("pipe", attack_pipe, &r);
	ksft_test_result((r.err == ENOSPC || r.err == EMFILE) && r.kevents <= kev,
			 "pipe: waiters stopped by ENOSPC/EMFILE within max_user_kevents\n");

	ksft_finished();
}
