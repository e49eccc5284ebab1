/*
 * timer_signal.c - a periodic KEVENT_TIMER and KEVENT_SIGNAL kevents on one queue.
 *
 * Part 1: a 20 ms periodic timer fires three times (never early); each event carries the
 * CLOCK_MONOTONIC milliseconds of the expiry and the number of expirations (D8). After
 * KEVENT_CTL_REMOVE it is never delivered again.
 * Part 2: SIGUSR1 watched with KEVENT_SIGNAL_NOMASK is only reported (its default action,
 * termination, does not happen); SIGUSR2 without NOMASK is reported and its handler runs.
 *
 * Build: cc -std=c99 -Wall -Wextra timer_signal.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_MS 20
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

static struct timespec after_ms(long ms)
{
	struct timespec ts;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	return ts;
}

static uint64_t monotonic_ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

static volatile sig_atomic_t usr2_handled;

static void on_usr2(int sig)
{
	(void)sig;
	usr2_handled++;
}

static void timer_part(int fd)
{
	struct ukevent t, out[4];
	memset(&t, 0, sizeof t);
	t.type = KEVENT_TIMER;
	t.id.raw[0] = 0;                     /* seconds */
	t.id.raw[1] = PERIOD_MS * 1000000u;  /* nanoseconds */
	t.event = KEVENT_TIMER_FIRED;
	t.user[0] = 7;

	uint64_t start = monotonic_ms();
	int r = kevent_ctl(fd, KEVENT_CTL_ADD, 1, &t);
	CHECK(r == 0, "ADD timer returned %d", r);

	unsigned int expirations = 0;
	for (int i = 0; i < FIRES; i++) {
		int n = kevent_get_events(fd, 1, 4, after_ms(2000), out, 0);
		CHECK(n == 1, "fire %d: %d events", i, n);
		if (n != 1)
			continue;
		uint32_t now = (uint32_t)monotonic_ms();
		CHECK(out[0].type == KEVENT_TIMER, "type %u", out[0].type);
		CHECK(out[0].user[0] == 7, "cookie %u", out[0].user[0]);
		CHECK(!(out[0].ret_flags & KEVENT_RET_BROKEN), "ret_flags %#x", out[0].ret_flags);
		/* ret_data[0]: CLOCK_MONOTONIC ms (low 32 bits) at the expiry, so not in the future. */
		CHECK((uint32_t)(now - out[0].ret_data[0]) < 1000u, "expiry at %u ms, now %u ms",
		      out[0].ret_data[0], now);
		/* D8: ret_data[1] counts the expirations since the last delivery. */
		CHECK(out[0].ret_data[1] >= 1, "expirations %u", out[0].ret_data[1]);
		expirations += out[0].ret_data[1];
	}
	/* Never early: `expirations` periods have passed since the ADD. */
	uint64_t elapsed = monotonic_ms() - start;
	CHECK(elapsed + 1 >= (uint64_t)expirations * PERIOD_MS, "%u expirations after %llu ms",
	      expirations, (unsigned long long)elapsed);
	printf("timer_signal: %u expirations of %d ms in %llu ms\n", expirations, PERIOD_MS,
	       (unsigned long long)elapsed);

	r = kevent_ctl(fd, KEVENT_CTL_REMOVE, 1, &t);
	CHECK(r == 0, "REMOVE returned %d, expected 0 (D14)", r);
	CHECK((t.ret_flags & (KEVENT_RET_DONE | KEVENT_RET_BROKEN)) == KEVENT_RET_DONE,
	      "REMOVE ret_flags %#x", t.ret_flags);
	int n = kevent_get_events(fd, 1, 4, after_ms(3 * PERIOD_MS), out, 0);
	CHECK(n == 0, "%d events after REMOVE", n);
}

static void signal_part(int fd)
{
	struct ukevent s[2], out[4];
	memset(s, 0, sizeof s);
	s[0].type = KEVENT_SIGNAL;
	s[0].id.raw_u64 = (uint64_t)SIGUSR1 | KEVENT_SIGNAL_NOMASK;
	s[0].event = KEVENT_SIGNAL_DELIVERY;
	s[0].user[0] = SIGUSR1;
	s[1].type = KEVENT_SIGNAL;
	s[1].id.raw_u64 = (uint64_t)SIGUSR2;
	s[1].event = KEVENT_SIGNAL_DELIVERY;
	s[1].user[0] = SIGUSR2;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr2;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);

	int r = kevent_ctl(fd, KEVENT_CTL_ADD, 2, s);
	CHECK(r == 0, "ADD signals returned %d", r);

	/* Reported only: without NOMASK the default action would end the program here. */
	raise(SIGUSR1);
	int n = kevent_get_events(fd, 1, 4, after_ms(2000), out, 0);
	CHECK(n == 1, "SIGUSR1: %d events", n);
	if (n == 1) {
		CHECK(out[0].type == KEVENT_SIGNAL && out[0].user[0] == SIGUSR1, "type %u cookie %u",
		      out[0].type, out[0].user[0]);
		CHECK(out[0].ret_data[0] >= 1, "SIGUSR1 delivered %u times", out[0].ret_data[0]);
	}

	/* Reported and delivered as usual. */
	raise(SIGUSR2);
	n = kevent_get_events(fd, 1, 4, after_ms(2000), out, 0);
	CHECK(n == 1, "SIGUSR2: %d events", n);
	if (n == 1) {
		CHECK(out[0].type == KEVENT_SIGNAL && out[0].user[0] == SIGUSR2, "type %u cookie %u",
		      out[0].type, out[0].user[0]);
		CHECK(out[0].ret_data[0] >= 1, "SIGUSR2 delivered %u times", out[0].ret_data[0]);
	}
	struct timespec tick = after_ms(10);
	for (int i = 0; i < 100 && !usr2_handled; i++)
		nanosleep(&tick, NULL);
	CHECK(usr2_handled == 1, "the SIGUSR2 handler ran %d times", (int)usr2_handled);

	/* Nothing else is pending. */
	n = kevent_get_events(fd, 1, 4, after_ms(0), out, 0);
	CHECK(n == 0, "%d unexpected events", n);
}

int main(void)
{
	alarm(60);
	printf("timer_signal: backend %s\n", kevent_backend() ? kevent_backend() : "(none)");
	int fd = kevent_init(NULL, 0, 0);
	CHECK(fd >= 0, "kevent_init");
	if (fd < 0)
		return 1;
	timer_part(fd);
	signal_part(fd);
	close(fd);
	printf("timer_signal: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
