/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What an fd kevent (SOCKET, PIPE, POLL) reports at delivery: inlined into
 * fd.c and into the delivery loop (queue.c), which calls
 * kevent_fd_report_now() directly for fd kevents instead of through
 * kevent_fd_ops.report: it runs once per delivered fd kevent.
 */
#ifndef _FS_KEVENT_FDPOLL_H
#define _FS_KEVENT_FDPOLL_H

#include <linux/fdtable.h>
#include <linux/poll.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>

#include "kevent.h"

#define KEVENT_POLL_ALWAYS	(KEVENT_POLL_POLLERR | KEVENT_POLL_POLLHUP | \
				 KEVENT_POLL_POLLNVAL)

int kevent_fd_sock_error(struct kevent *k);

/*
 * What @rev (already masked) means for this kevent (spec section 5). Unless
 * it says KEVENT_SKIP it writes both words of @data (the delivery loop does
 * not zero them first). Inlined: once per delivered fd kevent.
 */
static __always_inline enum kevent_report
kevent_fd_classify(struct kevent *k, __poll_t rev, u32 data[2])
{
	u32 event = k->uk.event, ready = 0;

	switch (k->uk.type) {
	case KEVENT_SOCKET:
		if (rev & EPOLLERR) {
			data[0] = 0;
			data[1] = (u32)kevent_fd_sock_error(k);
			return KEVENT_BROKEN;
		}
		if (rev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))
			ready |= event & (KEVENT_SOCKET_RECV |
					  KEVENT_SOCKET_ACCEPT);
		if (rev & EPOLLOUT)
			ready |= event & KEVENT_SOCKET_SEND;
		if (!ready && (rev & EPOLLHUP)) {
			data[0] = 0;
			data[1] = (u32)-EPIPE;
			return KEVENT_BROKEN;
		}
		break;
	case KEVENT_PIPE:
		if (rev & EPOLLIN)
			ready |= event & KEVENT_SOCKET_RECV;
		if (rev & EPOLLOUT)
			ready |= event & KEVENT_SOCKET_SEND;
		if (!ready && (rev & (EPOLLHUP | EPOLLERR))) {
			data[0] = 0;
			data[1] = (u32)-EPIPE;
			return KEVENT_BROKEN;
		}
		break;
	default:
		ready = mangle_poll(rev) & (event | KEVENT_POLL_ALWAYS);
		break;
	}
	if (!ready)
		return KEVENT_SKIP;
	data[0] = ready;
	data[1] = 0;
	return KEVENT_DELIVER;
}

/*
 * kevent_fd_poll(), kevent_fd_poll_now() and kevent_fd_current() are inlined
 * (as vfs_poll() itself): each runs once per delivered fd kevent.
 */
static __always_inline __poll_t kevent_fd_poll(struct kevent *k,
					       poll_table *pt, int depth)
{
	struct file *file = k->fd.file;
	__poll_t rev;

	/*
	 * The file has a ->poll(): ADD checked (a socket's and a pipe's do,
	 * kevent_fd_kind() tests any other), and a file's f_op does not
	 * change. So it is called as vfs_poll() does, without vfs_poll()'s
	 * test for a missing one (once per look at a queued fd kevent).
	 */
	if (k->fd.target)
		rev = kevent_queue_poll(file, pt, depth);
	else
		rev = file->f_op->poll(file, pt);
	return rev & READ_ONCE(k->fd.mask);
}

/*
 * The file's readiness now, hooking nothing, through the kevent's own poll
 * table (set with its mask on ADD and MODIFY, fd.c): a look at a queued
 * kevent (two per HTTP keep-alive response) sets up no table.
 */
static __always_inline __poll_t kevent_fd_poll_now(struct kevent *k,
						   int depth)
{
	return kevent_fd_poll(k, &k->fd.look, depth);
}

/* D10: whether the registered fd still names the registered file. */
static __always_inline bool kevent_fd_current(struct kevent *k)
{
	struct file *f;

	rcu_read_lock();
	f = files_lookup_fd_raw(current->files, k->fd.fd);
	rcu_read_unlock();
	/* Only compared: the registered file is alive (fd.c: Lifetime). */
	return f == k->fd.file;
}

/*
 * At delivery: what the file has now, as epoll reports it (a wake-up only
 * says "look again"). A READY mark without LAST_CHECK is delivered once even
 * when the file has nothing, with ret_data[0] == 0 (decision P6).
 *
 * D10 is checked only for what would be reported (decision P75): a look
 * that finds nothing, the level re-check of a drained socket above all,
 * reports nothing through any registration, so whether the fd still names
 * the file cannot matter to it. The poll comes first and is safe either
 * way: the registered file is alive while q->mtx is held (fd.c: Lifetime),
 * and it is the registered file that is polled, never the fd's. Each
 * outcome tests D10 on its own path: the usual one (DELIVER) then pays one
 * test and a call of the fd-table lookup, which -Os keeps out of line; a
 * single test after the branches, with the lookup inline, measured 2
 * instructions dearer per delivered event (calls-rounds wait_64_ready).
 * Unless it returns KEVENT_SKIP it writes both words of @data.
 */
static __always_inline enum kevent_report
kevent_fd_report_now(struct kevent *k, struct kevent_snap *snap, u32 data[2])
{
	__poll_t rev = kevent_fd_poll_now(k, 1);
	enum kevent_report r;

	/* Nothing (a drained level socket): no type has anything to say. */
	r = likely(rev) ? kevent_fd_classify(k, rev, data) : KEVENT_SKIP;
	if (likely(r == KEVENT_DELIVER)) {
		if (likely(kevent_fd_current(k)))
			return KEVENT_DELIVER;
	} else if (r == KEVENT_SKIP) {
		if (kevent_last_check(k) || !snap->marked)
			return KEVENT_SKIP;
		/* The READY mark alone (P6): nothing to report. */
		data[0] = 0;
		data[1] = 0;
		if (kevent_fd_current(k))
			return KEVENT_DELIVER;
	} else if (kevent_fd_current(k)) {
		return r;
	}
	data[0] = 0;
	data[1] = (u32)-EBADF;
	return KEVENT_BROKEN;
}

#endif /* _FS_KEVENT_FDPOLL_H */
