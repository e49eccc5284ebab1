/*
 * ring_consumer.c - consume a kevent ring with kevent_wait() and kevent_commit().
 *
 * A queue with a ring of RING_SIZE entries and SOURCES user-triggered kevents
 * (KEVENT_UNOTIFY). Each round marks some of them ready (KEVENT_CTL_READY), lets
 * kevent_wait() move them into the ring, reads them between the consumer index and
 * ring_kidx, and releases the slots with kevent_commit(). The rounds wrap the ring many
 * times; the program checks ring_kidx, ring_over, the one-free-slot rule (D12) and stale
 * waits and commits (D13).
 *
 * Build: cc -std=c99 -Wall -Wextra ring_consumer.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING_SIZE 8 /* n: holds at most n - 1 = 7 uncommitted events (D12) */
#define SOURCES 10  /* UNOTIFY kevents, ids FIRST_ID .. FIRST_ID + SOURCES - 1 */
#define FIRST_ID 100
#define ROUNDS 40

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

static struct timespec seconds(long s)
{
	struct timespec ts;
	ts.tv_sec = s;
	ts.tv_nsec = 0;
	return ts;
}

/* The kevent that watches user id `id`. */
static struct ukevent unotify(unsigned int id)
{
	struct ukevent ev;
	memset(&ev, 0, sizeof ev);
	ev.id.raw[0] = id;
	ev.type = KEVENT_UNOTIFY;
	ev.event = 1;
	ev.user[0] = id * 2; /* a cookie, returned untouched */
	return ev;
}

/* Marks `count` sources ready, starting at source `from` (mod SOURCES). */
static void mark_ready(int fd, unsigned int from, unsigned int count)
{
	struct ukevent ev[SOURCES];
	unsigned int i;
	for (i = 0; i < count; i++)
		ev[i] = unotify(FIRST_ID + (from + i) % SOURCES);
	int r = kevent_ctl(fd, KEVENT_CTL_READY, count, ev);
	CHECK(r == (int)count, "READY marked %d of %u", r, count);
}

/*
 * One consumer step: wait for up to `want` events, check that exactly `expect` arrive, read
 * them from the ring and commit them. Returns the new consumer index.
 */
static unsigned int consume(int fd, struct kevent_ring *ring, unsigned int uidx,
			    unsigned int expect, unsigned int *seen)
{
	/* ring_over as read before consuming: the commit's `over` argument. */
	unsigned int over = __atomic_load_n(&ring->ring_over, __ATOMIC_ACQUIRE);
	int n = kevent_wait(fd, RING_SIZE, uidx, seconds(5), 0);
	CHECK(n == (int)expect, "kevent_wait moved %d events, expected %u", n, expect);
	if (n < 0)
		return uidx;

	/* The producer publishes entries, then ring_kidx (release); load it with acquire. */
	unsigned int kidx = __atomic_load_n(&ring->ring_kidx, __ATOMIC_ACQUIRE);
	CHECK(kidx == (uidx + (unsigned int)n) % RING_SIZE, "ring_kidx %u after %d events from %u",
	      kidx, n, uidx);

	for (int i = 0; i < n; i++) {
		const struct ukevent *e = &ring->event[(uidx + (unsigned int)i) % RING_SIZE];
		unsigned int id = e->id.raw[0];
		CHECK(e->type == KEVENT_UNOTIFY, "slot %u: type %u", (uidx + i) % RING_SIZE, e->type);
		CHECK(id >= FIRST_ID && id < FIRST_ID + SOURCES, "slot %u: id %u",
		      (uidx + i) % RING_SIZE, id);
		if (id >= FIRST_ID && id < FIRST_ID + SOURCES) {
			CHECK(e->user[0] == id * 2, "cookie %u for id %u", e->user[0], id);
			seen[id - FIRST_ID]++;
		}
	}

	unsigned int new_uidx = (uidx + (unsigned int)n) % RING_SIZE;
	int c = kevent_commit(fd, new_uidx, over);
	CHECK(c == n, "kevent_commit(%u, %u) released %d, expected %d", new_uidx, over, c, n);
	return new_uidx;
}

int main(void)
{
	alarm(60); /* bounded, whatever happens */
	printf("ring_consumer: backend %s\n", kevent_backend() ? kevent_backend() : "(none)");

	size_t bytes = sizeof(struct kevent_ring) + RING_SIZE * sizeof(struct ukevent);
	struct kevent_ring *ring = (struct kevent_ring *)calloc(1, bytes);
	if (!ring)
		return 1;

	int fd = kevent_init(ring, RING_SIZE, 0);
	CHECK(fd >= 0, "kevent_init");
	if (fd < 0)
		return 1;

	struct ukevent ev[SOURCES];
	for (unsigned int i = 0; i < SOURCES; i++)
		ev[i] = unotify(FIRST_ID + i);
	int r = kevent_ctl(fd, KEVENT_CTL_ADD, SOURCES, ev);
	CHECK(r == 0, "ADD returned %d entries (UNOTIFY is never ready at ADD)", r);

	unsigned int uidx = 0, wraps = 0, total = 0, from = 0;
	for (unsigned int round = 0; round < ROUNDS; round++) {
		unsigned int seen[SOURCES] = {0};
		unsigned int k = 1 + round % 5; /* 1..5 events per round */
		mark_ready(fd, from, k);
		unsigned int next = consume(fd, ring, uidx, k, seen);
		for (unsigned int i = 0; i < k; i++)
			CHECK(seen[(from + i) % SOURCES] == 1, "round %u: id %u seen %u times", round,
			      FIRST_ID + (from + i) % SOURCES, seen[(from + i) % SOURCES]);
		if (next < uidx) /* the commit crossed the end of the array */
			wraps++;
		uidx = next;
		from = (from + k) % SOURCES;
		total += k;
		CHECK(ring->ring_over == wraps, "ring_over %u after %u wraps", ring->ring_over, wraps);
	}

	/* D12: with every source ready, one wait fills n - 1 slots, never n. */
	{
		unsigned int seen[SOURCES] = {0};
		mark_ready(fd, 0, SOURCES);
		unsigned int next = consume(fd, ring, uidx, RING_SIZE - 1, seen);
		if (next < uidx)
			wraps++;
		uidx = next;
		next = consume(fd, ring, uidx, SOURCES - (RING_SIZE - 1), seen);
		if (next < uidx)
			wraps++;
		uidx = next;
		for (unsigned int i = 0; i < SOURCES; i++)
			CHECK(seen[i] == 1, "D12 phase: id %u seen %u times", FIRST_ID + i, seen[i]);
		CHECK(ring->ring_over == wraps, "ring_over %u after %u wraps", ring->ring_over, wraps);
		total += SOURCES;
	}

	/* D13: a wait with a stale old_uidx returns 0 at once; a stale commit releases nothing. */
	{
		mark_ready(fd, 0, 1);
		r = kevent_wait(fd, RING_SIZE, (uidx + 1) % RING_SIZE, seconds(5), 0);
		CHECK(r == 0, "wait with a stale old_uidx returned %d", r);
		unsigned int seen[SOURCES] = {0};
		unsigned int over = ring->ring_over;
		unsigned int next = consume(fd, ring, uidx, 1, seen);
		r = kevent_commit(fd, next, over);
		CHECK(r == 0, "repeated commit released %d", r);
		r = kevent_commit(fd, uidx, ring->ring_over);
		CHECK(r == 0, "commit behind the consumer index released %d", r);
		if (next < uidx)
			wraps++;
		uidx = next;
		total += 1;
		CHECK(ring->ring_over == wraps, "ring_over %u after %u wraps", ring->ring_over, wraps);
	}

	close(fd);
	free(ring); /* only after the queue is closed */
	printf("ring_consumer: %u events through a ring of %u, ring_over %u: %s\n", total,
	       RING_SIZE, wraps, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
