/*
 * bad_input.c - every error of the kevent ABI, as C sees it (-1 and errno).
 *
 * Spec section 3: closed and negative fds (EBADF), fds that are not queues (EINVAL), unknown
 * commands and flags (EINVAL, D1), bad timespecs (EINVAL), ring rules (EINVAL, EOVERFLOW),
 * NULL or unmapped buffers (EFAULT); per-entry failures of KEVENT_CTL_ADD and _REMOVE
 * (KEVENT_RET_BROKEN with ret_data[1] = -errno: D2, D3); a forked child's copy of a queue
 * (EBADF, D11). A valid call of each kind is checked next to the invalid ones. The EFAULT
 * cases run twice: in the main thread, and in a thread that blocks SIGSEGV and SIGBUS (where
 * the fallback library cannot catch a fault and copies caller memory with system calls).
 *
 * Build: cc -std=c99 -Wall -Wextra bad_input.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <kevent/kevent.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RING_SIZE 4
#define CLOSED_FD 900 /* dup2()ed to, then closed: surely not open */

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

/* `call` returns -1 with errno == e. */
#define CHECK_ERRNO(call, e)                                                  \
	do {                                                                  \
		errno = 0;                                                    \
		int r_ = (call);                                              \
		int e_ = errno;                                               \
		CHECK(r_ == -1 && e_ == (e), "%s returned %d errno %s, expected -1 errno %s", \
		      #call, r_, strerror(e_), #e);                           \
	} while (0)

/* Entry `ev` failed with `e`: RET_BROKEN|RET_DONE and ret_data[1] == -e. */
#define CHECK_ENTRY(ev, e)                                                    \
	CHECK((ev).ret_flags == (KEVENT_RET_BROKEN | KEVENT_RET_DONE) &&     \
		      (ev).ret_data[1] == (uint32_t)-(e),                     \
	      "entry type %u id %u: ret_flags %#x ret_data[1] %d, expected -%s", (ev).type,   \
	      (ev).id.raw[0], (ev).ret_flags, (int)(ev).ret_data[1], #e)

static struct timespec ts(long sec, long nsec)
{
	struct timespec t;
	t.tv_sec = sec;
	t.tv_nsec = nsec;
	return t;
}

static struct ukevent entry(unsigned int type, unsigned int id, unsigned int event)
{
	struct ukevent ev;
	memset(&ev, 0, sizeof ev);
	ev.type = type;
	ev.id.raw[0] = id;
	ev.event = event;
	return ev;
}

/*
 * A page the kernel cannot copy to or from: PROT_NONE fails copy_from_user/copy_to_user
 * exactly as an unmapped page does, and unlike a munmap()ed hole no later mmap() (ours or a
 * library thread's) can land on it.
 */
static void *unmapped(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		abort();
	return p;
}

/* The same error for a bad fd on every call taking a queue fd. */
static void bad_fd(int fd, int e, const char *what)
{
	struct ukevent ev = entry(KEVENT_UNOTIFY, 1, 1);
	printf("bad_input: %s fd -> %s\n", what, strerror(e));
	CHECK_ERRNO(kevent_ctl(fd, KEVENT_CTL_ADD, 1, &ev), e);
	CHECK_ERRNO(kevent_ctl(fd, KEVENT_CTL_READY, 0, NULL), e);
	CHECK_ERRNO(kevent_get_events(fd, 0, 1, ts(0, 0), &ev, 0), e);
	CHECK_ERRNO(kevent_wait(fd, 1, 0, ts(0, 0), 0), e);
	CHECK_ERRNO(kevent_commit(fd, 0, 0), e);
}

static void fds(void)
{
	int q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	CHECK(dup2(q, CLOSED_FD) == CLOSED_FD && close(CLOSED_FD) == 0, "closed fd");
	bad_fd(CLOSED_FD, EBADF, "closed");
	bad_fd(-1, EBADF, "negative");
	bad_fd(-100, EBADF, "negative");

	int p[2];
	CHECK(pipe(p) == 0, "pipe");
	bad_fd(p[0], EINVAL, "pipe (not a queue)");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	bad_fd(s, EINVAL, "socket (not a queue)");
	close(s);
	close(p[0]);
	close(p[1]);
	close(q);
}

static void init_args(void)
{
	size_t bytes = sizeof(struct kevent_ring) + RING_SIZE * sizeof(struct ukevent);
	struct kevent_ring *ring = (struct kevent_ring *)calloc(1, bytes);
	printf("bad_input: kevent_init arguments\n");
	CHECK_ERRNO(kevent_init(NULL, RING_SIZE, 0), EINVAL);  /* num without a ring */
	CHECK_ERRNO(kevent_init(ring, 0, 0), EINVAL);          /* a ring needs num >= 2 */
	CHECK_ERRNO(kevent_init(ring, 1, 0), EINVAL);
	CHECK_ERRNO(kevent_init(NULL, 0, 1), EINVAL);          /* P38: the async ring needs one */
	CHECK_ERRNO(kevent_init(NULL, 0, 0x80000000u), EINVAL);
	CHECK_ERRNO(kevent_init(ring, RING_SIZE, 2), EINVAL);
	CHECK_ERRNO(kevent_init((struct kevent_ring *)unmapped(), RING_SIZE, 0), EFAULT);
	int q = kevent_init(ring, 2, 0);
	CHECK(q >= 0, "kevent_init(ring, 2, 0)");
	close(q);
	free(ring);
}

static void ctl_args(int q)
{
	struct ukevent ev[4];
	printf("bad_input: kevent_ctl arguments\n");
	CHECK_ERRNO(kevent_ctl(q, KEVENT_CTL_ADD, 1, NULL), EFAULT);
	CHECK_ERRNO(kevent_ctl(q, KEVENT_CTL_REMOVE, 3, NULL), EFAULT);
	CHECK_ERRNO(kevent_ctl(q, KEVENT_CTL_READY, 1, NULL), EFAULT);
	CHECK_ERRNO(kevent_ctl(q, KEVENT_CTL_ADD, 1, (struct ukevent *)unmapped()), EFAULT);
	ev[0] = entry(KEVENT_UNOTIFY, 1, 1);
	CHECK_ERRNO(kevent_ctl(q, 4, 1, ev), EINVAL); /* unknown cmd */
	CHECK_ERRNO(kevent_ctl(q, 99, 0, NULL), EINVAL);
	CHECK_ERRNO(kevent_ctl(q, 0xffffffffu, 1, ev), EINVAL);
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 0, NULL) == 0, "ADD of nothing");
	CHECK(kevent_ctl(q, KEVENT_CTL_READY, 0, NULL) == 0, "READY(0), the wake-up");
}

static void ctl_entries(int q)
{
	struct ukevent ev[8];
	int p[2], s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(pipe(p) == 0, "pipe");
	printf("bad_input: per-entry failures of ADD and REMOVE\n");

	ev[0] = entry(KEVENT_UNOTIFY, 10, 1);
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 1, ev) == 0, "ADD UNOTIFY 10");

	/* One call, good and bad entries: the failures come back first, in order. */
	ev[0] = entry(KEVENT_UNOTIFY, 11, 1);                 /* fine */
	ev[1] = entry(99, 1, 1);                              /* D2: unknown type */
	ev[2] = entry(KEVENT_NAIO, 1, 1);                     /* D2 */
	ev[3] = entry(KEVENT_POSIX_TIMER, 1, KEVENT_MASK_ALL); /* D2: kernel-only type */
	ev[4] = entry(KEVENT_AIO, 1, KEVENT_MASK_ALL);        /* D2 */
	ev[5] = entry(KEVENT_UNOTIFY, 10, 1);                 /* already registered */
	ev[6] = entry(KEVENT_SOCKET, CLOSED_FD, KEVENT_SOCKET_RECV); /* bad fd */
	ev[7] = entry(KEVENT_SOCKET, (unsigned int)p[0], KEVENT_SOCKET_RECV); /* not a socket */
	int r = kevent_ctl(q, KEVENT_CTL_ADD, 8, ev);
	CHECK(r == 7, "ADD wrote back %d entries, expected 7", r);
	CHECK(ev[0].type == 99, "first failure is the unknown type, got type %u", ev[0].type);
	CHECK_ENTRY(ev[0], ENOSYS);
	CHECK(ev[1].type == KEVENT_NAIO, "then NAIO, got type %u", ev[1].type);
	CHECK_ENTRY(ev[1], ENOSYS);
	CHECK(ev[2].type == KEVENT_POSIX_TIMER, "then POSIX_TIMER, got type %u", ev[2].type);
	CHECK_ENTRY(ev[2], ENOSYS);
	CHECK(ev[3].type == KEVENT_AIO, "then AIO, got type %u", ev[3].type);
	CHECK_ENTRY(ev[3], ENOSYS);
	CHECK(ev[4].type == KEVENT_UNOTIFY && ev[4].id.raw[0] == 10, "then the duplicate");
	CHECK_ENTRY(ev[4], EEXIST);
	CHECK(ev[5].type == KEVENT_SOCKET && ev[5].id.raw[0] == CLOSED_FD, "then the bad fd");
	CHECK_ENTRY(ev[5], EBADF);
	CHECK(ev[6].type == KEVENT_SOCKET && ev[6].id.raw[0] == (unsigned int)p[0], "then the pipe");
	CHECK_ENTRY(ev[6], EINVAL);

	/* The good entry was registered despite the failures around it. */
	ev[0] = entry(KEVENT_UNOTIFY, 11, 1);
	CHECK(kevent_ctl(q, KEVENT_CTL_READY, 1, ev) == 1, "READY UNOTIFY 11");
	struct ukevent out[4];
	CHECK(kevent_get_events(q, 1, 4, ts(1, 0), out, 0) == 1, "UNOTIFY 11 delivered");

	/* Wrong kinds of fd. */
	ev[0] = entry(KEVENT_PIPE, (unsigned int)s, KEVENT_SOCKET_RECV);   /* a socket, not a FIFO */
	ev[1] = entry(KEVENT_SOCKET, (unsigned int)p[1], KEVENT_SOCKET_SEND); /* a FIFO, not a socket */
	r = kevent_ctl(q, KEVENT_CTL_ADD, 2, ev);
	CHECK(r == 2, "ADD wrote back %d entries, expected 2", r);
	CHECK_ENTRY(ev[0], EINVAL);
	CHECK_ENTRY(ev[1], EINVAL);

	/* REMOVE and MODIFY: every entry comes back in place; missing ones with -ENOENT. The call
	 * returns 0 once every entry is processed, whatever the entries say (D14). */
	ev[0] = entry(KEVENT_UNOTIFY, 10, 1);
	ev[1] = entry(KEVENT_UNOTIFY, 12345, 1);
	ev[2] = entry(KEVENT_TIMER, 10, 1); /* D3: the type is part of the key */
	r = kevent_ctl(q, KEVENT_CTL_REMOVE, 3, ev);
	CHECK(r == 0, "REMOVE returned %d, expected 0 (D14)", r);
	CHECK(ev[0].ret_flags == KEVENT_RET_DONE, "REMOVE found: ret_flags %#x", ev[0].ret_flags);
	CHECK_ENTRY(ev[1], ENOENT);
	CHECK_ENTRY(ev[2], ENOENT);
	ev[0] = entry(KEVENT_UNOTIFY, 10, 1);
	r = kevent_ctl(q, KEVENT_CTL_MODIFY, 1, ev);
	CHECK(r == 0, "MODIFY returned %d, expected 0 (D14)", r);
	CHECK_ENTRY(ev[0], ENOENT);
	/* D14: MODIFY with unknown request flags in an entry fails that entry, not the call. */
	ev[0] = entry(KEVENT_UNOTIFY, 11, 1);
	ev[1] = entry(KEVENT_UNOTIFY, 11, 1);
	ev[1].req_flags = 0x4000;
	r = kevent_ctl(q, KEVENT_CTL_MODIFY, 2, ev);
	CHECK(r == 0, "MODIFY with a bad entry returned %d, expected 0 (D14)", r);
	CHECK(ev[0].ret_flags == KEVENT_RET_DONE, "MODIFY found: ret_flags %#x", ev[0].ret_flags);
	CHECK_ENTRY(ev[1], EINVAL);

	/* READY on a kevent that is not there: copied to the start of arg, count 0. */
	ev[0] = entry(KEVENT_UNOTIFY, 777, 1);
	CHECK(kevent_ctl(q, KEVENT_CTL_READY, 1, ev) == 0, "READY of a missing kevent");

	close(s);
	close(p[0]);
	close(p[1]);
}

static void get_events_args(int q)
{
	struct ukevent out[4];
	printf("bad_input: kevent_get_events arguments\n");
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(0, 1000000000L), out, 0), EINVAL);
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(0, -1), out, 0), EINVAL);
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(-1, 0), out, 0), EINVAL);
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(0, 0), out, 0x2), EINVAL); /* D1 */
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(0, 0), out, 0x80000000u), EINVAL);
	/* Valid: {0, 0} does not block; an absolute time in the past neither (D5). */
	CHECK(kevent_get_events(q, 1, 4, ts(0, 0), out, 0) == 0, "nothing ready");
	CHECK(kevent_get_events(q, 1, 4, ts(1, 0), out, KEVENT_FLAGS_ABSTIME) == 0,
	      "ABSTIME in the past");

	/* D15: argument errors, before any wait and whatever is ready. */
	struct ukevent r15 = entry(KEVENT_UNOTIFY, 15, 1);
	r15.req_flags = KEVENT_REQ_READY | KEVENT_REQ_ONESHOT;
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 1, &r15) == 0, "ADD UNOTIFY 15 ready");
	CHECK_ERRNO(kevent_get_events(q, 0, 0, ts(1, 0), out, 0), EINVAL);  /* max_nr == 0 */
	CHECK_ERRNO(kevent_get_events(q, 1, 0, ts(1, 0), NULL, 0), EINVAL); /* also with NULL */
	CHECK_ERRNO(kevent_get_events(q, 5, 4, ts(1, 0), out, 0), EINVAL);  /* min_nr > max_nr */
	CHECK_ERRNO(kevent_get_events(q, 0xffffffffu, 4, ts(1, 0), out, 0), EINVAL);
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(1, 0), NULL, 0), EFAULT); /* NULL, max_nr > 0 */
	CHECK_ERRNO(kevent_get_events(q, 0, 1, ts(0, 0), NULL, 0), EFAULT);
	/* None of them took the ready event. */
	CHECK(kevent_get_events(q, 1, 4, ts(0, 0), out, 0) == 1 && out[0].id.raw[0] == 15,
	      "UNOTIFY 15 still ready after the D15 errors");

	/* EFAULT when there are events to copy and the buffer cannot take them. */
	struct ukevent ev = entry(KEVENT_UNOTIFY, 20, 1);
	ev.req_flags = KEVENT_REQ_READY | KEVENT_REQ_ONESHOT;
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev) == 0, "ADD UNOTIFY 20 ready");
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(1, 0), (struct ukevent *)unmapped(), 0), EFAULT);
	void *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ev = entry(KEVENT_UNOTIFY, 21, 1);
	ev.req_flags = KEVENT_REQ_READY | KEVENT_REQ_ONESHOT;
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev) == 0, "ADD UNOTIFY 21 ready");
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(1, 0), (struct ukevent *)ro, 0), EFAULT);
	ev = entry(KEVENT_UNOTIFY, 22, 1);
	ev.req_flags = KEVENT_REQ_READY | KEVENT_REQ_ONESHOT;
	CHECK(kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev) == 0, "ADD UNOTIFY 22 ready");
	CHECK_ERRNO(kevent_get_events(q, 1, 4, ts(1, 0), NULL, 0), EFAULT);
	munmap(ro, 4096);
	/* Drain whatever the failed copies left ready. */
	while (kevent_get_events(q, 1, 4, ts(0, 0), out, 0) > 0)
		;
}

static void ring_args(void)
{
	size_t bytes = sizeof(struct kevent_ring) + RING_SIZE * sizeof(struct ukevent);
	struct kevent_ring *ring = (struct kevent_ring *)calloc(1, bytes);
	int plain = kevent_init(NULL, 0, 0);
	int q = kevent_init(ring, RING_SIZE, 0);
	CHECK(plain >= 0 && q >= 0, "kevent_init");
	printf("bad_input: kevent_wait and kevent_commit arguments\n");

	/* A queue without a ring. */
	CHECK_ERRNO(kevent_wait(plain, 1, 0, ts(0, 0), 0), EINVAL);
	CHECK_ERRNO(kevent_commit(plain, 0, 0), EINVAL);

	CHECK_ERRNO(kevent_wait(q, RING_SIZE + 1, 0, ts(0, 0), 0), EINVAL); /* larger than the ring */
	CHECK_ERRNO(kevent_wait(q, 1, 0, ts(0, 1000000000L), 0), EINVAL);
	CHECK_ERRNO(kevent_wait(q, 1, 0, ts(0, -5), 0), EINVAL);
	CHECK_ERRNO(kevent_wait(q, 1, 0, ts(-1, 0), 0), EINVAL);
	CHECK_ERRNO(kevent_wait(q, 1, 0, ts(0, 0), 0x2), EINVAL); /* D1 */
	CHECK(kevent_wait(q, RING_SIZE, 0, ts(0, 0), 0) == 0, "wait on an empty ring");

	CHECK_ERRNO(kevent_commit(q, RING_SIZE, 0), EINVAL); /* new_uidx >= n */
	CHECK_ERRNO(kevent_commit(q, 0xffffffffu, 0), EINVAL);
	CHECK_ERRNO(kevent_commit(q, 0, ring->ring_over + 2), EOVERFLOW); /* stale over */
	CHECK_ERRNO(kevent_commit(q, 0, ring->ring_over + 1), EOVERFLOW);
	CHECK(kevent_commit(q, 0, ring->ring_over) == 0, "commit of nothing");
	CHECK(kevent_commit(q, 0, ring->ring_over - 1) == 0, "over = ring_over - 1 is accepted");

	close(q);
	close(plain);
	free(ring);
}

/* D11: a forked child's copy of a queue fd reports EBADF on every call. */
static void fork_child(int q)
{
	printf("bad_input: a forked child's queue fd\n");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct ukevent ev = entry(KEVENT_UNOTIFY, 1, 1);
		int ok = kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev) == -1 && errno == EBADF;
		ok = ok && kevent_get_events(q, 0, 1, ts(0, 0), &ev, 0) == -1 && errno == EBADF;
		ok = ok && kevent_commit(q, 0, 0) == -1 && errno == EBADF;
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw status %#x", status);
}

/* The EFAULT (and other argument) checks again, in a thread that blocks SIGSEGV and SIGBUS. */
static void *blocked_faults(void *arg)
{
	sigset_t set;
	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGSEGV);
	sigaddset(&set, SIGBUS);
	CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0, "pthread_sigmask");
	printf("bad_input: again, in a thread that blocks SIGSEGV and SIGBUS\n");
	int q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	init_args();
	ctl_args(q);
	get_events_args(q);
	close(q);
	return NULL;
}

int main(void)
{
	alarm(60);
	printf("bad_input: backend %s\n", kevent_backend() ? kevent_backend() : "(none)");
	int q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	if (q < 0)
		return 1;
	fds();
	init_args();
	ctl_args(q);
	ctl_entries(q);
	get_events_args(q);
	ring_args();
	fork_child(q);
	close(q);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, blocked_faults, NULL) == 0 && pthread_join(t, NULL) == 0,
	      "thread");
	printf("bad_input: %d checks, %d failed: %s\n", checks, failures, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
