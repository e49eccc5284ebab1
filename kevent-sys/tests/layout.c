/*
 * The C side of tests/layout.rs (ctest-style): compiled with the system C compiler against
 * the same linux/ukevent.h the Rust bindings came from, it prints one "name value" line for
 * every size, alignment, field offset, field size and constant of spec sections 1 and 2.
 * tests/layout.rs compares each line with the Rust side and with the spec's value, and fails
 * if a name is missing on either side.
 */
#include <stddef.h>
#include <stdio.h>
#include <linux/ukevent.h>

#define VALUE(name, v) printf("%s %llu\n", name, (unsigned long long)(v))

#define STRUCT(s)                                               \
	do {                                                    \
		VALUE("sizeof(" #s ")", sizeof(struct s));      \
		VALUE("alignof(" #s ")", _Alignof(struct s));   \
	} while (0)

#define FIELD(s, f)                                                             \
	do {                                                                    \
		VALUE("offsetof(" #s "." #f ")", offsetof(struct s, f));        \
		VALUE("sizeof(" #s "." #f ")", sizeof(((struct s *)0)->f));     \
	} while (0)

#define CONST(c) VALUE(#c, c)

int main(void)
{
	/* Section 1: structures. */
	STRUCT(kevent_id);
	FIELD(kevent_id, raw);
	FIELD(kevent_id, raw_u64);

	STRUCT(ukevent);
	FIELD(ukevent, id);
	FIELD(ukevent, type);
	FIELD(ukevent, event);
	FIELD(ukevent, req_flags);
	FIELD(ukevent, ret_flags);
	FIELD(ukevent, ret_data);
	FIELD(ukevent, user);
	FIELD(ukevent, ptr);

	STRUCT(kevent_ring);
	FIELD(kevent_ring, ring_kidx);
	FIELD(kevent_ring, ring_over);
	/* A flexible array member has no sizeof: report its offset and its element size. */
	VALUE("offsetof(kevent_ring.event)", offsetof(struct kevent_ring, event));
	VALUE("sizeof(kevent_ring.event[0])", sizeof(((struct kevent_ring *)0)->event[0]));

	/* Section 2: constants. */
	CONST(KEVENT_SOCKET);
	CONST(KEVENT_INODE);
	CONST(KEVENT_TIMER);
	CONST(KEVENT_POLL);
	CONST(KEVENT_NAIO);
	CONST(KEVENT_AIO);
	CONST(KEVENT_PIPE);
	CONST(KEVENT_SIGNAL);
	CONST(KEVENT_POSIX_TIMER);
	CONST(KEVENT_UNOTIFY);
	CONST(KEVENT_MAX);

	CONST(KEVENT_REQ_ONESHOT);
	CONST(KEVENT_REQ_WAKEUP_ALL);
	CONST(KEVENT_REQ_ET);
	CONST(KEVENT_REQ_LAST_CHECK);
	CONST(KEVENT_REQ_ALWAYS_QUEUE);
	CONST(KEVENT_REQ_READY);

	CONST(KEVENT_RET_BROKEN);
	CONST(KEVENT_RET_DONE);
	CONST(KEVENT_RET_COPY_FAILED);

	CONST(KEVENT_CTL_ADD);
	CONST(KEVENT_CTL_REMOVE);
	CONST(KEVENT_CTL_MODIFY);
	CONST(KEVENT_CTL_READY);

	CONST(KEVENT_FLAGS_ABSTIME);

	CONST(KEVENT_SOCKET_RECV);
	CONST(KEVENT_SOCKET_ACCEPT);
	CONST(KEVENT_SOCKET_SEND);

	CONST(KEVENT_INODE_CREATE);
	CONST(KEVENT_INODE_REMOVE);

	CONST(KEVENT_TIMER_FIRED);

	CONST(KEVENT_POLL_POLLIN);
	CONST(KEVENT_POLL_POLLPRI);
	CONST(KEVENT_POLL_POLLOUT);
	CONST(KEVENT_POLL_POLLERR);
	CONST(KEVENT_POLL_POLLHUP);
	CONST(KEVENT_POLL_POLLNVAL);
	CONST(KEVENT_POLL_POLLRDNORM);
	CONST(KEVENT_POLL_POLLRDBAND);
	CONST(KEVENT_POLL_POLLWRNORM);
	CONST(KEVENT_POLL_POLLWRBAND);
	CONST(KEVENT_POLL_POLLMSG);
	CONST(KEVENT_POLL_POLLREMOVE);
	CONST(KEVENT_POLL_POLLRDHUP);

	CONST(KEVENT_SIGNAL_DELIVERY);
	CONST(KEVENT_SIGNAL_NOMASK);

	CONST(KEVENT_AIO_BIO);

	CONST(KEVENT_MASK_ALL);
	CONST(KEVENT_MASK_EMPTY);

	CONST(SIGEV_KEVENT);
	return 0;
}
