// SPDX-License-Identifier: GPL-2.0
/*
 * kevent selftests: the syscalls' errnos, close of a watched file, POLLFREE (a watched
 * signalfd whose sighand is torn down, also racing with REMOVE and close), fork and exec
 * (D11), nesting (a queue in a queue, in epoll) and the per-user limits under
 * /proc/sys/fs/kevent/.
 *
 * The syscall numbers are read from /sys/kernel/kevent/syscalls (init, ctl, get_events,
 * wait, commit), as userspace detection does; without it every test is skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/time_types.h>
#include <linux/ukevent.h>

#include "../kselftest_harness.h"
#include "kevent_util.h"

#define REQUIRE_KEVENT() do { \
	if (nr_init < 0) \
		SKIP(return, "no /sys/kernel/kevent/syscalls (CONFIG_KEVENT=n?)"); \
} while (0)

static const struct __kernel_timespec zero_ts;
static const struct __kernel_timespec second_ts = { .tv_sec = 1 };

/* A call that must fail with errno @err (errno taken before anything else runs). */
#define EXPECT_ERRNO(err, call) do { \
	int __ret = (call), __err = errno; \
	EXPECT_EQ(-1, __ret); \
	EXPECT_EQ(err, __err); \
} while (0)

/* The sysctls as they were at start, put back by main() after the tests. */
static const char *const sysctls[] = {
	"max_user_kevents", "max_user_queues", "unprivileged_disabled",
};

static long saved[3];
static int have_saved[3];

/* --- the syscalls' errnos ------------------------------------------------------------- */

TEST(errno_init)
{
	static __u64 ring_mem[64];
	struct kevent_ring *ring = (struct kevent_ring *)ring_mem;
	void *none;
	int q;

	REQUIRE_KEVENT();
	EXPECT_ERRNO(EINVAL, k_init(NULL, 0, 1));
	EXPECT_ERRNO(EINVAL, k_init(NULL, 0, 0x80000000u));
	EXPECT_ERRNO(EINVAL, k_init(NULL, 2, 0));
	EXPECT_ERRNO(EINVAL, k_init(ring, 0, 0));
	EXPECT_ERRNO(EINVAL, k_init(ring, 1, 0));
	/* A ring the caller cannot write. */
	none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, none);
	EXPECT_ERRNO(EFAULT, k_init(none, 4, 0));
	munmap(none, 4096);

	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	EXPECT_EQ(FD_CLOEXEC, fcntl(q, F_GETFD) & FD_CLOEXEC);
	close(q);
	q = k_init(ring, 4, 0);
	ASSERT_LE(0, q);
	close(q);
}

/* Every call on a closed fd, a negative fd (EBADF) and a fd that is no queue (EINVAL). */
TEST(errno_bad_fd)
{
	struct ukevent e = uk(KEVENT_UNOTIFY, 1, 0, 0);
	int bad[3] = { -1, 0, 0 }, want[3] = { EBADF, EBADF, EINVAL };
	int p[2], i;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, pipe(p));
	bad[1] = p[0];
	close(p[0]);
	bad[2] = p[1];
	for (i = 0; i < 3; i++) {
		EXPECT_ERRNO(want[i], k_ctl(bad[i], KEVENT_CTL_ADD, 1, &e));
		EXPECT_ERRNO(want[i], k_get(bad[i], 1, 1, &zero_ts, &e, 0));
		EXPECT_ERRNO(want[i], k_wait(bad[i], 1, 0, &zero_ts, 0));
		EXPECT_ERRNO(want[i], k_commit(bad[i], 0, 0));
	}
	close(p[1]);
}

TEST(errno_ctl)
{
	struct ukevent e[4], *page, *edge;
	void *none;
	int q, n, i;

	REQUIRE_KEVENT();
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	e[0] = uk(KEVENT_UNOTIFY, 1, 0, 0);
	EXPECT_ERRNO(EINVAL, k_ctl(q, 4, 1, e));
	EXPECT_ERRNO(EFAULT, k_ctl(q, KEVENT_CTL_ADD, 1, NULL));
	none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, none);
	EXPECT_ERRNO(EFAULT, k_ctl(q, KEVENT_CTL_ADD, 1, none));
	/*
	 * num far beyond the array (beyond INT_MAX entries): refused at once (EINVAL), or
	 * walked up to the guard page that follows a page of entries (EFAULT).
	 */
	page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, page);
	ASSERT_EQ(0, mprotect((char *)page + 4096, 4096, PROT_NONE));
	for (i = 0; i < 4096 / (int)sizeof(*page); i++)
		page[i] = uk(KEVENT_UNOTIFY, 1000 + i, 0, 0);
	EXPECT_EQ(-1, k_ctl(q, KEVENT_CTL_ADD, UINT_MAX, page));
	EXPECT_TRUE(errno == EINVAL || errno == EFAULT);
	/* An entry that runs into the guard page: EFAULT, and nothing of it done. */
	edge = (struct ukevent *)((char *)page + 4096 - 16);
	e[0] = uk(KEVENT_UNOTIFY, 41, 0, 0);
	memcpy(edge, &e[0], 16);
	EXPECT_ERRNO(EFAULT, k_ctl(q, KEVENT_CTL_ADD, 1, edge));
	EXPECT_EQ(0, add1(q, e[0]));
	/* MODIFY writes its entry back in place: into a read-only page, EFAULT. */
	page[0] = e[0];
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ));
	EXPECT_ERRNO(EFAULT, k_ctl(q, KEVENT_CTL_MODIFY, 1, page));
	EXPECT_EQ(0, remove1(q, e[0]));
	munmap(page, 8192);
	munmap(none, 4096);

	/* Per entry: unknown type, NAIO, AIO, POSIX_TIMER -ENOSYS (D2); the others go on. */
	e[0] = uk(KEVENT_MAX, 1, 0, 0);
	e[1] = uk(KEVENT_UNOTIFY, 7, 0, 0);
	e[2] = uk(KEVENT_NAIO, 1, 0, 0);
	e[3] = uk(KEVENT_POSIX_TIMER, 1, 0, 0);
	n = k_ctl(q, KEVENT_CTL_ADD, 4, e);
	ASSERT_EQ(3, n);
	EXPECT_EQ(KEVENT_RET_BROKEN | KEVENT_RET_DONE, e[0].ret_flags);
	EXPECT_EQ(-ENOSYS, (int)e[0].ret_data[1]);
	EXPECT_EQ(KEVENT_NAIO, e[1].type);
	EXPECT_EQ(-ENOSYS, (int)e[1].ret_data[1]);
	EXPECT_EQ(KEVENT_POSIX_TIMER, e[2].type);
	EXPECT_EQ(-ENOSYS, (int)e[2].ret_data[1]);
	EXPECT_EQ(-EEXIST, add1(q, uk(KEVENT_UNOTIFY, 7, 0, 0)));
	EXPECT_EQ(-EBADF, add1(q, uk_fd(KEVENT_SOCKET, 9999, KEVENT_SOCKET_RECV)));
	/* Wrong kinds: the queue itself, as a socket and as a POLL target. */
	EXPECT_EQ(-EINVAL, add1(q, uk_fd(KEVENT_SOCKET, q, KEVENT_SOCKET_RECV)));
	EXPECT_EQ(-EINVAL, add1(q, uk_fd(KEVENT_POLL, q, KEVENT_POLL_POLLIN)));
	/* REMOVE/MODIFY of a missing key: 0, -ENOENT in the entry (D14). */
	EXPECT_EQ(-ENOENT, remove1(q, uk(KEVENT_UNOTIFY, 8, 0, 0)));
	EXPECT_EQ(0, remove1(q, uk(KEVENT_UNOTIFY, 7, 0, 0)));
	close(q);
}

TEST(errno_get_events_wait_commit)
{
	static __u64 ring_mem[64];
	struct kevent_ring *ring = (struct kevent_ring *)ring_mem;
	struct __kernel_timespec bad = { .tv_sec = 0, .tv_nsec = 1000000000 };
	struct __kernel_timespec neg = { .tv_sec = -1 };
	struct ukevent buf[2];
	int q, r;

	REQUIRE_KEVENT();
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	EXPECT_ERRNO(EINVAL, k_get(q, 0, 0, &zero_ts, buf, 0));
	EXPECT_ERRNO(EINVAL, k_get(q, 3, 2, &zero_ts, buf, 0));
	EXPECT_ERRNO(EFAULT, k_get(q, 1, 2, &zero_ts, NULL, 0));
	EXPECT_ERRNO(EINVAL, k_get(q, 1, 2, &bad, buf, 0));
	EXPECT_ERRNO(EINVAL, k_get(q, 1, 2, &neg, buf, 0));
	EXPECT_ERRNO(EINVAL, k_get(q, 1, 2, &zero_ts, buf, 2));
	EXPECT_EQ(0, k_get(q, 1, 2, &zero_ts, buf, 0));
	/* No ring: wait and commit are EINVAL. */
	EXPECT_ERRNO(EINVAL, k_wait(q, 1, 0, &zero_ts, 0));
	EXPECT_ERRNO(EINVAL, k_commit(q, 0, 0));
	close(q);

	q = k_init(ring, 4, 0);
	ASSERT_LE(0, q);
	EXPECT_ERRNO(EINVAL, k_wait(q, 5, 0, &zero_ts, 0));
	EXPECT_ERRNO(EINVAL, k_commit(q, 4, 0));
	EXPECT_ERRNO(EOVERFLOW, k_commit(q, 0, 7));
	r = k_wait(q, 1, 0, &zero_ts, 0);
	EXPECT_EQ(0, r);
	close(q);
}

/* --- close of a watched file ---------------------------------------------------------- */

/*
 * The queue holds no reference to a watched file: closing the only fd of a watched socket
 * closes it (the peer reads EOF), and its kevent is gone without a report.
 */
TEST(close_watched_socket)
{
	struct ukevent e, buf[4];
	int sv[2], q;
	char c;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	e = uk_fd(KEVENT_SOCKET, sv[0], KEVENT_SOCKET_RECV);
	ASSERT_EQ(0, add1(q, e));
	close(sv[0]);
	EXPECT_EQ(0, read(sv[1], &c, 1));
	EXPECT_EQ(0, k_get(q, 1, 4, &zero_ts, buf, 0));
	EXPECT_EQ(-ENOENT, remove1(q, e));
	close(sv[1]);
	close(q);
}

/* D10: the watched number closed while a duplicate keeps the file: reported once, -EBADF. */
TEST(close_watched_fd_with_a_duplicate)
{
	struct ukevent buf[4];
	int sv[2], q, dup_fd, n;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk_fd(KEVENT_SOCKET, sv[0], KEVENT_SOCKET_RECV)));
	dup_fd = dup(sv[0]);
	ASSERT_LE(0, dup_fd);
	close(sv[0]);
	ASSERT_EQ(1, write(sv[1], "x", 1));
	n = k_get(q, 1, 4, &second_ts, buf, 0);
	ASSERT_EQ(1, n);
	EXPECT_EQ(KEVENT_RET_BROKEN | KEVENT_RET_DONE, buf[0].ret_flags & ~KEVENT_RET_COPY_FAILED);
	EXPECT_EQ(-EBADF, (int)buf[0].ret_data[1]);
	EXPECT_EQ(0, k_get(q, 1, 4, &zero_ts, buf, 0));
	close(dup_fd);
	close(sv[1]);
	close(q);
}

/* --- POLLFREE ----------------------------------------------------------------------------- */

/*
 * A task that shares the caller's mm and fd table (so the queue accepts its calls: D11 is
 * by mm) but has its own signal handlers: it opens a signalfd (whose wait queue lives in its
 * sighand), watches it with a POLL kevent in the caller's queue and exits. Its sighand is
 * freed as it is reaped (SIGCHLD ignored: at its exit), and signalfd wakes the head with
 * POLLFREE. Only raw system calls here: the task runs on the caller's TLS.
 */
struct pf_task {
	int q;
	int sync_w;
	int sfd;
	int added;
};

static int pf_task_fn(void *arg)
{
	struct pf_task *t = arg;
	unsigned long mask = 1UL << (SIGUSR1 - 1);
	struct ukevent e;

	t->sfd = syscall(SYS_signalfd4, -1, &mask, sizeof(mask), SFD_CLOEXEC);
	memset(&e, 0, sizeof(e));
	e.type = KEVENT_POLL;
	e.event = KEVENT_POLL_POLLIN;
	e.id.raw[0] = t->sfd;
	t->added = syscall(nr_ctl, t->q, KEVENT_CTL_ADD, 1, &e);
	syscall(SYS_write, t->sync_w, "x", 1);
	syscall(SYS_exit, 0);
	return 0;
}

#define PF_STACK (64 * 1024)

/*
 * Starts a pf_task on queue q and waits until it has added its kevent; returns its pid
 * (the task exits at once after that).
 */
static pid_t pf_start(struct pf_task *t, void *stack, int q)
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	t->q = q;
	t->sync_w = p[1];
	t->sfd = -1;
	t->added = -2;
	pid = clone(pf_task_fn, (char *)stack + PF_STACK, CLONE_VM | CLONE_FILES | SIGCHLD, t);
	if (pid > 0 && read(p[0], &c, 1) != 1)
		pid = -1;
	close(p[0]);
	close(p[1]);
	return pid;
}

/* Waits until the task is gone (reaped by its own exit: SIGCHLD is ignored). */
static void pf_reaped(pid_t pid)
{
	while (waitpid(pid, NULL, __WALL) == pid || errno == EINTR)
		;
}

/* The owner of the signalfd's sighand exits: the queue, the kevent and the file stay sane. */
TEST(pollfree_signalfd_owner_exits)
{
	struct ukevent buf[4], e;
	struct pf_task t;
	void *stack;
	pid_t pid;
	int q;

	REQUIRE_KEVENT();
	ASSERT_NE(SIG_ERR, signal(SIGCHLD, SIG_IGN));
	stack = mmap(NULL, PF_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, stack);
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	pid = pf_start(&t, stack, q);
	ASSERT_LT(0, pid);
	ASSERT_LE(0, t.sfd);
	ASSERT_EQ(0, t.added);
	pf_reaped(pid);
	/* The head is gone: nothing is reported, REMOVE and close of both files are clean. */
	EXPECT_EQ(0, k_get(q, 1, 4, &zero_ts, buf, 0));
	e = uk_fd(KEVENT_POLL, t.sfd, KEVENT_POLL_POLLIN);
	EXPECT_EQ(0, k_ctl(q, KEVENT_CTL_REMOVE, 1, &e));
	EXPECT_EQ(0, close(t.sfd));
	EXPECT_EQ(0, close(q));
	munmap(stack, PF_STACK);
}

FIXTURE(race) {
	void *stack;
};

FIXTURE_SETUP(race)
{
	self->stack = mmap(NULL, PF_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->stack);
	ASSERT_NE(SIG_ERR, signal(SIGCHLD, SIG_IGN));
}

FIXTURE_TEARDOWN(race)
{
	munmap(self->stack, PF_STACK);
}

/*
 * Issue 20 finding 1: the sighand of a watched signalfd is torn down (its owner exits)
 * while this thread REMOVEs the kevent, closes the queue, closes the signalfd or delivers,
 * many times; under KASAN a use-after-free of the kevent or the queue is reported.
 * KEVENT_POLLFREE_ITERS (default 3000) bounds the iterations, 40 s the time.
 */
TEST_F_TIMEOUT(race, pollfree_vs_remove_and_close, 90)
{
	const char *env = getenv("KEVENT_POLLFREE_ITERS");
	long iters = env ? atol(env) : 3000, i, done[4] = { 0 };
	struct ukevent buf[4], e;
	struct pf_task t;
	time_t start = time(NULL);
	pid_t pid;
	int q, how;

	REQUIRE_KEVENT();
	for (i = 0; i < iters && time(NULL) - start < 40; i++) {
		unsigned int spin = (unsigned int)i * 2654435761u % 4096, j;

		q = k_init(NULL, 0, 0);
		ASSERT_LE(0, q);
		pid = pf_start(&t, self->stack, q);
		ASSERT_LT(0, pid);
		ASSERT_EQ(0, t.added);
		/* The task is exiting now: vary where this side meets it. */
		for (j = 0; j < spin; j++)
			asm volatile("" ::: "memory");
		how = i % 4;
		e = uk_fd(KEVENT_POLL, t.sfd, KEVENT_POLL_POLLIN);
		switch (how) {
		case 0:
			EXPECT_EQ(0, k_ctl(q, KEVENT_CTL_REMOVE, 1, &e));
			break;
		case 1:
			EXPECT_EQ(0, close(q));
			q = -1;
			break;
		case 2:
			EXPECT_EQ(0, close(t.sfd));
			t.sfd = -1;
			break;
		default:
			EXPECT_LE(0, k_get(q, 1, 4, &zero_ts, buf, 0));
			break;
		}
		done[how]++;
		pf_reaped(pid);
		if (t.sfd >= 0)
			close(t.sfd);
		if (q >= 0)
			close(q);
	}
	TH_LOG("%ld iterations (remove %ld, close queue %ld, close signalfd %ld, deliver %ld)",
	       i, done[0], done[1], done[2], done[3]);
	EXPECT_LE(40, i);
}

/* --- fork and exec (D11) --------------------------------------------------------------- */

/* A forked child's copy of the queue fd is EBADF on every call. */
TEST(fork_child_gets_ebadf)
{
	static __u64 ring_mem[64];
	struct kevent_ring *ring = (struct kevent_ring *)ring_mem;
	struct ukevent buf[2];
	pid_t pid;
	int q, st;

	REQUIRE_KEVENT();
	q = k_init(ring, 4, 0);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 1, 0, KEVENT_REQ_READY)));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct ukevent e = uk(KEVENT_UNOTIFY, 2, 0, 0);
		int bad = 0;

		bad |= !(k_ctl(q, KEVENT_CTL_ADD, 1, &e) == -1 && errno == EBADF);
		bad |= !(k_ctl(q, KEVENT_CTL_READY, 0, NULL) == -1 && errno == EBADF) << 1;
		bad |= !(k_get(q, 1, 2, &zero_ts, buf, 0) == -1 && errno == EBADF) << 2;
		bad |= !(k_wait(q, 1, 0, &zero_ts, 0) == -1 && errno == EBADF) << 3;
		bad |= !(k_commit(q, 0, 0) == -1 && errno == EBADF) << 4;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* The parent's queue is untouched: its ready kevent is still there. */
	EXPECT_EQ(1, k_get(q, 1, 2, &zero_ts, buf, 0));
	close(q);
}

/* SIGNAL kevents are not inherited: a signal the child sends itself reaches no queue. */
TEST(fork_signal_kevents_not_inherited)
{
	struct ukevent buf[2];
	pid_t pid;
	int q, st;

	REQUIRE_KEVENT();
	ASSERT_NE(SIG_ERR, signal(SIGUSR2, SIG_IGN));
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_SIGNAL, SIGUSR2, KEVENT_SIGNAL_DELIVERY, 0)));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		kill(getpid(), SIGUSR2);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, k_get(q, 1, 2, &zero_ts, buf, 0));
	kill(getpid(), SIGUSR2);
	ASSERT_EQ(1, k_get(q, 1, 2, &second_ts, buf, 0));
	EXPECT_EQ(KEVENT_SIGNAL, buf[0].type);
	EXPECT_EQ(1, buf[0].ret_data[0]);
	close(q);
}

/* The exec'ed image (main() below): the queue fd it inherited without CLOEXEC is EBADF. */
static int exec_child(int fd, int orig)
{
	struct ukevent e = uk(KEVENT_UNOTIFY, 1, 0, 0);

	if (k_ctl(fd, KEVENT_CTL_ADD, 1, &e) != -1 || errno != EBADF)
		return 1;
	if (k_ctl(fd, KEVENT_CTL_READY, 0, NULL) != -1 || errno != EBADF)
		return 2;
	/* The original number was O_CLOEXEC: closed by the exec. */
	if (fcntl(orig, F_GETFD) != -1 || errno != EBADF)
		return 3;
	return 0;
}

TEST(exec_image_gets_ebadf)
{
	pid_t pid;
	int q, st;

	REQUIRE_KEVENT();
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char fd_arg[16], nr_arg[24], q_arg[16];
		int fd = dup2(q, 100);

		if (fd != 100)
			_exit(3);
		snprintf(fd_arg, sizeof(fd_arg), "%d", fd);
		snprintf(nr_arg, sizeof(nr_arg), "%ld", nr_ctl);
		snprintf(q_arg, sizeof(q_arg), "%d", q);
		execl("/proc/self/exe", "kevent_test", "--exec-child", fd_arg, nr_arg, q_arg,
		      (char *)NULL);
		_exit(4);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(q);
}

/* --- nesting ---------------------------------------------------------------------------- */

TEST(nest_queue_in_queue)
{
	struct ukevent buf[2];
	int outer, inner, q0, q3;

	REQUIRE_KEVENT();
	outer = k_init(NULL, 0, 0);
	inner = k_init(NULL, 0, 0);
	q0 = k_init(NULL, 0, 0);
	q3 = k_init(NULL, 0, 0);
	ASSERT_LE(0, outer);
	ASSERT_LE(0, inner);
	ASSERT_LE(0, q0);
	ASSERT_LE(0, q3);
	ASSERT_EQ(0, add1(inner, uk(KEVENT_UNOTIFY, 1, 0, 0)));
	ASSERT_EQ(0, add1(outer, uk_fd(KEVENT_POLL, inner, KEVENT_POLL_POLLIN)));
	EXPECT_EQ(0, k_get(outer, 1, 2, &zero_ts, buf, 0));
	buf[0] = uk(KEVENT_UNOTIFY, 1, 0, 0);
	ASSERT_EQ(1, k_ctl(inner, KEVENT_CTL_READY, 1, buf));
	ASSERT_EQ(1, k_get(outer, 1, 2, &second_ts, buf, 0));
	EXPECT_EQ(KEVENT_POLL, buf[0].type);
	EXPECT_EQ((__u32)inner, buf[0].id.raw[0]);
	/* One level only: a queue that watches queues cannot be watched, and back. */
	EXPECT_EQ(-ELOOP, add1(q0, uk_fd(KEVENT_POLL, outer, KEVENT_POLL_POLLIN)));
	EXPECT_EQ(-ELOOP, add1(inner, uk_fd(KEVENT_POLL, q3, KEVENT_POLL_POLLIN)));
	/* Itself: the wrong kind. */
	EXPECT_EQ(-EINVAL, add1(q3, uk_fd(KEVENT_POLL, q3, KEVENT_POLL_POLLIN)));
	/* Closing the inner queue first: the outer one forgets it silently. */
	close(inner);
	EXPECT_EQ(0, k_get(outer, 1, 2, &zero_ts, buf, 0));
	close(outer);
	close(q0);
	close(q3);
}

TEST(nest_queue_in_epoll)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct ukevent e;
	int q, ep, q2;

	REQUIRE_KEVENT();
	q = k_init(NULL, 0, 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, q);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 1, 0, 0)));
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, q, &ev));
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 0));
	e = uk(KEVENT_UNOTIFY, 1, 0, 0);
	ASSERT_EQ(1, k_ctl(q, KEVENT_CTL_READY, 1, &e));
	EXPECT_EQ(1, epoll_wait(ep, &out, 1, 1000));
	/* An epoll file is no POLL target (epoll's loop check cannot see through a queue). */
	q2 = k_init(NULL, 0, 0);
	ASSERT_LE(0, q2);
	EXPECT_EQ(-EINVAL, add1(q2, uk_fd(KEVENT_POLL, ep, KEVENT_POLL_POLLIN)));
	/* Closing the queue while epoll holds it. */
	close(q);
	EXPECT_EQ(0, epoll_wait(ep, &out, 1, 0));
	close(ep);
	close(q2);
}

/* --- limits (kernel/README.md, "Limits") ------------------------------------------------- */

TEST(limits_sysctls_exist)
{
	long v;
	int i;

	REQUIRE_KEVENT();
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(0, sysctl_read(sysctls[i], &v)) {
			TH_LOG("%s%s is missing", SYSCTL_DIR, sysctls[i]);
		}
	}
	ASSERT_EQ(0, sysctl_read("max_user_kevents", &v));
	EXPECT_LT(0, v);
	ASSERT_EQ(0, sysctl_read("max_user_queues", &v));
	EXPECT_LT(0, v);
	ASSERT_EQ(0, sysctl_read("unprivileged_disabled", &v));
	EXPECT_EQ(0, v);
	EXPECT_EQ(-1, sysctl_write("unprivileged_disabled", 3));
}

#define LIMIT_QUEUES 5

/* Creates queues until one fails: exit status 0 if exactly LIMIT_QUEUES were made and the
 * next one failed with EMFILE.
 */
static int unpriv_queues(void *arg)
{
	int n = 0, q;

	(void)arg;
	while (n < 10 * LIMIT_QUEUES) {
		q = k_init(NULL, 0, 0);
		if (q < 0)
			break;
		n++;
	}
	if (n != LIMIT_QUEUES)
		return 1;
	return errno == EMFILE ? 0 : 2;
}

/*
 * With sysctl @name set to @limit: @fn as uid 65534 twice (the second run checks that the
 * first one's exit uncharged everything); 0 when both passed.
 */
static int unprivileged_twice_with(const char *name, long limit, int (*fn)(void *))
{
	int r1, r2;
	long v;

	if (sysctl_read(name, &v) || sysctl_write(name, limit))
		return -1;
	r1 = as_unprivileged(fn, NULL);
	r2 = as_unprivileged(fn, NULL);
	if (sysctl_write(name, v))
		return -1;
	return r1 ? r1 : r2 ? 100 + r2 : 0;
}

TEST(limits_max_user_queues_emfile)
{
	REQUIRE_KEVENT();
	EXPECT_EQ(0, unprivileged_twice_with("max_user_queues", LIMIT_QUEUES, unpriv_queues));
}

#define LIMIT_KEVENTS 100

/*
 * Adds UNOTIFY kevents over two queues until one fails: status 0 if exactly LIMIT_KEVENTS
 * were accepted, the next failed with -ENOSPC, a REMOVE made room for one more and closing
 * a queue for all it held.
 */
static int unpriv_kevents(void *arg)
{
	int q[2], n = 0, r = 0, i;

	(void)arg;
	q[0] = k_init(NULL, 0, 0);
	q[1] = k_init(NULL, 0, 0);
	if (q[0] < 0 || q[1] < 0)
		return 10;
	while (n < 10 * LIMIT_KEVENTS) {
		r = add1(q[n % 2], uk(KEVENT_UNOTIFY, n, 0, 0));
		if (r != 0)
			break;
		n++;
	}
	if (n != LIMIT_KEVENTS)
		return 1;
	if (r != -ENOSPC)
		return 2;
	if (remove1(q[0], uk(KEVENT_UNOTIFY, 0, 0, 0)) != 0)
		return 3;
	if (add1(q[1], uk(KEVENT_UNOTIFY, 1000000, 0, 0)) != 0)
		return 4;
	if (add1(q[1], uk(KEVENT_UNOTIFY, 1000001, 0, 0)) != -ENOSPC)
		return 5;
	close(q[0]);
	for (i = 0; i < LIMIT_KEVENTS / 2 - 1; i++)
		if (add1(q[1], uk(KEVENT_UNOTIFY, 2000000 + i, 0, 0)) != 0)
			return 6;
	if (add1(q[1], uk(KEVENT_UNOTIFY, 3000000, 0, 0)) != -ENOSPC)
		return 7;
	return 0;
}

TEST(limits_max_user_kevents_enospc)
{
	REQUIRE_KEVENT();
	EXPECT_EQ(0, unprivileged_twice_with("max_user_kevents", LIMIT_KEVENTS, unpriv_kevents));
}

/* Status 0 if kevent_init gives EPERM; 1 if it made a queue. */
static int unpriv_init_eperm(void *arg)
{
	(void)arg;
	if (k_init(NULL, 0, 0) >= 0)
		return 1;
	return errno == EPERM ? 0 : 2;
}

static int unpriv_init_ok(void *arg)
{
	(void)arg;
	return k_init(NULL, 0, 0) >= 0 ? 0 : 1;
}

TEST(limits_unprivileged_disabled)
{
	int q;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, sysctl_write("unprivileged_disabled", 1));
	EXPECT_EQ(0, as_unprivileged(unpriv_init_eperm, NULL));
	q = k_init(NULL, 0, 0);
	EXPECT_LE(0, q);
	if (q >= 0)
		close(q);
	ASSERT_EQ(0, sysctl_write("unprivileged_disabled", 2));
	EXPECT_EQ(0, as_unprivileged(unpriv_init_eperm, NULL));
	EXPECT_ERRNO(EPERM, k_init(NULL, 0, 0));
	ASSERT_EQ(0, sysctl_write("unprivileged_disabled", 0));
	EXPECT_EQ(0, as_unprivileged(unpriv_init_ok, NULL));
}

/* SIGNAL: the key is the signal number and NOMASK; other id bits -EINVAL, a second -EEXIST. */
TEST(p27_signal_key_is_the_number_and_nomask)
{
	int q, bit;

	REQUIRE_KEVENT();
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	for (bit = 32; bit <= 62; bit += 10)
		EXPECT_EQ(-EINVAL, add1(q, uk(KEVENT_SIGNAL, SIGUSR1 | (1ULL << bit),
					      KEVENT_SIGNAL_DELIVERY, 0)));
	EXPECT_EQ(-EINVAL, add1(q, uk(KEVENT_SIGNAL, SIGKILL, KEVENT_SIGNAL_DELIVERY, 0)));
	EXPECT_EQ(-EINVAL, add1(q, uk(KEVENT_SIGNAL, 0, KEVENT_SIGNAL_DELIVERY, 0)));
	EXPECT_EQ(-EINVAL, add1(q, uk(KEVENT_SIGNAL, 65, KEVENT_SIGNAL_DELIVERY, 0)));
	ASSERT_EQ(0, add1(q, uk(KEVENT_SIGNAL, SIGUSR1, KEVENT_SIGNAL_DELIVERY, 0)));
	EXPECT_EQ(-EEXIST, add1(q, uk(KEVENT_SIGNAL, SIGUSR1, KEVENT_SIGNAL_DELIVERY, 0)));
	EXPECT_EQ(-EEXIST, add1(q, uk(KEVENT_SIGNAL, SIGUSR1 | KEVENT_SIGNAL_NOMASK,
				      KEVENT_SIGNAL_DELIVERY, 0)));
	ASSERT_EQ(0, add1(q, uk(KEVENT_SIGNAL, SIGUSR2 | KEVENT_SIGNAL_NOMASK,
				KEVENT_SIGNAL_DELIVERY, 0)));
	EXPECT_EQ(-EEXIST, add1(q, uk(KEVENT_SIGNAL, SIGUSR2, KEVENT_SIGNAL_DELIVERY, 0)));
	close(q);
}

/* fd kevents: raw[1] must be 0. */
TEST(p28_fd_kevents_raw1_must_be_zero)
{
	struct ukevent e;
	int sv[2], p[2], q;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	ASSERT_EQ(0, pipe(p));
	q = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	e = uk_fd(KEVENT_SOCKET, sv[0], KEVENT_SOCKET_RECV);
	e.id.raw[1] = 1;
	EXPECT_EQ(-EINVAL, add1(q, e));
	e = uk_fd(KEVENT_PIPE, p[0], KEVENT_SOCKET_RECV);
	e.id.raw[1] = 0x80000000u;
	EXPECT_EQ(-EINVAL, add1(q, e));
	e = uk_fd(KEVENT_POLL, p[0], KEVENT_POLL_POLLIN);
	e.id.raw[1] = 2;
	EXPECT_EQ(-EINVAL, add1(q, e));
	EXPECT_EQ(0, add1(q, uk_fd(KEVENT_POLL, p[0], KEVENT_POLL_POLLIN)));
	close(q);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

/* INODE: raw[1] must be 0; one kevent per directory per queue, whatever the fd. */
TEST(p29_inode_raw1_zero_and_one_per_directory)
{
	char dir[] = "/tmp/kevent-selftest-XXXXXX";
	struct ukevent e;
	int q, d1, d2, q2;

	REQUIRE_KEVENT();
	ASSERT_NE(NULL, mkdtemp(dir));
	d1 = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d2 = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_LE(0, d1);
	ASSERT_LE(0, d2);
	q = k_init(NULL, 0, 0);
	q2 = k_init(NULL, 0, 0);
	ASSERT_LE(0, q);
	ASSERT_LE(0, q2);
	e = uk_fd(KEVENT_INODE, d1, KEVENT_INODE_CREATE);
	e.id.raw[1] = 1;
	EXPECT_EQ(-EINVAL, add1(q, e));
	EXPECT_EQ(0, add1(q, uk_fd(KEVENT_INODE, d1, KEVENT_INODE_CREATE)));
	EXPECT_EQ(-EEXIST, add1(q, uk_fd(KEVENT_INODE, d2, KEVENT_INODE_CREATE)));
	/* Another queue may watch it. */
	EXPECT_EQ(0, add1(q2, uk_fd(KEVENT_INODE, d2, KEVENT_INODE_CREATE)));
	close(q);
	close(q2);
	close(d1);
	close(d2);
	rmdir(dir);
}

/* A ctl over a huge array is not walked to its end once the caller is killed. */
TEST(limits_huge_ready_dies_on_sigkill)
{
	const unsigned long n = 1UL << 31;
	struct timespec t0, t1;
	struct ukevent *arr;
	pid_t pid;
	int st;
	double s;

	REQUIRE_KEVENT();
	/* 2^31 read-only zero-page entries, each naming SOCKET 0 (zero_key_queue()). */
	arr = mmap(NULL, n * sizeof(*arr), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (arr == MAP_FAILED)
		SKIP(return, "cannot map %lu bytes", n * sizeof(*arr));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int q = zero_key_queue();

		if (q < 0)
			_exit(1);
		if (k_ctl(q, KEVENT_CTL_READY, (unsigned int)(n - 1), arr) < 0)
			_exit(errno == EINVAL ? 2 : 3);
		_exit(0);
	}
	usleep(300 * 1000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	munmap(arr, n * sizeof(*arr));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
		SKIP(return, "READY of 2^31 - 1 entries refused at once (EINVAL)");
	/* It must have been in the loop when killed: setup failures and early returns fail. */
	ASSERT_TRUE(WIFSIGNALED(st)) {
		TH_LOG("the child exited with %d before the SIGKILL", WEXITSTATUS(st));
	}
	TH_LOG("the child died %.3f s after SIGKILL", s);
	/* The bug is a hang of many seconds: 5 s is generous even under TCG with KASAN. */
	EXPECT_LT(s, 5.0);
}

int main(int argc, char **argv)
{
	int i, rc;

	if (argc == 5 && strcmp(argv[1], "--exec-child") == 0) {
		nr_ctl = atol(argv[3]);
		return exec_child(atoi(argv[2]), atoi(argv[4]));
	}
	read_syscalls();
	for (i = 0; i < 3; i++)
		have_saved[i] = sysctl_read(sysctls[i], &saved[i]) == 0;
	rc = test_harness_run(argc, argv);
	for (i = 0; i < 3; i++)
		if (have_saved[i])
			sysctl_write(sysctls[i], saved[i]);
	return rc;
}
