/*
 * closed_fds.c - what closing descriptors means for a kevent program.
 *
 * 1. A number the program just closed stays closed: d = dup(q); close(d); any call on d gives
 *    EBADF, also in a thread that never called the library before, and also after calls
 *    that make the queue create internal descriptors (the first TIMER, INODE and SIGNAL
 *    kevents): the library never takes such a number. Again in a thread that blocks SIGSEGV
 *    and SIGBUS, where the fallback library copies caller memory with system calls (a pipe,
 *    where process_vm_readv is refused).
 * 2. Closing a queue releases its kevents (spec section 4): a SIGNAL kevent with
 *    KEVENT_SIGNAL_NOMASK swallows its signal while the queue is open, and once the queue fd
 *    is closed with close() the very next signal reaches the program's handler, or takes
 *    the default action (checked in a child that must die by the signal).
 *
 * Build: cc -std=c99 -Wall -Wextra closed_fds.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		checks++;                                                     \
		if (!(cond)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                         \
			fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno)); \
			failures++;                                           \
		}                                                             \
	} while (0)

#define CHECK_ERRNO(call, e)                                                  \
	do {                                                                  \
		errno = 0;                                                    \
		int r_ = (call);                                              \
		int e_ = errno;                                               \
		CHECK(r_ == -1 && e_ == (e), "%s returned %d errno %s, expected -1 errno %s", \
		      #call, r_, strerror(e_), #e);                           \
	} while (0)

static struct timespec ts(long sec, long nsec)
{
	struct timespec t;
	t.tv_sec = sec;
	t.tv_nsec = nsec;
	return t;
}

static struct ukevent entry(unsigned int type, unsigned int id0, unsigned int id1,
			    unsigned int event)
{
	struct ukevent ev;
	memset(&ev, 0, sizeof ev);
	ev.type = type;
	ev.id.raw[0] = id0;
	ev.id.raw[1] = id1;
	ev.event = event;
	return ev;
}

/* Every call on `d`, a number just closed, gives EBADF, and `d` is still closed after. */
static void all_ebadf(int d, const char *after)
{
	struct ukevent ev = entry(KEVENT_UNOTIFY, 1, 0, 1);
	CHECK(fcntl(d, F_GETFD) == -1 && errno == EBADF, "fd %d is open after %s", d, after);
	CHECK_ERRNO(kevent_ctl(d, KEVENT_CTL_ADD, 1, &ev), EBADF);
	CHECK_ERRNO(kevent_ctl(d, KEVENT_CTL_REMOVE, 1, &ev), EBADF);
	CHECK_ERRNO(kevent_ctl(d, KEVENT_CTL_READY, 0, NULL), EBADF);
	CHECK_ERRNO(kevent_get_events(d, 1, 1, ts(0, 0), &ev, 0), EBADF);
	CHECK_ERRNO(kevent_wait(d, 1, 0, ts(0, 0), 0), EBADF);
	CHECK_ERRNO(kevent_commit(d, 0, 0), EBADF);
	CHECK(fcntl(d, F_GETFD) == -1 && errno == EBADF, "fd %d was taken by a call after %s", d,
	      after);
}

/* d = dup(q); close(d); then `add` on q (which may make the queue create an fd), then every
 * call on d. */
static void dup_close_call(int q, struct ukevent *add, const char *what)
{
	int d = dup(q);
	CHECK(d >= 0 && close(d) == 0, "dup/close");
	if (add) {
		int r = kevent_ctl(q, KEVENT_CTL_ADD, 1, add);
		CHECK(r == 0, "ADD %s returned %d", what, r);
	}
	all_ebadf(d, what);
}

static void *fresh_thread(void *arg)
{
	int q = *(int *)arg;
	char dir[] = "/tmp/kevent-closed-fds-XXXXXX";
	printf("closed_fds: dup/close/call in a thread that never called the library\n");
	dup_close_call(q, NULL, "nothing");
	struct ukevent timer = entry(KEVENT_TIMER, 3600, 0, KEVENT_TIMER_FIRED);
	dup_close_call(q, &timer, "the first TIMER");
	int dfd = -1;
	if (mkdtemp(dir) != NULL && (dfd = open(dir, O_RDONLY | O_DIRECTORY)) >= 0) {
		struct ukevent inode = entry(KEVENT_INODE, (unsigned int)dfd, 0, KEVENT_INODE_CREATE);
		dup_close_call(q, &inode, "the first INODE");
	}
	struct ukevent sig = entry(KEVENT_SIGNAL, SIGCHLD, 0, KEVENT_SIGNAL_DELIVERY);
	dup_close_call(q, &sig, "the first SIGNAL");
	struct ukevent rm[3] = {timer, sig, entry(KEVENT_INODE, (unsigned int)dfd, 0, 0)};
	CHECK(kevent_ctl(q, KEVENT_CTL_REMOVE, dfd >= 0 ? 3 : 2, rm) == 0, "REMOVE");
	if (dfd >= 0) {
		close(dfd);
		rmdir(dir);
	}
	return NULL;
}

static void *fresh_thread_blocking_faults(void *arg)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGSEGV);
	sigaddset(&set, SIGBUS);
	CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0, "pthread_sigmask");
	printf("closed_fds: ... in a thread that blocks SIGSEGV and SIGBUS\n");
	return fresh_thread(arg);
}

static void fd_hygiene(void)
{
	int q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	pthread_t t;
	CHECK(pthread_create(&t, NULL, fresh_thread, &q) == 0 && pthread_join(t, NULL) == 0,
	      "thread");
	CHECK(pthread_create(&t, NULL, fresh_thread_blocking_faults, &q) == 0 &&
		      pthread_join(t, NULL) == 0,
	      "thread");
	printf("closed_fds: dup/close/call in the main thread\n");
	dup_close_call(q, NULL, "nothing");
	close(q);
}

static volatile sig_atomic_t handled;

static void on_usr1(int signo)
{
	(void)signo;
	handled = handled + 1;
}

/* How long the program waits for a signal that should have been handled (the library gives
 * it back at once: the first delivery after close() already reaches the handler). */
#define GRACE_MS 1000

static void sleep_ms(long ms)
{
	struct timespec t = ts(ms / 1000, (ms % 1000) * 1000000L);
	nanosleep(&t, NULL);
}

static int wait_handled(int want)
{
	for (int i = 0; i < GRACE_MS && handled < want; i++)
		sleep_ms(1);
	return handled >= want;
}

static void signal_after_close(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	printf("closed_fds: a NOMASK SIGNAL kevent of a closed queue gives the signal back\n");

	int q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	struct ukevent ev = entry(KEVENT_SIGNAL, SIGUSR1, (unsigned int)(KEVENT_SIGNAL_NOMASK >> 32),
				  KEVENT_SIGNAL_DELIVERY);
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev) == 0, "ADD SIGUSR1 NOMASK");
	CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
	struct ukevent out[2];
	int n = kevent_get_events(q, 1, 2, ts(5, 0), out, 0);
	CHECK(n == 1 && out[0].type == KEVENT_SIGNAL && out[0].ret_data[0] == 1,
	      "reported: %d events", n);
	CHECK(handled == 0, "NOMASK: the handler ran %d times", (int)handled);

	CHECK(close(q) == 0, "close");
	CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
	CHECK(wait_handled(1), "the handler did not run within %d ms of the first signal after "
	      "close()", GRACE_MS);
	CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
	CHECK(wait_handled(2), "the handler did not run for the second signal");

	/* A new queue on the same number knows nothing of the old kevent. */
	q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
	CHECK(wait_handled(3), "the handler did not run with a new queue");
	CHECK(kevent_get_events(q, 1, 2, ts(0, 0), out, 0) == 0, "the new queue reports nothing");
	close(q);
}

/* In a child: SIG_DFL for SIGUSR2, a NOMASK kevent, close(q), then SIGUSR2 must kill it. */
static void default_action_after_close(void)
{
	printf("closed_fds: ... or its default action\n");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGUSR2, SIG_DFL);
		int q = kevent_init(NULL, 0, 0);
		struct ukevent ev = entry(KEVENT_SIGNAL, SIGUSR2,
					  (unsigned int)(KEVENT_SIGNAL_NOMASK >> 32),
					  KEVENT_SIGNAL_DELIVERY);
		if (q < 0 || kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev) != 0)
			_exit(2);
		kill(getpid(), SIGUSR2); /* swallowed */
		struct ukevent out[1];
		if (kevent_get_events(q, 1, 1, ts(5, 0), out, 0) != 1)
			_exit(3);
		close(q);
		kill(getpid(), SIGUSR2); /* the default action: terminate */
		sleep_ms(GRACE_MS);
		_exit(4);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR2,
	      "the child was not killed by SIGUSR2 after close(): status %#x", status);
}

int main(void)
{
	alarm(60);
	printf("closed_fds: backend %s\n", kevent_backend() ? kevent_backend() : "(none)");
	fd_hygiene();
	signal_after_close();
	default_action_after_close();
	printf("closed_fds: %d checks, %d failed: %s\n", checks, failures, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
