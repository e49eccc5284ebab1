/*
 * aio_sendfile.c - a file sent to a socket in the background (spec D18).
 *
 * 1. kevent_aio_sendfile() starts sending a 1 MiB file to one end of a socket pair and returns
 *    a request id at once; the program reads the other end while it polls the queue, and the
 *    one KEVENT_AIO event carries the byte count. Every byte is compared with the file's.
 * 2. count == 0 completes at once; a transfer past end of file ends there.
 * 3. KEVENT_CTL_REMOVE of (KEVENT_AIO, id) cancels a transfer that waits for a reader: no
 *    event follows.
 * 4. The call's own errors: EBADF, EINVAL, ENOTCONN.
 *
 * On a kevent kernel that does not offer the call (it advertises five syscall numbers, not
 * six) every call fails with ENOSYS: the program says so and exits 0, so that it runs
 * unchanged on both backends.
 *
 * Build: cc -std=c99 -Wall -Wextra aio_sendfile.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

#define FILE_SIZE (1024 * 1024 + 77)

static struct timespec ts(long sec, long nsec)
{
	struct timespec t;
	t.tv_sec = sec;
	t.tv_nsec = nsec;
	return t;
}

/* The bytes sent of a successful completion, -1 for a broken one. */
static long long bytes_of(const struct ukevent *ev)
{
	if (ev->ret_flags & KEVENT_RET_BROKEN)
		return -1;
	return (long long)ev->ret_data[0] | (long long)ev->ret_data[1] << 32;
}

/* Waits (at most about 30 s) for the event of request id; 0 when it came. */
static int wait_for(int q, long long id, struct ukevent *out, int rfd, unsigned char *got,
		    size_t *got_len, size_t cap)
{
	for (int i = 0; i < 30000; i++) {
		if (rfd >= 0 && *got_len < cap) {
			ssize_t n = read(rfd, got + *got_len, cap - *got_len);
			if (n > 0)
				*got_len += (size_t)n;
		}
		int n = kevent_get_events(q, 1, 1, ts(0, 1000000), out, 0);
		if (n == 1) {
			CHECK(out->type == KEVENT_AIO && out->id.raw_u64 == (uint64_t)id,
			      "an event of type %u id %llu, not request %lld", out->type,
			      (unsigned long long)out->id.raw_u64, id);
			return 0;
		}
		CHECK(n == 0, "kevent_get_events returned %d", n);
	}
	return -1;
}

int main(void)
{
	char path[] = "/tmp/kevent-aio-example-XXXXXX";
	int file = mkstemp(path);
	unsigned char *data = malloc(FILE_SIZE), *got = malloc(FILE_SIZE);
	int sv[2];
	struct ukevent ev;
	size_t got_len = 0;

	if (file < 0 || !data || !got) {
		perror("setup");
		return 1;
	}
	unlink(path);
	for (size_t i = 0; i < FILE_SIZE; i++)
		data[i] = (unsigned char)(i * 7 + i / 251);
	if (write(file, data, FILE_SIZE) != FILE_SIZE) {
		perror("write");
		return 1;
	}
	int q = kevent_init(NULL, 0, 0);
	if (q < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		perror("kevent_init/socketpair");
		return 1;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	printf("backend: %s\n", kevent_backend());

	/* 1. The whole file. */
	long long id = kevent_aio_sendfile(q, sv[0], file, 0, FILE_SIZE);
	if (id < 0 && errno == ENOSYS && strcmp(kevent_backend(), "native") == 0) {
		printf("this kevent kernel has no kevent_aio_sendfile (ENOSYS): nothing to show\n");
		return 0;
	}
	CHECK(id > 0, "kevent_aio_sendfile returned %lld", id);
	CHECK(wait_for(q, id, &ev, sv[1], got, &got_len, FILE_SIZE) == 0, "no completion");
	CHECK(bytes_of(&ev) == FILE_SIZE, "completed with %lld bytes", bytes_of(&ev));
	for (int i = 0; i < 1000 && got_len < FILE_SIZE; i++) {
		ssize_t n = read(sv[1], got + got_len, FILE_SIZE - got_len);
		if (n > 0)
			got_len += (size_t)n;
		else {
			struct timespec ms = ts(0, 1000000);
			nanosleep(&ms, NULL);
		}
	}
	CHECK(got_len == FILE_SIZE && memcmp(got, data, FILE_SIZE) == 0,
	      "received %zu bytes, or different ones", got_len);
	printf("sent %d bytes in the background, every byte checked\n", FILE_SIZE);

	/* 2. count == 0, and a range past end of file. */
	long long zero = kevent_aio_sendfile(q, sv[0], file, 0, 0);
	CHECK(zero > 0 && zero != id, "count 0 gave %lld", zero);
	CHECK(kevent_get_events(q, 1, 1, ts(0, 0), &ev, 0) == 1 && bytes_of(&ev) == 0,
	      "count 0 did not complete at once with 0");
	long long tail = kevent_aio_sendfile(q, sv[0], file, FILE_SIZE - 10, 1000);
	got_len = 0;
	CHECK(wait_for(q, tail, &ev, sv[1], got, &got_len, 10) == 0 && bytes_of(&ev) == 10,
	      "a transfer past end of file sent %lld bytes", bytes_of(&ev));

	/* 3. REMOVE cancels a transfer nobody reads. */
	long long slow = kevent_aio_sendfile(q, sv[0], file, 0, FILE_SIZE);
	CHECK(slow > 0, "kevent_aio_sendfile returned %lld", slow);
	memset(&ev, 0, sizeof ev);
	ev.type = KEVENT_AIO;
	ev.id.raw_u64 = (uint64_t)slow;
	CHECK(kevent_ctl(q, KEVENT_CTL_REMOVE, 1, &ev) == 0 &&
	      ev.ret_flags == KEVENT_RET_DONE, "REMOVE: ret_flags %#x", ev.ret_flags);
	CHECK(kevent_get_events(q, 1, 1, ts(0, 200000000), &ev, 0) == 0,
	      "an event after REMOVE (type %u)", ev.type);
	printf("REMOVE cancelled a transfer in flight\n");

	/* 4. Errors of the call itself. */
	int lone = socket(AF_UNIX, SOCK_STREAM, 0);
	errno = 0;
	CHECK(kevent_aio_sendfile(-1, sv[0], file, 0, 1) == -1 && errno == EBADF, "bad queue");
	errno = 0;
	CHECK(kevent_aio_sendfile(q, sv[0], sv[1], 0, 1) == -1 && errno == EINVAL,
	      "a socket as in_fd");
	errno = 0;
	CHECK(kevent_aio_sendfile(q, file, file, 0, 1) == -1 && errno == EINVAL,
	      "a file as sock_fd");
	errno = 0;
	CHECK(kevent_aio_sendfile(q, lone, file, 0, 1) == -1 && errno == ENOTCONN,
	      "an unconnected socket");

	close(lone);
	close(q);
	close(sv[0]);
	close(sv[1]);
	close(file);
	free(data);
	free(got);
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
