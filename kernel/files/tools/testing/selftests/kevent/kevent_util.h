/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the kevent selftests share: the raw system calls (numbers read from
 * /sys/kernel/kevent/syscalls, as userspace detection does), ukevent builders, one-entry
 * ADD/REMOVE, the sysctls under /proc/sys/fs/kevent/, and running a function as uid 65534.
 */
#ifndef KEVENT_UTIL_H
#define KEVENT_UTIL_H

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/time_types.h>
#include <linux/ukevent.h>

#define UNPRIV_UID 65534
#define SYSCTL_DIR "/proc/sys/fs/kevent/"

static long nr_init = -1, nr_ctl, nr_get, nr_wait, nr_commit, nr_aio = -1;

/*
 * 0, or -1 when the kernel does not advertise kevent (nr_init stays -1). A sixth number is
 * kevent_aio_sendfile()'s (nr_aio stays -1 without it).
 */
static inline int read_syscalls(void)
{
	FILE *f = fopen("/sys/kernel/kevent/syscalls", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%ld %ld %ld %ld %ld %ld", &nr_init, &nr_ctl, &nr_get, &nr_wait,
		   &nr_commit, &nr_aio);
	fclose(f);
	if (n == 5)
		nr_aio = -1;
	if (n != 5 && n != 6) {
		nr_init = -1;
		return -1;
	}
	return 0;
}

/* The raw calls: -1 and errno on failure (syscall(2)). */
static inline int k_init(struct kevent_ring *ring, unsigned int num, unsigned int flags)
{
	return syscall(nr_init, ring, num, flags);
}

static inline int k_ctl(int fd, unsigned int cmd, unsigned int num, struct ukevent *arg)
{
	return syscall(nr_ctl, fd, cmd, num, arg);
}

static inline int k_get(int fd, unsigned int min_nr, unsigned int max_nr,
			const struct __kernel_timespec *t, struct ukevent *buf, unsigned int flags)
{
	return syscall(nr_get, fd, min_nr, max_nr, t, buf, flags);
}

static inline int k_wait(int fd, unsigned int num, unsigned int old_uidx,
			 const struct __kernel_timespec *t, unsigned int flags)
{
	return syscall(nr_wait, fd, num, old_uidx, t, flags);
}

static inline int k_commit(int fd, unsigned int new_uidx, unsigned int over)
{
	return syscall(nr_commit, fd, new_uidx, over);
}

static inline struct ukevent uk(__u32 type, __u64 id, __u32 event, __u32 req)
{
	struct ukevent e;

	memset(&e, 0, sizeof(e));
	e.id.raw_u64 = id;
	e.type = type;
	e.event = event;
	e.req_flags = req;
	return e;
}

static inline struct ukevent uk_fd(__u32 type, int fd, __u32 event)
{
	struct ukevent e = uk(type, 0, event, 0);

	e.id.raw[0] = fd;
	return e;
}

/*
 * ADD of one entry: 0 registered, 1 ready at once (written back done), the entry's -errno
 * when it failed, or -1000 - errno when the call itself failed.
 */
static inline int add1(int q, struct ukevent e)
{
	int n = k_ctl(q, KEVENT_CTL_ADD, 1, &e);

	if (n < 0)
		return -1000 - errno;
	if (n == 0)
		return 0;
	if (e.ret_flags & KEVENT_RET_BROKEN)
		return (int)e.ret_data[1];
	return 1;
}

/* REMOVE of one entry: 0 found, the entry's -errno otherwise. */
static inline int remove1(int q, struct ukevent e)
{
	if (k_ctl(q, KEVENT_CTL_REMOVE, 1, &e) != 0)
		return -1000 - errno;
	if (e.ret_flags & KEVENT_RET_BROKEN)
		return (int)e.ret_data[1];
	return 0;
}

/*
 * A queue whose one kevent is the key an all-zero ukevent names: SOCKET (type 0) on fd 0,
 * made a socket here. An array of zero pages is then 2^31 READY entries of one existing
 * key, which cost their caller nothing (issue 20 finding 7). The queue, or -1.
 */
static inline int zero_key_queue(void)
{
	int sv[2], q;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) || dup2(sv[0], 0) != 0)
		return -1;
	q = k_init(NULL, 0, 0);
	if (q < 0 || add1(q, uk_fd(KEVENT_SOCKET, 0, KEVENT_SOCKET_RECV)) != 0)
		return -1;
	return q;
}

/* fopen() of /proc/sys/fs/kevent/NAME. */
static inline FILE *sysctl_open(const char *name, const char *mode)
{
	char path[128];

	snprintf(path, sizeof(path), SYSCTL_DIR "%s", name);
	return fopen(path, mode);
}

static inline int sysctl_read(const char *name, long *v)
{
	FILE *f = sysctl_open(name, "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "%ld", v);
	fclose(f);
	return n == 1 ? 0 : -1;
}

static inline int sysctl_write(const char *name, long v)
{
	FILE *f = sysctl_open(name, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", v) > 0;
	return (fclose(f) == 0 && ok) ? 0 : -1;
}

/*
 * Runs fn(arg) in a child process as uid/gid 65534; returns its exit status (0 = passed), or
 * 128 + signal.
 */
static inline int as_unprivileged(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return 255;
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(UNPRIV_UID) || setuid(UNPRIV_UID))
			_exit(254);
		_exit(fn(arg));
	}
	if (waitpid(pid, &st, 0) != pid)
		return 255;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

#endif /* KEVENT_UTIL_H */
