/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kevent hooks for the rest of the kernel.
 *
 * A kevent that watches a file (SOCKET, PIPE, POLL) holds no reference to
 * it: like an epoll item it lives on the file's f_kevent list, and the last
 * close unregisters it before the file's wait queues can go away.
 */
#ifndef _LINUX_KEVENT_H
#define _LINUX_KEVENT_H

#include <linux/fs.h>

#ifdef CONFIG_KEVENT
void kevent_release_file(struct file *file);

/* Called by __fput() right after eventpoll_release(). */
static inline void kevent_release(struct file *file)
{
	/*
	 * Nobody else holds a reference to @file any more, so nobody can add
	 * a kevent to it concurrently: an unlocked look at the list is exact.
	 */
	if (likely(hlist_empty(&file->f_kevent)))
		return;
	kevent_release_file(file);
}
#else
static inline void kevent_release(struct file *file) { }
#endif

#endif /* _LINUX_KEVENT_H */
