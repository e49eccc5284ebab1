/*
 * posix_timer.c - a POSIX timer that reports to a kevent queue (SIGEV_KEVENT).
 *
 * kevent_timer_create() with sigev_notify = SIGEV_KEVENT and the queue fd stored by
 * kevent_sigev_set_fd(); each expiry arrives as a KEVENT_POSIX_TIMER event whose ptr is the
 * sigev_value.sival_ptr given at creation. An interval timer keeps firing (D9) until it is
 * disarmed; a deleted timer is gone (EINVAL).
 *
 * Build: cc -std=c99 -Wall -Wextra posix_timer.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <kevent/kevent.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define INTERVAL_NS 10000000L /* 10 ms */
#define FIRES 3

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

/* -1 with errno == e. */
#define CHECK_ERRNO(call, e)                                                  \
	do {                                                                  \
		errno = 0;                                                    \
		int r_ = (call);                                              \
		CHECK(r_ == -1 && errno == (e), "%s returned %d, expected -1/%s", #call, r_, #e); \
	} while (0)

static struct timespec after_ms(long ms)
{
	struct timespec ts;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	return ts;
}

static int cookie;

int main(void)
{
	alarm(60);
	printf("posix_timer: backend %s\n", kevent_backend() ? kevent_backend() : "(none)");
	int fd = kevent_init(NULL, 0, 0);
	CHECK(fd >= 0, "kevent_init");
	if (fd < 0)
		return 1;

	struct sigevent sev;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_KEVENT;
	sev.sigev_value.sival_ptr = &cookie;
	kevent_sigev_set_fd(&sev, fd);

	timer_t tid;
	int r = kevent_timer_create(CLOCK_MONOTONIC, &sev, &tid);
	CHECK(r == 0, "kevent_timer_create returned %d", r);
	if (r != 0)
		return 1;

	struct itimerspec its, cur, old;
	its.it_value.tv_sec = 0;
	its.it_value.tv_nsec = INTERVAL_NS;
	its.it_interval = its.it_value;
	r = kevent_timer_settime(tid, 0, &its, NULL);
	CHECK(r == 0, "kevent_timer_settime returned %d", r);

	/* D9: an interval timer keeps firing. */
	struct ukevent out[4];
	for (int i = 0; i < FIRES; i++) {
		int n = kevent_get_events(fd, 1, 4, after_ms(2000), out, 0);
		CHECK(n == 1, "expiry %d: %d events", i, n);
		if (n == 1) {
			CHECK(out[0].type == KEVENT_POSIX_TIMER, "type %u", out[0].type);
			CHECK(out[0].ptr == (void *)&cookie, "ptr %p, expected %p", out[0].ptr,
			      (void *)&cookie);
		}
	}

	r = kevent_timer_gettime(tid, &cur);
	CHECK(r == 0, "kevent_timer_gettime returned %d", r);
	CHECK(cur.it_interval.tv_sec == 0 && cur.it_interval.tv_nsec == INTERVAL_NS,
	      "interval %ld.%09ld", (long)cur.it_interval.tv_sec, (long)cur.it_interval.tv_nsec);
	CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec <= INTERVAL_NS,
	      "next expiry in %ld.%09ld", (long)cur.it_value.tv_sec, (long)cur.it_value.tv_nsec);

	/* Disarm; the old setting comes back. */
	memset(&its, 0, sizeof its);
	r = kevent_timer_settime(tid, 0, &its, &old);
	CHECK(r == 0, "disarm returned %d", r);
	CHECK(old.it_interval.tv_nsec == INTERVAL_NS, "old interval %ld",
	      (long)old.it_interval.tv_nsec);
	(void)kevent_get_events(fd, 1, 4, after_ms(0), out, 0); /* an expiry already queued */
	int n = kevent_get_events(fd, 1, 4, after_ms(5 * INTERVAL_NS / 1000000L), out, 0);
	CHECK(n == 0, "%d events from a disarmed timer", n);

	r = kevent_timer_delete(tid);
	CHECK(r == 0, "kevent_timer_delete returned %d", r);
	CHECK_ERRNO(kevent_timer_delete(tid), EINVAL);
	CHECK_ERRNO(kevent_timer_gettime(tid, &cur), EINVAL);
	CHECK_ERRNO(kevent_timer_settime(tid, 0, &its, NULL), EINVAL);

	/* Bad arguments. */
	/* Inaccessible memory: PROT_NONE faults in the kernel's copies as an unmapped page does. */
	void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(hole != MAP_FAILED, "mmap");
	CHECK_ERRNO(kevent_timer_create(CLOCK_MONOTONIC, NULL, &tid), EINVAL);
	CHECK_ERRNO(kevent_timer_create(CLOCK_MONOTONIC, (struct sigevent *)hole, &tid), EFAULT);
	CHECK_ERRNO(kevent_timer_create(CLOCK_MONOTONIC, &sev, (timer_t *)hole), EFAULT);
	r = kevent_timer_create(CLOCK_MONOTONIC, &sev, &tid);
	CHECK(r == 0, "kevent_timer_create returned %d", r);
	if (r == 0) {
		CHECK_ERRNO(kevent_timer_settime(tid, 0, NULL, NULL), EINVAL);
		CHECK_ERRNO(kevent_timer_settime(tid, 0, (struct itimerspec *)hole, NULL), EFAULT);
		its.it_value.tv_nsec = 1000000000L; /* not a valid time */
		CHECK_ERRNO(kevent_timer_settime(tid, 0, &its, NULL), EINVAL);
		CHECK_ERRNO(kevent_timer_gettime(tid, (struct itimerspec *)hole), EFAULT);
		CHECK(kevent_timer_delete(tid) == 0, "delete");
	}

	close(fd);
	printf("posix_timer: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
