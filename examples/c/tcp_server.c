/*
 * tcp_server.c - a small TCP echo server driven by one kevent queue (loopback only).
 *
 * The listening socket is watched with KEVENT_SOCKET_ACCEPT, each accepted connection with
 * KEVENT_SOCKET_RECV, both with KEVENT_REQ_ALWAYS_QUEUE. CLIENTS clients (in the same process, non-blocking) send a line, read
 * the echo and close; the server removes and closes each connection at end of file. Level
 * triggering (D7) means the server only has to handle what is ready now.
 *
 * Build: cc -std=c99 -Wall -Wextra tcp_server.c $(pkg-config --cflags --libs kevent)
 */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CLIENTS 4
#define MAX_ROUNDS 500

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

static void nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static struct ukevent watch(int fd, unsigned int events)
{
	struct ukevent ev;
	memset(&ev, 0, sizeof ev);
	ev.type = KEVENT_SOCKET;
	ev.id.raw[0] = (unsigned int)fd;
	ev.event = events;
	/*
	 * A kevent that is ready at ADD is normally returned by kevent_ctl() and not registered;
	 * ALWAYS_QUEUE registers it and queues it instead, so every event arrives here the same
	 * way (a connection's first line may already be buffered when it is accepted).
	 */
	ev.req_flags = KEVENT_REQ_ALWAYS_QUEUE;
	return ev;
}

int main(void)
{
	alarm(60);
	printf("tcp_server: backend %s\n", kevent_backend() ? kevent_backend() : "(none)");

	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr;
	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = 0; /* any free port */
	socklen_t len = sizeof addr;
	CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
		      listen(lfd, CLIENTS) == 0 &&
		      getsockname(lfd, (struct sockaddr *)&addr, &len) == 0,
	      "listening socket");
	if (failures)
		return 1;
	nonblocking(lfd);

	int q = kevent_init(NULL, 0, 0);
	CHECK(q >= 0, "kevent_init");
	if (q < 0)
		return 1;
	struct ukevent ev = watch(lfd, KEVENT_SOCKET_ACCEPT);
	int r = kevent_ctl(q, KEVENT_CTL_ADD, 1, &ev);
	CHECK(r == 0, "ADD listening socket returned %d", r);

	/* The clients: a blocking connect to a loopback listener completes from the backlog. */
	int client[CLIENTS], replied[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		char line[32];
		client[i] = socket(AF_INET, SOCK_STREAM, 0);
		replied[i] = 0;
		CHECK(connect(client[i], (struct sockaddr *)&addr, sizeof addr) == 0, "connect %d", i);
		nonblocking(client[i]);
		int n = snprintf(line, sizeof line, "hello %d\n", i);
		CHECK(send(client[i], line, (size_t)n, 0) == n, "send %d", i);
	}

	int accepted = 0, closed = 0, answered = 0;
	for (int round = 0; round < MAX_ROUNDS && (closed < CLIENTS || answered < CLIENTS);
	     round++) {
		struct ukevent out[16];
		struct timespec ts = {0, 20000000L}; /* 20 ms: clients are polled in between */
		int n = kevent_get_events(q, 1, 16, ts, out, 0);
		CHECK(n >= 0, "kevent_get_events");
		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			int fd = (int)out[i].id.raw[0];
			if (fd == lfd) {
				int c;
				while ((c = accept(lfd, NULL, NULL)) >= 0) {
					nonblocking(c);
					struct ukevent w = watch(c, KEVENT_SOCKET_RECV);
					r = kevent_ctl(q, KEVENT_CTL_ADD, 1, &w);
					CHECK(r == 0, "ADD connection returned %d", r);
					accepted++;
				}
				continue;
			}
			char buf[256];
			ssize_t got = (out[i].ret_flags & KEVENT_RET_BROKEN) ? 0 : recv(fd, buf, sizeof buf, 0);
			if (got > 0) {
				CHECK(send(fd, buf, (size_t)got, 0) == got, "echo");
			} else if (got == 0 || errno != EAGAIN) {
				/* End of file (or a broken connection): unregister, then close. */
				struct ukevent w = watch(fd, KEVENT_SOCKET_RECV);
				r = kevent_ctl(q, KEVENT_CTL_REMOVE, 1, &w);
				CHECK(r >= 0 && !(w.ret_flags & KEVENT_RET_BROKEN), "REMOVE %d", fd);
				close(fd);
				closed++;
			}
		}
		/* Clients read their echo, then hang up. */
		for (int i = 0; i < CLIENTS; i++) {
			char buf[64], want[32];
			if (replied[i])
				continue;
			ssize_t got = recv(client[i], buf, sizeof buf - 1, 0);
			if (got <= 0)
				continue;
			buf[got] = '\0';
			snprintf(want, sizeof want, "hello %d\n", i);
			CHECK(strcmp(buf, want) == 0, "client %d got %s", i, buf);
			replied[i] = 1;
			answered++;
			close(client[i]);
		}
	}
	CHECK(accepted == CLIENTS, "accepted %d of %d", accepted, CLIENTS);
	CHECK(answered == CLIENTS, "answered %d of %d", answered, CLIENTS);
	CHECK(closed == CLIENTS, "closed %d of %d", closed, CLIENTS);

	close(q);
	close(lfd);
	printf("tcp_server: %d clients served: %s\n", answered, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
