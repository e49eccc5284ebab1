/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kevent hooks for the rest of the kernel.
 *
 * A kevent that watches a file (SOCKET, PIPE, POLL) holds no reference to
 * it: like an epoll item it lives on the file's f_kevent list, and the last
 * close unregisters it before the file's wait queues can go away. SIGNAL
 * kevents live on signal_struct::kevent_signals and see every signal sent
 * to the process; SIGEV_KEVENT POSIX timers report to a queue.
 */
#ifndef _LINUX_KEVENT_H
#define _LINUX_KEVENT_H

#include <linux/fs.h>
#include <linux/sched/signal.h>

struct k_itimer;

#if defined(CONFIG_KEVENT) && defined(CONFIG_POSIX_TIMERS)
int kevent_posix_timer_attach(struct k_itimer *timr, int fd,
			      void __user *cookie);
void kevent_posix_timer_fire(struct k_itimer *timr);
void kevent_posix_timer_detach(struct k_itimer *timr);
#else
/* Not reached: good_sigevent() refuses SIGEV_KEVENT without kevent. */
static inline int kevent_posix_timer_attach(struct k_itimer *timr, int fd,
					    void __user *cookie)
{
	return -EINVAL;
}

static inline void kevent_posix_timer_fire(struct k_itimer *timr) { }
static inline void kevent_posix_timer_detach(struct k_itimer *timr) { }
#endif

#ifdef CONFIG_KEVENT
void kevent_release_file(struct file *file);
bool kevent_signal_send(struct task_struct *t, int sig, bool forced);
void kevent_signal_flush(struct task_struct *tsk);

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

/*
 * A signal is being sent to @t's process (siglock held): reports it to the
 * process's SIGNAL kevents. True means NOMASK: drop it. @forced: a signal
 * the kernel must deliver (never dropped).
 */
static inline bool kevent_signal(struct task_struct *t, int sig, bool forced)
{
	if (likely(hlist_empty(&t->signal->kevent_signals)))
		return false;
	return kevent_signal_send(t, sig, forced);
}

/* Exit of the thread group, or exec: signal kevents stop watching. */
static inline void kevent_signal_exit(struct task_struct *tsk)
{
	if (!hlist_empty(&tsk->signal->kevent_signals))
		kevent_signal_flush(tsk);
}
#else
static inline void kevent_release(struct file *file) { }
static inline bool kevent_signal(struct task_struct *t, int sig, bool forced)
{
	return false;
}

static inline void kevent_signal_exit(struct task_struct *tsk) { }
#endif

#endif /* _LINUX_KEVENT_H */
