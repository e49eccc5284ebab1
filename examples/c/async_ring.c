/*
 * async_ring.c - the asynchronous ring (KEVENT_INIT_ASYNC_RING, decision P38).
 *
 * The ring is mapped anonymously: RING_SIZE entries after the 8-byte header, then
 * struct kevent_ring_tail (the consumer's index, ring_uidx). A producer thread marks
 * EVENTS user kevents ready (KEVENT_CTL_READY), a few at a time; the queue posts them into
 * the ring. The consumer (main) reads slots from its index up to ring_kidx with no system
 * call at all and releases them by storing its index into ring_uidx; only when it finds the
 * ring empty does it call kevent_wait(old_uidx = its index), which returns at once if
 * events arrived meanwhile. Every event must be read exactly once, in the order it was
 * marked. Then the errnos: kevent_init's limits, kevent_get_events (EINVAL), a ring_uidx the
 * queue cannot trust (EINVAL), kevent_commit on the tail, poll(2).
 *
 * On a kevent kernel without P38, kevent_init answers the flag with EINVAL (D1): the
 * program says so and exits 0 (1 under KEVENT_REQUIRE_ALL=1).
 *
 * Build: cc -std=c99 -Wall -Wextra -pthread async_ring.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <kevent/kevent.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RING_SIZE 8 /* at most 7 events in the ring (D12): it fills, events park */
#define EVENTS 2000
#define BATCH 3

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                         \
			fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno)); \
			failures++;                                           \
		}                                                             \
	} while (0)

static struct timespec millis(long ms)
{
	struct timespec ts;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	return ts;
}

static struct ukevent unotify(unsigned int id, unsigned int req)
{
	struct ukevent ev;
	memset(&ev, 0, sizeof ev);
	ev.id.raw[0] = id;
	ev.type = KEVENT_UNOTIFY;
	ev.event = 1;
	ev.req_flags = req;
	ev.user[0] = id ^ 0x5a5a5a5au; /* a cookie, returned untouched */
	return ev;
}

/* The bytes of an asynchronous ring of `num` entries: header, entries, tail. */
static size_t ring_bytes(unsigned int num)
{
	return sizeof(struct kevent_ring) + (size_t)num * sizeof(struct ukevent) +
	       sizeof(struct kevent_ring_tail);
}

static struct kevent_ring_tail *tail_of(struct kevent_ring *ring, unsigned int num)
{
	return (struct kevent_ring_tail *)(void *)&ring->event[num];
}

static int fd;

static void *producer(void *arg)
{
	(void)arg;
	for (unsigned int i = 0; i < EVENTS; i += BATCH) {
		struct ukevent ev[BATCH];
		unsigned int k = 0;
		for (; k < BATCH && i + k < EVENTS; k++)
			ev[k] = unotify(i + k, 0);
		int r = kevent_ctl(fd, KEVENT_CTL_READY, k, ev);
		CHECK(r == (int)k, "READY marked %d of %u", r, k);
	}
	return NULL;
}

static int pollin(int qfd)
{
	struct pollfd p;
	p.fd = qfd;
	p.events = POLLIN;
	p.revents = 0;
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int main(void)
{
	alarm(60); /* bounded, whatever happens */
	const char *backend = kevent_backend() ? kevent_backend() : "(none)";
	printf("async_ring: backend %s\n", backend);

	size_t bytes = ring_bytes(RING_SIZE);
	/*
	 * An anonymous mapping, never the heap: natively the kernel pins these pages until the
	 * queue file is released, and after munmap pinned pages belong to nobody else.
	 */
	struct kevent_ring *ring = (struct kevent_ring *)mmap(
		NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((void *)ring == MAP_FAILED)
		return 1;
	struct kevent_ring_tail *tail = tail_of(ring, RING_SIZE);
	memset(ring, 0xa5, bytes);

	fd = kevent_init(ring, RING_SIZE, KEVENT_INIT_ASYNC_RING);
	if (fd < 0 && errno == EINVAL && strcmp(backend, "native") == 0) {
		const char *all = getenv("KEVENT_REQUIRE_ALL");
		printf("async_ring: skipped: this kevent kernel refuses KEVENT_INIT_ASYNC_RING "
		       "(EINVAL): no P38\n");
		return all && strcmp(all, "1") == 0;
	}
	CHECK(fd >= 0, "kevent_init(KEVENT_INIT_ASYNC_RING)");
	if (fd < 0)
		return 1;
	CHECK(ring->ring_kidx == 0 && ring->ring_over == 0, "header zeroed");
	CHECK(tail->ring_uidx == 0 && tail->ring_resv == 0, "tail zeroed");

	/* kevent_init's limits (P38) and D1. */
	errno = 0;
	CHECK(kevent_init(NULL, RING_SIZE, KEVENT_INIT_ASYNC_RING) == -1 && errno == EINVAL,
	      "a NULL ring");
	errno = 0;
	CHECK(kevent_init(ring, 1, KEVENT_INIT_ASYNC_RING) == -1 && errno == EINVAL, "num 1");
	errno = 0;
	CHECK(kevent_init(ring, KEVENT_RING_ASYNC_MAX + 1, KEVENT_INIT_ASYNC_RING) == -1 &&
		      errno == EINVAL,
	      "num above KEVENT_RING_ASYNC_MAX");
	errno = 0;
	CHECK(kevent_init(ring, RING_SIZE, KEVENT_INIT_ASYNC_RING | 2) == -1 && errno == EINVAL,
	      "an unknown flag");

	struct ukevent *evs = (struct ukevent *)calloc(EVENTS, sizeof *evs);
	if (!evs)
		return 1;
	for (unsigned int i = 0; i < EVENTS; i++)
		evs[i] = unotify(i, KEVENT_REQ_ONESHOT);
	int r = kevent_ctl(fd, KEVENT_CTL_ADD, EVENTS, evs);
	CHECK(r == 0, "ADD returned %d", r);

	/* kevent_get_events is refused: the events are read from the ring. */
	struct ukevent one;
	errno = 0;
	CHECK(kevent_get_events(fd, 0, 1, millis(0), &one, 0) == -1 && errno == EINVAL,
	      "kevent_get_events on an asynchronous queue");
	CHECK(!pollin(fd), "nothing ready yet");

	pthread_t t;
	CHECK(pthread_create(&t, NULL, producer, NULL) == 0, "pthread_create");

	/* The single consumer. */
	unsigned int uidx = 0, next = 0, read = 0, waits = 0;
	while (read < EVENTS && failures == 0) {
		unsigned int kidx = __atomic_load_n(&ring->ring_kidx, __ATOMIC_ACQUIRE);
		if (kidx == uidx) {
			/* Empty: sleep, unless something arrived since the load (then at once). */
			waits++;
			int n = kevent_wait(fd, RING_SIZE - 1, uidx, millis(5000), 0);
			CHECK(n >= 0, "kevent_wait");
			continue;
		}
		while (uidx != kidx) {
			const struct ukevent *e = &ring->event[uidx];
			unsigned int id = e->id.raw[0];
			CHECK(e->type == KEVENT_UNOTIFY && e->user[0] == (id ^ 0x5a5a5a5au),
			      "slot %u is not a whole event", uidx);
			CHECK(id == next, "read id %u, expected %u (lost, doubled or reordered)", id,
			      next);
			next = id + 1;
			read++;
			uidx = (uidx + 1) % RING_SIZE;
		}
		/* Release the slots: a store, no system call. */
		__atomic_store_n(&tail->ring_uidx, uidx, __ATOMIC_RELEASE);
	}
	pthread_join(t, NULL);
	CHECK(read == EVENTS, "read %u of %d events", read, EVENTS);
	printf("async_ring: %u events read, %u kevent_wait calls\n", read, waits);

	/* A ring_uidx the queue cannot trust: EINVAL, and nothing is posted. */
	struct ukevent u = unotify(EVENTS, 0);
	CHECK(kevent_ctl(fd, KEVENT_CTL_ADD, 1, &u) == 0, "ADD");
	__atomic_store_n(&tail->ring_uidx, RING_SIZE, __ATOMIC_RELEASE);
	errno = 0;
	CHECK(kevent_wait(fd, 1, RING_SIZE, millis(0), 0) == -1 && errno == EINVAL,
	      "kevent_wait with ring_uidx >= n");
	errno = 0;
	CHECK(kevent_commit(fd, 0, ring->ring_over) == -1 && errno == EINVAL,
	      "kevent_commit with ring_uidx >= n");
	CHECK(kevent_ctl(fd, KEVENT_CTL_READY, 1, &u) == 1, "READY");
	CHECK(__atomic_load_n(&ring->ring_kidx, __ATOMIC_ACQUIRE) == uidx,
	      "posted into a ring that counts as full");
	CHECK(pollin(fd), "an event waits in the queue: POLLIN");
	__atomic_store_n(&tail->ring_uidx, uidx, __ATOMIC_RELEASE);

	/* The parked event enters at the next kevent_wait; kevent_commit releases it. */
	unsigned int over = __atomic_load_n(&ring->ring_over, __ATOMIC_ACQUIRE);
	int n = kevent_wait(fd, 1, uidx, millis(5000), 0);
	CHECK(n == 1, "kevent_wait gained %d", n);
	CHECK(ring->event[uidx].id.raw[0] == EVENTS, "the parked event");
	unsigned int after = (uidx + 1) % RING_SIZE;
	CHECK(kevent_commit(fd, after, over) == 1, "kevent_commit on the tail");
	CHECK(tail->ring_uidx == after, "kevent_commit stores ring_uidx");
	CHECK(kevent_wait(fd, 1, after, millis(0), 0) == 0, "empty");
	CHECK(!pollin(fd), "read, released, nothing waits: no POLLIN");

	close(fd);
	/* The queue is closed and no other process or thread holds it: the memory is ours. */
	munmap(ring, bytes);
	free(evs);
	if (failures) {
		fprintf(stderr, "async_ring: %d failures\n", failures);
		return 1;
	}
	printf("async_ring: ok\n");
	return 0;
}
