// SPDX-License-Identifier: GPL-2.0
/*
 * kevent selftests of the asynchronous ring (decision P38): kevent_init(ring, num,
 * KEVENT_INIT_ASYNC_RING). Layout and every EINVAL/EFAULT/ENOMEM of kevent_init, events
 * that appear in the ring with no kevent system call (a socket write, a timer, READY from
 * another thread), a full ring that parks events for kevent_wait, a bad ring_uidx, many
 * producers and one consumer counting every event once, ONESHOT posted once, close while
 * producers run, and a forked child's copy (EBADF).
 *
 * The consumer here is the one P38 describes: load-acquire ring_kidx, read the slots up to
 * it, store-release ring_uidx. Spins are bounded (a hang fails after seconds, never a
 * timed assertion of speed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

#define EXPECT_ERRNO(err, call) do { \
	int __ret = (call), __err = errno; \
	EXPECT_EQ(-1, __ret); \
	EXPECT_EQ(err, __err); \
} while (0)

#define GUARD 0xab
#define PAGE 4096UL

static const struct __kernel_timespec zero_ts;
static const struct __kernel_timespec second_ts = { .tv_sec = 1 };

/* A ring of @n entries at the start of a mapping filled with GUARD, and its consumer. */
struct aring {
	struct kevent_ring *ring;
	struct kevent_ring_tail *tail;
	unsigned int n;
	unsigned int uidx;		/* the consumer's own index */
	size_t len, map;
};

static size_t aring_bytes(unsigned int n)
{
	return 8 + (size_t)n * sizeof(struct ukevent) + sizeof(struct kevent_ring_tail);
}

/* 0, or -1 (mmap failed). The mapping has at least 64 guard bytes after the tail. */
static int aring_map(struct aring *a, unsigned int n)
{
	void *m;

	memset(a, 0, sizeof(*a));
	a->n = n;
	a->len = aring_bytes(n);
	a->map = (a->len + 64 + PAGE - 1) & ~(PAGE - 1);
	m = mmap(NULL, a->map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	memset(m, GUARD, a->map);
	a->ring = m;
	a->tail = (struct kevent_ring_tail *)&a->ring->event[n];
	return 0;
}

static void aring_unmap(struct aring *a)
{
	munmap(a->ring, a->map);
}

/* Whether every byte after the tail is still GUARD (nothing written outside the ring). */
static int aring_guard_intact(const struct aring *a)
{
	const unsigned char *p = (const unsigned char *)a->ring;
	size_t i;

	for (i = a->len; i < a->map; i++)
		if (p[i] != GUARD)
			return 0;
	return 1;
}

static unsigned int aring_kidx(const struct aring *a)
{
	return __atomic_load_n(&a->ring->ring_kidx, __ATOMIC_ACQUIRE);
}

/* The consumer releases the slots it read. */
static void aring_release(struct aring *a)
{
	__atomic_store_n(&a->tail->ring_uidx, a->uidx, __ATOMIC_RELEASE);
}

/* Takes the next unread event into *e; 0 if the ring is empty. */
static int aring_take(struct aring *a, struct ukevent *e)
{
	if (a->uidx == aring_kidx(a))
		return 0;
	*e = a->ring->event[a->uidx];
	a->uidx = a->uidx + 1 == a->n ? 0 : a->uidx + 1;
	return 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Spins (no system call but the clock's vDSO) until ring_kidx != @from; 0 after 5 s. */
static int aring_spin(const struct aring *a, unsigned int from)
{
	double end = now_s() + 5;

	while (aring_kidx(a) == from)
		if (now_s() > end)
			return 0;
	return 1;
}

/*
 * The consumer's next look: spins a while; if nothing came (the ring filled while this
 * thread was not running, and the producer parked the rest in the queue, P38), kevent_wait
 * moves what is parked, then spins again. 0 if nothing came for 5 s.
 */
static int aring_next(int q, const struct aring *a)
{
	double end = now_s() + 0.2;

	while (aring_kidx(a) == a->uidx)
		if (now_s() > end)
			break;
	if (aring_kidx(a) != a->uidx)
		return 1;
	if (k_wait(q, a->n, a->uidx, &second_ts, 0) < 0)
		return 0;
	return aring_spin(a, a->uidx);
}

static int async_queue(struct aring *a, unsigned int n)
{
	if (aring_map(a, n))
		return -1;
	return k_init(a->ring, n, KEVENT_INIT_ASYNC_RING);
}

static int ready1(int q, __u64 id)
{
	struct ukevent e = uk(KEVENT_UNOTIFY, id, 0, 0);

	return k_ctl(q, KEVENT_CTL_READY, 1, &e);
}

/* --- kevent_init -------------------------------------------------------------------- */

TEST(p38_init_layout_zeroed_and_nothing_else_written)
{
	struct ukevent buf[1];
	struct aring a;
	unsigned int i;
	int q;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, aring_map(&a, 8));
	q = k_init(a.ring, 8, KEVENT_INIT_ASYNC_RING);
	ASSERT_LE(0, q);
	EXPECT_EQ(0, a.ring->ring_kidx);
	EXPECT_EQ(0, a.ring->ring_over);
	EXPECT_EQ(0, a.tail->ring_uidx);
	EXPECT_EQ(0, a.tail->ring_resv);
	EXPECT_EQ(8 + 8 * 40, (char *)a.tail - (char *)a.ring);
	/* The slots are the caller's until an event is written. */
	for (i = 0; i < 8 * sizeof(struct ukevent); i++)
		ASSERT_EQ(GUARD, ((unsigned char *)a.ring->event)[i]);
	EXPECT_TRUE(aring_guard_intact(&a));
	/* Its events are read from the ring: get_events is refused. */
	EXPECT_ERRNO(EINVAL, k_get(q, 0, 1, &zero_ts, buf, 0));
	close(q);
	aring_unmap(&a);
}

TEST(p38_init_einval_efault)
{
	struct aring a;
	void *m;
	int q;

	REQUIRE_KEVENT();
	ASSERT_EQ(0, aring_map(&a, 4));
	EXPECT_ERRNO(EINVAL, k_init(NULL, 4, KEVENT_INIT_ASYNC_RING));
	EXPECT_ERRNO(EINVAL, k_init(NULL, 0, KEVENT_INIT_ASYNC_RING));
	EXPECT_ERRNO(EINVAL, k_init(a.ring, 0, KEVENT_INIT_ASYNC_RING));
	EXPECT_ERRNO(EINVAL, k_init(a.ring, 1, KEVENT_INIT_ASYNC_RING));
	EXPECT_ERRNO(EINVAL, k_init(a.ring, KEVENT_RING_ASYNC_MAX + 1, KEVENT_INIT_ASYNC_RING));
	EXPECT_ERRNO(EINVAL, k_init((void *)((char *)a.ring + 4), 2, KEVENT_INIT_ASYNC_RING));
	/* D1: every other bit is still an error. */
	EXPECT_ERRNO(EINVAL, k_init(a.ring, 4, KEVENT_INIT_ASYNC_RING | 2));
	EXPECT_ERRNO(EINVAL, k_init(a.ring, 4, 2));
	EXPECT_TRUE(aring_guard_intact(&a));
	aring_unmap(&a);

	/* Read-only, unmapped, and mapped only in part (the tail in a hole). */
	m = mmap(NULL, 3 * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	EXPECT_ERRNO(EFAULT, k_init(m, 4, KEVENT_INIT_ASYNC_RING));
	ASSERT_EQ(0, mprotect(m, PAGE, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, munmap((char *)m + PAGE, PAGE));
	/* 102 entries fit in the first page, 103 need the unmapped second one. */
	EXPECT_ERRNO(EFAULT, k_init(m, 103, KEVENT_INIT_ASYNC_RING));
	q = k_init(m, 102, KEVENT_INIT_ASYNC_RING);
	EXPECT_LE(0, q);
	close(q);
	ASSERT_EQ(0, munmap((char *)m + 2 * PAGE, PAGE));
	EXPECT_ERRNO(EFAULT, k_init((void *)((char *)m + PAGE), 4, KEVENT_INIT_ASYNC_RING));
	munmap(m, PAGE);
}

/* As uid 65534 with RLIMIT_MEMLOCK of one page: one ring, not two; close uncharges. */
static int memlock_child(void *arg)
{
	struct rlimit rl = { .rlim_cur = PAGE, .rlim_max = PAGE };
	struct aring a, b;
	int q1, q2;

	(void)arg;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 10;
	if (aring_map(&a, 4) || aring_map(&b, 4))
		return 11;
	q1 = k_init(a.ring, 4, KEVENT_INIT_ASYNC_RING);
	if (q1 < 0)
		return 12;
	q2 = k_init(b.ring, 4, KEVENT_INIT_ASYNC_RING);
	if (q2 >= 0 || errno != ENOMEM)
		return 13;
	/* Nothing was pinned or zeroed by the refused call. */
	if (b.ring->ring_kidx == 0 || !aring_guard_intact(&b))
		return 14;
	close(q1);
	q2 = k_init(b.ring, 4, KEVENT_INIT_ASYNC_RING);
	if (q2 < 0)
		return 15;
	close(q2);
	rl.rlim_cur = 0;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 16;
	if (k_init(a.ring, 4, KEVENT_INIT_ASYNC_RING) >= 0 || errno != ENOMEM)
		return 17;
	/* A queue without the flag pins nothing and is not charged. */
	q1 = k_init(a.ring, 4, 0);
	if (q1 < 0)
		return 18;
	close(q1);
	return 0;
}

TEST(p38_init_enomem_over_rlimit_memlock)
{
	REQUIRE_KEVENT();
	EXPECT_EQ(0, as_unprivileged(memlock_child, NULL));
}

/* --- events in the ring with no system call ----------------------------------------- */

TEST(p38_socket_write_appears_in_the_ring)
{
	struct aring a;
	struct ukevent e;
	int q, sv[2];

	REQUIRE_KEVENT();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	q = async_queue(&a, 8);
	ASSERT_LE(0, q);
	e = uk_fd(KEVENT_SOCKET, sv[0], KEVENT_SOCKET_RECV);
	e.req_flags = KEVENT_REQ_ET;
	e.user[0] = 77;
	ASSERT_EQ(0, add1(q, e));
	ASSERT_EQ(1, write(sv[1], "x", 1));
	/* The write's wake-up posted it: no kevent call between. */
	ASSERT_TRUE(aring_spin(&a, 0));
	ASSERT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(KEVENT_SOCKET, e.type);
	EXPECT_EQ((__u32)sv[0], e.id.raw[0]);
	EXPECT_EQ(77, e.user[0]);
	EXPECT_TRUE(e.ret_data[0] & KEVENT_SOCKET_RECV);
	EXPECT_EQ(0, e.ret_flags);
	EXPECT_EQ(0, aring_take(&a, &e));
	aring_release(&a);
	/* Another edge, another event. */
	ASSERT_EQ(1, write(sv[1], "y", 1));
	ASSERT_TRUE(aring_spin(&a, 1));
	EXPECT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(KEVENT_SOCKET, e.type);
	EXPECT_TRUE(aring_guard_intact(&a));
	close(q);
	close(sv[0]);
	close(sv[1]);
	aring_unmap(&a);
}

TEST(p38_timer_fires_while_the_consumer_spins)
{
	struct aring a;
	struct ukevent e;
	unsigned int seen = 0, n = 0;
	int q;

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);
	ASSERT_LE(0, q);
	e = uk(KEVENT_TIMER, 0, 0, 0);
	e.id.raw[1] = 5 * 1000 * 1000;	/* every 5 ms */
	ASSERT_EQ(0, add1(q, e));
	/* Three postings of the periodic timer, read and released with no system call. */
	while (n < 3) {
		ASSERT_TRUE(aring_next(q, &a));
		while (aring_take(&a, &e)) {
			EXPECT_EQ(KEVENT_TIMER, e.type);
			EXPECT_LE(1, e.ret_data[1]);
			EXPECT_EQ(0, e.ret_flags);
			seen += e.ret_data[1];
			n++;
		}
		aring_release(&a);
	}
	EXPECT_LE(3, seen);
	close(q);
	aring_unmap(&a);
}

static void *ready_thread(void *arg)
{
	int *p = arg;

	usleep(20000);
	ready1(p[0], p[1]);
	return NULL;
}

TEST(p38_ready_from_another_thread_and_wait_wakes)
{
	struct aring a;
	struct __kernel_timespec five = { .tv_sec = 5 };
	struct ukevent e;
	pthread_t t;
	int q, r, arg[2];

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 5, 0, 0)));
	arg[0] = q;
	arg[1] = 5;
	/* A READY from another thread appears without a call of this one. */
	ASSERT_EQ(0, pthread_create(&t, NULL, ready_thread, arg));
	ASSERT_TRUE(aring_spin(&a, 0));
	pthread_join(t, NULL);
	ASSERT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(KEVENT_UNOTIFY, e.type);
	EXPECT_EQ(5, e.id.raw_u64);
	EXPECT_EQ(1, e.ret_data[0]);
	/* Unread events, or a stale old_uidx: 0 at once. */
	EXPECT_EQ(0, k_wait(q, 4, 0, &second_ts, 0));
	aring_release(&a);
	EXPECT_EQ(0, k_wait(q, 4, 0, &second_ts, 0));
	/* The ring is empty at uidx 1: the wait sleeps until the post, and counts it. */
	ASSERT_EQ(0, pthread_create(&t, NULL, ready_thread, arg));
	r = k_wait(q, 4, 1, &five, 0);
	/* 0 only if the post came before the call (then it is in the ring). */
	EXPECT_TRUE(r == 1 || (r == 0 && aring_kidx(&a) != 1));
	pthread_join(t, NULL);
	EXPECT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(5, e.id.raw_u64);
	aring_release(&a);
	/* Nothing more: a zero timeout returns 0. */
	EXPECT_EQ(0, k_wait(q, 4, 2, &zero_ts, 0));
	close(q);
	aring_unmap(&a);
}

TEST(p38_pollin_while_the_ring_holds_unread_events)
{
	struct aring a;
	struct ukevent e;
	struct pollfd p;
	int q;

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 1, 0, 0)));
	p.fd = q;
	p.events = POLLIN;
	EXPECT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(1, ready1(q, 1));
	EXPECT_EQ(1, poll(&p, 1, 0));
	EXPECT_TRUE(p.revents & POLLIN);
	ASSERT_EQ(1, aring_take(&a, &e));
	aring_release(&a);
	EXPECT_EQ(0, poll(&p, 1, 0));
	close(q);
	aring_unmap(&a);
}

/* --- full ring, bad index ----------------------------------------------------------- */

TEST(p38_full_ring_parks_and_wait_moves_them_later)
{
	struct ukevent add[10], e;
	unsigned int seen[10] = { 0 }, i, total = 0, sum = 0, rounds = 0;
	struct aring a;
	int q, r;

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);	/* 3 usable slots (D12) */
	ASSERT_LE(0, q);
	for (i = 0; i < 10; i++)
		ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, i, 0, 0)));
	for (i = 0; i < 10; i++)
		add[i] = uk(KEVENT_UNOTIFY, i, 0, 0);
	ASSERT_EQ(10, k_ctl(q, KEVENT_CTL_READY, 10, add));
	EXPECT_EQ(3, aring_kidx(&a));
	/* More READY of the parked ones coalesce (D8): counted, not dropped. */
	ASSERT_EQ(10, k_ctl(q, KEVENT_CTL_READY, 10, add));
	while (sum < 20 && rounds++ < 20) {
		while (aring_take(&a, &e)) {
			ASSERT_GT(10, e.id.raw_u64);
			seen[e.id.raw_u64] += e.ret_data[0];
			sum += e.ret_data[0];
			total++;
		}
		aring_release(&a);
		r = k_wait(q, 4, a.uidx, &zero_ts, 0);
		ASSERT_LE(0, r);
	}
	/* 3 posted, 3 of them queued again by the second READY, 7 parked twice over. */
	EXPECT_EQ(13, total);
	for (i = 0; i < 10; i++)
		EXPECT_EQ(2, seen[i]);
	EXPECT_EQ(0, k_wait(q, 4, a.uidx, &zero_ts, 0));
	EXPECT_EQ(a.uidx, aring_kidx(&a));
	EXPECT_TRUE(aring_guard_intact(&a));
	close(q);
	aring_unmap(&a);
}

TEST(p38_bad_ring_uidx_is_einval_and_nothing_is_written)
{
	struct aring a;
	struct ukevent e;
	unsigned char copy[8 + 4 * 40];
	int q;

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 1, 0, 0)));
	a.tail->ring_uidx = 1000;
	memcpy(copy, a.ring, sizeof(copy));
	EXPECT_ERRNO(EINVAL, k_wait(q, 4, 1000, &zero_ts, 0));
	EXPECT_ERRNO(EINVAL, k_wait(q, 4, 0, &zero_ts, 0));
	EXPECT_ERRNO(EINVAL, k_commit(q, 0, 0));
	/* A post finds the ring "full": it stays queued, nothing is written. */
	ASSERT_EQ(1, ready1(q, 1));
	EXPECT_EQ(0, memcmp(copy, a.ring, sizeof(copy)));
	EXPECT_TRUE(aring_guard_intact(&a));
	EXPECT_EQ(1000, a.tail->ring_uidx);
	/* A sane index again: kevent_wait moves the parked event. */
	a.tail->ring_uidx = 0;
	EXPECT_EQ(1, k_wait(q, 4, 0, &zero_ts, 0));
	ASSERT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(1, e.id.raw_u64);
	/* kevent_commit takes ring_uidx as the consumer index and stores there. */
	EXPECT_EQ(1, k_commit(q, 1, 0));
	EXPECT_EQ(1, a.tail->ring_uidx);
	EXPECT_EQ(0, k_commit(q, 1, 0));
	close(q);
	aring_unmap(&a);
}

/* --- ONESHOT, many producers, close, fork ------------------------------------------- */

TEST(p38_oneshot_posted_once_and_unregistered)
{
	struct aring a;
	struct ukevent e;
	int q;

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 9, 0, KEVENT_REQ_ONESHOT)));
	ASSERT_EQ(1, ready1(q, 9));
	ASSERT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(9, e.id.raw_u64);
	EXPECT_EQ(KEVENT_RET_DONE, e.ret_flags);
	aring_release(&a);
	/* Gone: READY finds nothing, REMOVE says ENOENT, nothing more in the ring. */
	EXPECT_EQ(0, ready1(q, 9));
	EXPECT_EQ(-ENOENT, remove1(q, uk(KEVENT_UNOTIFY, 9, 0, 0)));
	EXPECT_EQ(0, k_wait(q, 4, a.uidx, &zero_ts, 0));
	EXPECT_EQ(0, aring_take(&a, &e));
	/* A ONESHOT timer, from its hrtimer callback. */
	e = uk(KEVENT_TIMER, 0, 0, KEVENT_REQ_ONESHOT);
	e.id.raw[1] = 1000 * 1000;
	ASSERT_EQ(0, add1(q, e));
	ASSERT_TRUE(aring_spin(&a, a.uidx));
	ASSERT_EQ(1, aring_take(&a, &e));
	EXPECT_EQ(KEVENT_TIMER, e.type);
	EXPECT_EQ(KEVENT_RET_DONE, e.ret_flags);
	aring_release(&a);
	usleep(20000);
	EXPECT_EQ(0, aring_take(&a, &e));
	e = uk(KEVENT_TIMER, 0, 0, 0);
	e.id.raw[1] = 1000 * 1000;
	EXPECT_EQ(-ENOENT, remove1(q, e));
	close(q);
	aring_unmap(&a);
}

#define PRODUCERS 4
#define PER_PRODUCER 5000

struct producer {
	int q;
	__u64 id;
	int stop_on_error;
};

static int producers_done;

static void *producer_thread(void *arg)
{
	struct producer *p = arg;
	int i;

	for (i = 0; i < PER_PRODUCER; i++)
		if (ready1(p->q, p->id) != 1 && p->stop_on_error)
			break;
	__atomic_add_fetch(&producers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Only for the longer timeouts of TEST_F_TIMEOUT. */
FIXTURE(ring) {
	int unused;
};

FIXTURE_SETUP(ring)
{
}

FIXTURE_TEARDOWN(ring)
{
}

TEST_F_TIMEOUT(ring, p38_concurrent_producers_one_consumer_counts_each_once, 120)
{
	struct producer p[PRODUCERS];
	pthread_t t[PRODUCERS];
	unsigned long count[PRODUCERS] = { 0 };
	struct __kernel_timespec ms = { .tv_nsec = 10 * 1000 * 1000 };
	unsigned long sum = 0;
	double end = now_s() + 90;
	struct aring a;
	struct ukevent e;
	int q, i, idle = 0;

	REQUIRE_KEVENT();
	producers_done = 0;
	q = async_queue(&a, 64);
	ASSERT_LE(0, q);
	for (i = 0; i < PRODUCERS; i++) {
		ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, i, 0, 0)));
		p[i].q = q;
		p[i].id = i;
		p[i].stop_on_error = 1;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, producer_thread, &p[i]));
	}
	/*
	 * Read what is there; when empty, kevent_wait (which also moves parked events). Ends
	 * when every event was counted, or when the producers are done and three waits in a
	 * row found nothing (then the counts below say what is missing).
	 */
	while (sum < PRODUCERS * PER_PRODUCER && idle < 3 && now_s() < end) {
		int got = 0;

		while (aring_take(&a, &e)) {
			ASSERT_GT(PRODUCERS, e.id.raw_u64);
			count[e.id.raw_u64] += e.ret_data[0];
			sum += e.ret_data[0];
			got = 1;
		}
		aring_release(&a);
		if (got)
			continue;
		if (k_wait(q, 64, a.uidx, &ms, 0) <= 0 && aring_kidx(&a) == a.uidx &&
		    __atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) == PRODUCERS)
			idle++;
		else
			idle = 0;
	}
	for (i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	/* After the producers: whatever is parked is moved now. */
	while (k_wait(q, 64, a.uidx, &zero_ts, 0) > 0 || aring_kidx(&a) != a.uidx) {
		while (aring_take(&a, &e))
			count[e.id.raw_u64] += e.ret_data[0];
		aring_release(&a);
	}
	for (i = 0; i < PRODUCERS; i++)
		EXPECT_EQ(PER_PRODUCER, count[i]);
	EXPECT_TRUE(aring_guard_intact(&a));
	close(q);
	aring_unmap(&a);
}

TEST_F_TIMEOUT(ring, p38_close_while_producers_run, 120)
{
	struct producer p[PRODUCERS];
	pthread_t t[PRODUCERS];
	struct aring a;
	struct ukevent e;
	int q, i, sv[2];

	REQUIRE_KEVENT();
	/* Nobody reads sv[0]: a full buffer must not block the writes. */
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
	q = async_queue(&a, 8);
	ASSERT_LE(0, q);
	for (i = 0; i < PRODUCERS; i++) {
		ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, i, 0, i & 1 ? KEVENT_REQ_ONESHOT : 0)));
		p[i].q = q;
		p[i].id = i;
		p[i].stop_on_error = 0;
	}
	e = uk(KEVENT_TIMER, 0, 0, 0);
	e.id.raw[1] = 200 * 1000;
	ASSERT_EQ(0, add1(q, e));
	e = uk_fd(KEVENT_SOCKET, sv[0], KEVENT_SOCKET_RECV);
	e.req_flags = KEVENT_REQ_ET;
	ASSERT_EQ(0, add1(q, e));
	for (i = 0; i < PRODUCERS; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, producer_thread, &p[i]));
	for (i = 0; i < 200; i++) {
		if (write(sv[1], "z", 1) != 1)
			break;
		while (aring_take(&a, &e))
			;
		aring_release(&a);
	}
	/* The queue goes while READY, the timer and the socket post into it. */
	close(q);
	for (i = 0; i < 200; i++)
		if (write(sv[1], "z", 1) != 1)
			break;
	for (i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	/* The ring is the caller's again: it can be unmapped and reused. */
	aring_unmap(&a);
	ASSERT_EQ(0, aring_map(&a, 8));
	q = k_init(a.ring, 8, KEVENT_INIT_ASYNC_RING);
	EXPECT_LE(0, q);
	close(q);
	aring_unmap(&a);
	close(sv[0]);
	close(sv[1]);
}

TEST(p38_fork_child_copy_is_ebadf)
{
	struct aring a;
	pid_t pid;
	int q, st;

	REQUIRE_KEVENT();
	q = async_queue(&a, 4);
	ASSERT_LE(0, q);
	ASSERT_EQ(0, add1(q, uk(KEVENT_UNOTIFY, 1, 0, 0)));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = 0;

		if (k_wait(q, 4, 0, &zero_ts, 0) != -1 || errno != EBADF)
			bad |= 1;
		if (k_commit(q, 0, 0) != -1 || errno != EBADF)
			bad |= 2;
		if (ready1(q, 1) != -1 || errno != EBADF)
			bad |= 4;
		/* The child's copy of the memory is not the pinned ring. */
		if (a.ring->ring_kidx != 0)
			bad |= 8;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* The parent's queue still posts into the parent's ring. */
	ASSERT_EQ(1, ready1(q, 1));
	EXPECT_EQ(1, aring_kidx(&a));
	close(q);
	aring_unmap(&a);
}

int main(int argc, char **argv)
{
	read_syscalls();
	return test_harness_run(argc, argv);
}
