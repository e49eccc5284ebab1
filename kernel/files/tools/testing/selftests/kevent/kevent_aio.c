// SPDX-License-Identifier: GPL-2.0
/*
 * kevent_aio_sendfile() selftests (spec D18): the call's errnos, count 0, every byte of
 * 1000 concurrent transfers (AF_UNIX) and of one over TCP, a peer that stops reading or
 * closes (-EPIPE/-ECONNRESET, never SIGPIPE), REMOVE racing with the transfer and its
 * completion, the queue closed with transfers in flight (their sockets let go), and
 * fs.kevent.max_user_kevents (ENOSPC; every charge back once the requests are gone).
 *
 * The sixth number of /sys/kernel/kevent/syscalls is the call's; without it every test is
 * skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/time_types.h>
#include <linux/ukevent.h>

#include "../kselftest_harness.h"
#include "kevent_util.h"

#define REQUIRE_AIO() do { \
	if (nr_init < 0) \
		SKIP(return, "no /sys/kernel/kevent/syscalls (CONFIG_KEVENT=n?)"); \
	if (nr_aio < 0) \
		SKIP(return, "the kernel advertises five syscalls: no kevent_aio_sendfile"); \
} while (0)

#define EXPECT_ERRNO(err, call) do { \
	long __ret = (call); \
	int __err = errno; \
	EXPECT_EQ(-1, __ret); \
	EXPECT_EQ(err, __err); \
} while (0)

#define MIB (1024 * 1024)

static const struct __kernel_timespec zero_ts;

static long k_aio(int q, int sock, int in, unsigned long long off, unsigned long long count)
{
	return syscall(nr_aio, q, sock, in, off, count);
}

static unsigned char byte_at(size_t i)
{
	return (unsigned char)(i * 2654435761u >> 13);
}

/* An unlinked file in /tmp of @len pattern bytes, open read-only; -1 on failure. */
static int pattern_file(size_t len)
{
	char path[] = "/tmp/kevent-aio-XXXXXX";
	unsigned char buf[4096];
	size_t done = 0, i, n;
	int fd = mkstemp(path), rd;

	if (fd < 0)
		return -1;
	while (done < len) {
		n = len - done < sizeof(buf) ? len - done : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = byte_at(done + i);
		if (write(fd, buf, n) != (ssize_t)n)
			break;
		done += n;
	}
	rd = open(path, O_RDONLY | O_CLOEXEC);
	unlink(path);
	close(fd);
	return done == len ? rd : -1;
}

/* Whether @buf[0..n) is the file's bytes from @off. */
static int same(const unsigned char *buf, size_t n, size_t off)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (buf[i] != byte_at(off + i))
			return 0;
	return 1;
}

/* A stream socketpair: sv[0] blocking (the request's), sv[1] non-blocking (the reader's). */
static int pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	return fcntl(sv[1], F_SETFL, O_NONBLOCK);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * Reads non-blocking @fd until @want bytes are in @out (checked against the file from @off),
 * EOF or @limit seconds: the bytes read, or -1 if one differed.
 */
static long read_until(int fd, size_t want, size_t off, double limit)
{
	static unsigned char buf[65536];
	double end = now_s() + limit;
	size_t got = 0;
	ssize_t n;

	while (got < want && now_s() < end) {
		n = read(fd, buf, sizeof(buf));
		if (n == 0)
			break;
		if (n < 0) {
			usleep(1000);
			continue;
		}
		if (!same(buf, n, off + got))
			return -1;
		got += n;
	}
	return got;
}

/* The one event within @limit seconds, or type 0. */
static struct ukevent one_event(int q, double limit)
{
	struct __kernel_timespec t = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };
	double end = now_s() + limit;
	struct ukevent e;

	memset(&e, 0, sizeof(e));
	while (now_s() < end)
		if (k_get(q, 1, 1, &t, &e, 0) == 1)
			return e;
	memset(&e, 0, sizeof(e));
	return e;
}

static unsigned long long sent64(const struct ukevent *e)
{
	return e->ret_data[0] | (unsigned long long)e->ret_data[1] << 32;
}

static void raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

FIXTURE(aio) {
	int q;
	int file;
};

FIXTURE_SETUP(aio)
{
	self->q = -1;
	self->file = -1;
	if (nr_init < 0 || nr_aio < 0)
		return;
	self->q = k_init(NULL, 0, 0);
	ASSERT_LE(0, self->q);
	self->file = pattern_file(4 * MIB);
	ASSERT_LE(0, self->file);
}

FIXTURE_TEARDOWN(aio)
{
	if (self->q >= 0)
		close(self->q);
	if (self->file >= 0)
		close(self->file);
}

/* --- the call ------------------------------------------------------------------------- */

TEST(syscalls_lists_six)
{
	if (nr_init < 0)
		SKIP(return, "no /sys/kernel/kevent/syscalls (CONFIG_KEVENT=n?)");
	EXPECT_LT(0, nr_aio) {
		TH_LOG("/sys/kernel/kevent/syscalls has five numbers");
	}
	EXPECT_NE(nr_aio, nr_commit);
}

TEST_F(aio, errnos)
{
	int sv[2], dg[2], pfd[2], lone, lsn, wo, dir, notq;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct ukevent e;
	char path[] = "/tmp/kevent-aio-wo-XXXXXX";

	REQUIRE_AIO();
	ASSERT_EQ(0, pair(sv));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM, 0, dg));
	ASSERT_EQ(0, pipe(pfd));
	lone = socket(AF_UNIX, SOCK_STREAM, 0);
	ASSERT_LE(0, lone);
	lsn = socket(AF_UNIX, SOCK_STREAM, 0);
	ASSERT_LE(0, lsn);
	/* An abstract address: listening, never connected. */
	snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "kevent-aio-%d", getpid());
	ASSERT_EQ(0, bind(lsn, (void *)&sun, sizeof(sun)));
	ASSERT_EQ(0, listen(lsn, 1));
	/* mkstemp() opens for reading and writing: reopen write-only. */
	wo = mkstemp(path);
	ASSERT_LE(0, wo);
	close(wo);
	wo = open(path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, wo);
	unlink(path);
	dir = open("/tmp", O_RDONLY | O_DIRECTORY);
	ASSERT_LE(0, dir);
	notq = dup(pfd[0]);

	/* The queue. */
	EXPECT_ERRNO(EBADF, k_aio(-1, sv[0], self->file, 0, 1));
	EXPECT_ERRNO(EBADF, k_aio(999999, sv[0], self->file, 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(notq, sv[0], self->file, 0, 1));
	/* Closed files. */
	EXPECT_ERRNO(EBADF, k_aio(self->q, sv[0], 999999, 0, 1));
	EXPECT_ERRNO(EBADF, k_aio(self->q, 999999, self->file, 0, 1));
	EXPECT_ERRNO(EBADF, k_aio(self->q, -1, self->file, 0, 1));
	/* in_fd: not a regular file open for reading. */
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], pfd[0], 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], dir, 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], wo, 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], sv[0], 0, 1));
	/* sock_fd: not a connected stream socket. */
	EXPECT_ERRNO(EINVAL, k_aio(self->q, self->file, self->file, 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, pfd[1], self->file, 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, dg[0], self->file, 0, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, self->q, self->file, 0, 1));
	EXPECT_ERRNO(ENOTCONN, k_aio(self->q, lone, self->file, 0, 1));
	EXPECT_ERRNO(ENOTCONN, k_aio(self->q, lsn, self->file, 0, 1));
	/* The range: past the largest file offset (P36). */
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], self->file, ULLONG_MAX, 1));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], self->file, 1, LLONG_MAX));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], self->file, 0, ULLONG_MAX));
	EXPECT_ERRNO(EINVAL, k_aio(self->q, sv[0], self->file, (1ULL << 63), 0));
	/* AIO kevents come from the call only: ADD is -ENOSYS (D2). */
	e = uk(KEVENT_AIO, 1, KEVENT_MASK_ALL, 0);
	EXPECT_EQ(-ENOSYS, add1(self->q, e));
	/* Nothing was started. */
	EXPECT_EQ(0, k_get(self->q, 0, 1, &zero_ts, &e, 0));
	close(notq);
	close(dir);
	close(wo);
	close(lsn);
	close(lone);
	close(pfd[0]);
	close(pfd[1]);
	close(dg[0]);
	close(dg[1]);
	close(sv[0]);
	close(sv[1]);
}

TEST_F(aio, count_zero_and_ids)
{
	struct ukevent e;
	long id, id2;
	int sv[2];

	REQUIRE_AIO();
	ASSERT_EQ(0, pair(sv));
	id = k_aio(self->q, sv[0], self->file, 0, 0);
	/* A per-queue counter, never an address. */
	EXPECT_EQ(1, id);
	ASSERT_EQ(1, k_get(self->q, 1, 1, &zero_ts, &e, 0));
	EXPECT_EQ(KEVENT_AIO, e.type);
	EXPECT_EQ((__u64)id, e.id.raw_u64);
	EXPECT_EQ(KEVENT_MASK_ALL, e.event);
	EXPECT_EQ(KEVENT_RET_DONE, e.ret_flags);
	EXPECT_EQ(0ULL, sent64(&e));
	/* ONESHOT: gone. */
	EXPECT_EQ(-ENOENT, remove1(self->q, uk(KEVENT_AIO, id, 0, 0)));
	id2 = k_aio(self->q, sv[0], self->file, 4 * MIB, 10);
	EXPECT_EQ(id + 1, id2);
	e = one_event(self->q, 10);
	EXPECT_EQ((__u64)id2, e.id.raw_u64);
	EXPECT_EQ(0ULL, sent64(&e));
	close(sv[0]);
	close(sv[1]);
}

/* --- every byte ----------------------------------------------------------------------- */

#define NREQ 1000

struct xfer {
	int sv[2];
	long id;
	size_t off, len, got;
	int done;
};

TEST_F_TIMEOUT(aio, transfers_1000_byte_for_byte, 600)
{
	static struct xfer x[NREQ];
	static unsigned char buf[65536];
	struct ukevent ev[64];
	double end;
	int i, n, done = 0, bad = 0;

	REQUIRE_AIO();
	raise_nofile();
	srand(22);
	for (i = 0; i < NREQ; i++) {
		ASSERT_EQ(0, pair(x[i].sv)) {
			TH_LOG("socketpair %d: %s", i, strerror(errno));
		}
		x[i].off = rand() % (1 * MIB);
		x[i].len = i % 10 ? 1 + rand() % 16384 : 200000;
		x[i].id = k_aio(self->q, x[i].sv[0], self->file, x[i].off, x[i].len);
		ASSERT_LT(0, x[i].id) {
			TH_LOG("request %d: %s", i, strerror(errno));
		}
	}
	end = now_s() + 500;
	while (done < NREQ || bad) {
		int pending = 0;

		ASSERT_LT(now_s(), end) {
			TH_LOG("%d of %d completed", done, NREQ);
		}
		for (i = 0; i < NREQ; i++) {
			ssize_t r;

			while ((r = read(x[i].sv[1], buf, sizeof(buf))) > 0) {
				if (x[i].got + r > x[i].len ||
				    !same(buf, r, x[i].off + x[i].got))
					bad++;
				x[i].got += r;
			}
			pending += x[i].got < x[i].len;
		}
		ASSERT_EQ(0, bad);
		n = k_get(self->q, 0, 64, &zero_ts, ev, 0);
		ASSERT_LE(0, n);
		for (int j = 0; j < n; j++) {
			__u64 id = ev[j].id.raw_u64;

			ASSERT_EQ(KEVENT_AIO, ev[j].type);
			ASSERT_LT(0, id);
			ASSERT_GE(NREQ, id);
			/* Ids are 1..1000 in the order of the calls (a fresh queue). */
			i = id - 1;
			ASSERT_EQ((__u64)x[i].id, id);
			ASSERT_EQ(0, x[i].done);
			x[i].done = 1;
			ASSERT_EQ(KEVENT_RET_DONE, ev[j].ret_flags);
			ASSERT_EQ((unsigned long long)x[i].len, sent64(&ev[j]));
			done++;
		}
		if (done == NREQ && !pending)
			break;
		if (!n)
			usleep(1000);
	}
	for (i = 0; i < NREQ; i++) {
		EXPECT_EQ(x[i].len, x[i].got);
		close(x[i].sv[0]);
		close(x[i].sv[1]);
	}
	EXPECT_EQ(0, k_get(self->q, 0, 1, &zero_ts, ev, 0));
}

TEST_F_TIMEOUT(aio, tcp_4mib, 300)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int lsn, c, s;
	struct ukevent e;
	long id, got;

	REQUIRE_AIO();
	lsn = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lsn < 0)
		SKIP(return, "no AF_INET: %s", strerror(errno));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(0, bind(lsn, (void *)&a, sizeof(a)));
	ASSERT_EQ(0, listen(lsn, 1));
	ASSERT_EQ(0, getsockname(lsn, (void *)&a, &alen));
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_EQ(0, connect(c, (void *)&a, sizeof(a)));
	s = accept4(lsn, NULL, NULL, SOCK_CLOEXEC);
	ASSERT_LE(0, s);
	ASSERT_EQ(0, fcntl(c, F_SETFL, O_NONBLOCK));
	id = k_aio(self->q, s, self->file, 1, 4 * MIB - 1);
	ASSERT_LT(0, id);
	got = read_until(c, 4 * MIB - 1, 1, 240);
	EXPECT_EQ(4 * MIB - 1, got);
	e = one_event(self->q, 30);
	EXPECT_EQ((__u64)id, e.id.raw_u64);
	EXPECT_EQ(KEVENT_RET_DONE, e.ret_flags);
	EXPECT_EQ(4ULL * MIB - 1, sent64(&e));
	close(s);
	close(c);
	close(lsn);
}

/* --- slow and closed peers ------------------------------------------------------------ */

TEST_F_TIMEOUT(aio, slow_peer_waits_then_completes, 300)
{
	struct __kernel_timespec t = { .tv_nsec = 200 * 1000 * 1000 };
	struct ukevent e;
	int sv[2];
	long id;

	REQUIRE_AIO();
	ASSERT_EQ(0, pair(sv));
	id = k_aio(self->q, sv[0], self->file, 0, 4 * MIB);
	ASSERT_LT(0, id);
	/* 4 MiB never fit in a socket buffer: parked, no event. */
	EXPECT_EQ(0, k_get(self->q, 1, 1, &t, &e, 0));
	EXPECT_EQ(4 * MIB, read_until(sv[1], 4 * MIB, 0, 240));
	e = one_event(self->q, 30);
	EXPECT_EQ((__u64)id, e.id.raw_u64);
	EXPECT_EQ(4ULL * MIB, sent64(&e));
	close(sv[0]);
	close(sv[1]);
}

TEST_F_TIMEOUT(aio, peer_closes_epipe_no_sigpipe, 300)
{
	struct ukevent e;
	int sv[2];
	long id, got;
	int err;

	REQUIRE_AIO();
	/* The default action would kill this test. */
	signal(SIGPIPE, SIG_DFL);
	ASSERT_EQ(0, pair(sv));
	id = k_aio(self->q, sv[0], self->file, 0, 4 * MIB);
	ASSERT_LT(0, id);
	got = read_until(sv[1], 65536, 0, 60);
	ASSERT_EQ(65536, got);
	close(sv[1]);
	e = one_event(self->q, 60);
	ASSERT_EQ((__u64)id, e.id.raw_u64);
	EXPECT_EQ(KEVENT_RET_BROKEN | KEVENT_RET_DONE, e.ret_flags);
	err = -(int)e.ret_data[1];
	EXPECT_TRUE(err == EPIPE || err == ECONNRESET) {
		TH_LOG("ret_data[1] = %d", (int)e.ret_data[1]);
	}
	EXPECT_LE(65536, e.ret_data[0]);
	EXPECT_GT(4 * MIB, e.ret_data[0]);
	close(sv[0]);
}

/* --- cancellation --------------------------------------------------------------------- */

struct drain {
	int fd;
	size_t off;
	long got;		/* -1: a byte differed */
};

/* Reads the blocking @fd to EOF, checking the bytes. */
static void *drain_thread(void *arg)
{
	static __thread unsigned char buf[65536];
	struct drain *d = arg;
	ssize_t n;

	while ((n = read(d->fd, buf, sizeof(buf))) > 0) {
		if (d->got < 0 || !same(buf, n, d->off + d->got))
			d->got = -1;
		else
			d->got += n;
	}
	return NULL;
}

/*
 * REMOVE at a random moment of a transfer that runs (a thread drains the peer): of 4 KiB
 * (likely complete already: REMOVE races with the completion), 64 KiB and 1 MiB. REMOVE
 * always finds the request (its event was not taken), no event follows, and the bytes
 * that arrived are a prefix of the range.
 */
TEST_F_TIMEOUT(aio, remove_races_with_transfer_and_completion, 600)
{
	static const size_t lens[] = { 4096, 65536, MIB };
	struct __kernel_timespec t = { .tv_nsec = 20 * 1000 * 1000 };
	struct ukevent e;
	int i;

	REQUIRE_AIO();
	srand(18);
	for (i = 0; i < 300; i++) {
		struct drain d = { .off = rand() % 4096 };
		size_t len = lens[i % 3];
		pthread_t th;
		int sv[2], spin;
		long id;

		ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
		d.fd = sv[1];
		ASSERT_EQ(0, pthread_create(&th, NULL, drain_thread, &d));
		id = k_aio(self->q, sv[0], self->file, d.off, len);
		ASSERT_LT(0, id);
		for (spin = rand() % 20000; spin > 0; spin--)
			__asm__ __volatile__("" ::: "memory");
		ASSERT_EQ(0, remove1(self->q, uk(KEVENT_AIO, id, 0, 0))) {
			TH_LOG("iteration %d", i);
		}
		ASSERT_EQ(0, k_get(self->q, 1, 1, &t, &e, 0)) {
			TH_LOG("iteration %d: an event after REMOVE", i);
		}
		close(sv[0]);
		pthread_join(th, NULL);
		close(sv[1]);
		ASSERT_LE(0, d.got);
		ASSERT_GE((long)len, d.got);
	}
}

/*
 * The queue closed with transfers in flight, some parked on a full socket, some running:
 * every request lets go of its socket (the peer sees EOF once the test closed its end too)
 * and what arrived is a prefix of the range. Repeated at random moments.
 */
TEST_F_TIMEOUT(aio, close_queue_in_flight, 600)
{
	enum { N = 32 };
	int round;

	REQUIRE_AIO();
	srand(9);
	for (round = 0; round < 20; round++) {
		struct drain d[N];
		pthread_t th[N];
		int sv[N][2], q, i, spin;

		q = k_init(NULL, 0, 0);
		ASSERT_LE(0, q);
		for (i = 0; i < N; i++) {
			ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]));
			d[i].fd = sv[i][1];
			d[i].off = 0;
			d[i].got = 0;
			ASSERT_LT(0, k_aio(q, sv[i][0], self->file, 0, 4 * MIB));
			/* Odd ones have a reader from the start; even ones stay parked. */
			if (i % 2)
				ASSERT_EQ(0, pthread_create(&th[i], NULL, drain_thread, &d[i]));
		}
		for (spin = rand() % 200000; spin > 0; spin--)
			__asm__ __volatile__("" ::: "memory");
		close(q);
		for (i = 0; i < N; i++) {
			close(sv[i][0]);
			if (!(i % 2))
				ASSERT_EQ(0, pthread_create(&th[i], NULL, drain_thread, &d[i]));
		}
		/* EOF for every reader: no request holds a socket any more. */
		for (i = 0; i < N; i++) {
			pthread_join(th[i], NULL);
			close(sv[i][1]);
			ASSERT_LE(0, d[i].got);
			/* A parked request sent no more than the socket buffer held. */
			if (!(i % 2))
				ASSERT_GT(4 * MIB, d[i].got) {
					TH_LOG("round %d request %d: all of it went out", round, i);
				}
		}
	}
}

/* --- the per-user limit --------------------------------------------------------------- */

#define LIMIT_AIO 16

/* Starts @n 4 MiB requests on @q to peers that do not read: how many started. */
static int start_parked(int q, int file, int (*sv)[2], int n, int *err)
{
	int i;

	*err = 0;
	for (i = 0; i < n; i++) {
		if (k_aio(q, sv[i][0], file, 0, 4 * MIB) < 0) {
			*err = errno;
			break;
		}
	}
	return i;
}

/* Retries k_aio() for up to 10 s while it fails with ENOSPC (a running request being let go). */
static long aio_retry(int q, int sock, int file)
{
	double end = now_s() + 10;
	long id;

	while ((id = k_aio(q, sock, file, 0, 4 * MIB)) < 0 && errno == ENOSPC &&
	       now_s() < end)
		usleep(10000);
	return id;
}

/*
 * As uid 65534 with max_user_kevents = LIMIT_AIO: that many requests start, the next one is
 * ENOSPC; REMOVE gives its charge back; closing the queue gives every charge back (a new
 * queue takes LIMIT_AIO again).
 */
static int unpriv_aio(void *arg)
{
	int file = *(int *)arg, sv[LIMIT_AIO + 2][2], q, i, err, n;

	for (i = 0; i < LIMIT_AIO + 2; i++)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]))
			return 10;
	q = k_init(NULL, 0, 0);
	if (q < 0)
		return 11;
	n = start_parked(q, file, sv, LIMIT_AIO + 1, &err);
	if (n != LIMIT_AIO)
		return 1;
	if (err != ENOSPC)
		return 2;
	if (remove1(q, uk(KEVENT_AIO, 1, 0, 0)) != 0)
		return 3;
	if (aio_retry(q, sv[LIMIT_AIO][0], file) < 0)
		return 4;
	if (k_aio(q, sv[LIMIT_AIO + 1][0], file, 0, 4 * MIB) >= 0 || errno != ENOSPC)
		return 5;
	close(q);
	q = k_init(NULL, 0, 0);
	if (q < 0)
		return 12;
	for (i = 0; i < LIMIT_AIO; i++)
		if (aio_retry(q, sv[i][0], file) < 0)
			return 6;
	if (k_aio(q, sv[LIMIT_AIO][0], file, 0, 4 * MIB) >= 0 || errno != ENOSPC)
		return 7;
	close(q);
	return 0;
}

TEST_F_TIMEOUT(aio, limit_max_user_kevents_enospc, 300)
{
	long v;
	int r;

	REQUIRE_AIO();
	ASSERT_EQ(0, sysctl_read("max_user_kevents", &v));
	ASSERT_EQ(0, sysctl_write("max_user_kevents", LIMIT_AIO));
	r = as_unprivileged(unpriv_aio, &self->file);
	ASSERT_EQ(0, sysctl_write("max_user_kevents", v));
	EXPECT_EQ(0, r);
}

int main(int argc, char **argv)
{
	read_syscalls();
	return test_harness_run(argc, argv);
}
