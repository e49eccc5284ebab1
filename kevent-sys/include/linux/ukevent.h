/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ukevent.h - userspace ABI of the kevent event-notification subsystem
 * ("kevent ABI v1", the take26-take30 generation of the original patch).
 *
 * This is kevent-for-Rust's own copy of the header, written from the
 * project's specification (sections 1 and 2). A kernel that carries the
 * kevent patch installs its own linux/ukevent.h; kevent-sys prefers that one.
 */
#ifndef __UKEVENT_H
#define __UKEVENT_H

#include <linux/types.h>

/* Event types. */
#define KEVENT_SOCKET		0
#define KEVENT_INODE		1
#define KEVENT_TIMER		2
#define KEVENT_POLL		3
#define KEVENT_NAIO		4
#define KEVENT_AIO		5
#define KEVENT_PIPE		6
#define KEVENT_SIGNAL		7
#define KEVENT_POSIX_TIMER	8
#define KEVENT_UNOTIFY		9
#define KEVENT_MAX		10

/* Request flags (ukevent.req_flags), set by the caller. */
#define KEVENT_REQ_ONESHOT	0x1
#define KEVENT_REQ_WAKEUP_ALL	0x2
#define KEVENT_REQ_ET		0x4
#define KEVENT_REQ_LAST_CHECK	0x8
#define KEVENT_REQ_ALWAYS_QUEUE	0x10
#define KEVENT_REQ_READY	0x20

/* Return flags (ukevent.ret_flags), set by the queue. */
#define KEVENT_RET_BROKEN	0x1
#define KEVENT_RET_DONE		0x2
#define KEVENT_RET_COPY_FAILED	0x4

/* kevent_ctl() commands. */
#define KEVENT_CTL_ADD		0
#define KEVENT_CTL_REMOVE	1
#define KEVENT_CTL_MODIFY	2
#define KEVENT_CTL_READY	3

/* Flags of kevent_init() (P38). */
#define KEVENT_INIT_ASYNC_RING	0x1	/* events are posted as they occur */

/* Largest ring of a KEVENT_INIT_ASYNC_RING queue (P38). */
#define KEVENT_RING_ASYNC_MAX	65536

/* Flags of kevent_get_events() and kevent_wait(). */
#define KEVENT_FLAGS_ABSTIME	0x1

/* Socket and pipe events. */
#define KEVENT_SOCKET_RECV	0x1
#define KEVENT_SOCKET_ACCEPT	0x2
#define KEVENT_SOCKET_SEND	0x4

/* Inode events. */
#define KEVENT_INODE_CREATE	0x1
#define KEVENT_INODE_REMOVE	0x2

/* Timer events. */
#define KEVENT_TIMER_FIRED	0x1

/* Poll events. */
#define KEVENT_POLL_POLLIN	0x0001
#define KEVENT_POLL_POLLPRI	0x0002
#define KEVENT_POLL_POLLOUT	0x0004
#define KEVENT_POLL_POLLERR	0x0008
#define KEVENT_POLL_POLLHUP	0x0010
#define KEVENT_POLL_POLLNVAL	0x0020
#define KEVENT_POLL_POLLRDNORM	0x0040
#define KEVENT_POLL_POLLRDBAND	0x0080
#define KEVENT_POLL_POLLWRNORM	0x0100
#define KEVENT_POLL_POLLWRBAND	0x0200
#define KEVENT_POLL_POLLMSG	0x0400
#define KEVENT_POLL_POLLREMOVE	0x1000
#define KEVENT_POLL_POLLRDHUP	0x2000

/* Signal events; NOMASK is a bit of id.raw_u64, not of event. */
#define KEVENT_SIGNAL_DELIVERY	0x1
#define KEVENT_SIGNAL_NOMASK	0x8000000000000000ULL

/* AIO events. */
#define KEVENT_AIO_BIO		0x1

/* Event masks. */
#define KEVENT_MASK_ALL		0xffffffff
#define KEVENT_MASK_EMPTY	0x0

/* sigevent notification method for POSIX timers that report to a queue. */
#define SIGEV_KEVENT		0x8

/*
 * The anonymous unions are C11 and the flexible array member is C99, not
 * C++: __extension__ keeps -pedantic builds (C99, C++17, ...) of programs
 * that include this header quiet. It does not change the layout.
 */

/* What a kevent watches. */
__extension__ struct kevent_id {
	union {
		__u32 raw[2];
		__u64 raw_u64 __attribute__((aligned(8)));
	};
};

/* One event, as registered and as delivered. */
__extension__ struct ukevent {
	struct kevent_id id;	/* what is watched */
	__u32 type;		/* KEVENT_SOCKET ... */
	__u32 event;		/* per-type event mask */
	__u32 req_flags;	/* KEVENT_REQ_* */
	__u32 ret_flags;	/* KEVENT_RET_* */
	__u32 ret_data[2];	/* per-type result; ret_data[1] = -errno when broken */
	union {			/* caller cookie, returned untouched */
		__u32 user[2];
		void *ptr;
	};
};

/* Ring of delivered events in the caller's memory. */
__extension__ struct kevent_ring {
	unsigned int ring_kidx;	/* producer index, written only by the queue */
	unsigned int ring_over;	/* wrap counter, written only by the queue */
	struct ukevent event[];	/* num entries */
};

/*
 * KEVENT_INIT_ASYNC_RING (P38): the consumer's index, right after the
 * ring's num entries (at offset 8 + num * 40).
 */
struct kevent_ring_tail {
	unsigned int ring_uidx;	/* consumer index, stored by the consumer */
	unsigned int ring_resv;	/* written 0 by kevent_init, never read */
};

#endif /* __UKEVENT_H */
