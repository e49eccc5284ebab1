// SPDX-License-Identifier: GPL-2.0
/*
 * SOCKET, PIPE and POLL kevents: a file watched through its own ->poll()
 * and wait queues, the way eventpoll watches it, with no hook in any
 * subsystem.
 *
 * ADD polls the file once with a poll table whose queue procedure hangs a
 * wait entry (struct kevent_pwq) on every wait queue head the file names;
 * the source's wake-ups then call kevent_fd_wake(), in whatever context the
 * source runs, which queues the kevent. What is reported is decided at
 * delivery by polling the file again, as epoll does: a delivered state event
 * always reports what the file has at delivery (LAST_CHECK, D17), so the
 * wake-up key only filters which wake-ups queue the kevent.
 *
 * Lifetime (D10). A kevent holds no reference to its file: closing the last
 * fd closes the socket or pipe as usual. Like an epoll item, the kevent sits
 * on the file's f_kevent list (under file->f_lock), and __fput() calls
 * kevent_release_file() before the file's wait queues can go away: it takes
 * each kevent off the list, pins it and its queue, and unregisters it under
 * q->mtx (silently, as epoll forgets a closed file). While a kevent is
 * registered, its file is therefore alive whenever q->mtx is held. A fd that
 * is closed while a duplicate keeps the file open, or whose number now names
 * another file, is noticed at delivery and on ADD of the same key: the old
 * registration is reported once as BROKEN|DONE with -EBADF (delivery) or
 * replaced (ADD), never mixed up with the new file.
 *
 * Nesting. A kevent queue may watch another kevent queue one level deep: a
 * queue that watches queues cannot be watched by one, and the other way
 * round (checked under kevent_nest_mutex), so there is no cycle and the
 * lockdep subclasses stay 0 and 1. epoll files are refused as POLL targets:
 * epoll's loop check cannot see through a kevent queue.
 */
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include <linux/eventpoll.h>
#include <linux/net.h>
#include <linux/pipe_fs_i.h>
#include <linux/poll.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <net/sock.h>

#include <linux/kevent.h>
#include "kevent.h"
#include "fdpoll.h"
#include "notify.h"

/* One wait queue entry of a kevent on one of its file's wait queue heads. */
struct kevent_pwq {
	wait_queue_entry_t wait;
	wait_queue_head_t *whead;	/* NULL once the head sent POLLFREE */
	struct kevent *k;
	struct kevent_pwq *next;
};

/* The poll table of ADD: its queue procedure hooks the kevent. */
struct kevent_ptable {
	poll_table pt;
	struct kevent *k;
	int err;
};

static struct kmem_cache *kevent_pwq_cache __ro_after_init;
static DEFINE_MUTEX(kevent_nest_mutex);

/* POLL bits a caller may request (KEVENT_POLL_*, the classic POLL* values). */
#define KEVENT_POLL_REQUESTABLE	(KEVENT_POLL_POLLIN | KEVENT_POLL_POLLPRI | \
				 KEVENT_POLL_POLLOUT | KEVENT_POLL_POLLERR | \
				 KEVENT_POLL_POLLHUP | KEVENT_POLL_POLLRDNORM | \
				 KEVENT_POLL_POLLRDBAND | \
				 KEVENT_POLL_POLLWRNORM | \
				 KEVENT_POLL_POLLWRBAND | KEVENT_POLL_POLLMSG | \
				 KEVENT_POLL_POLLRDHUP)

/* The EPOLL* bits that matter to a kevent; errors and hang-ups always. */
static __poll_t kevent_fd_mask(u32 type, u32 event)
{
	__poll_t mask = EPOLLERR | EPOLLHUP;

	switch (type) {
	case KEVENT_SOCKET:
		if (event & (KEVENT_SOCKET_RECV | KEVENT_SOCKET_ACCEPT))
			mask |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
		if (event & KEVENT_SOCKET_SEND)
			mask |= EPOLLOUT | EPOLLWRNORM;
		break;
	case KEVENT_PIPE:
		if (event & KEVENT_SOCKET_RECV)
			mask |= EPOLLIN | EPOLLRDNORM;
		if (event & KEVENT_SOCKET_SEND)
			mask |= EPOLLOUT | EPOLLWRNORM;
		break;
	default:
		mask |= demangle_poll(event & KEVENT_POLL_REQUESTABLE);
		break;
	}
	return mask;
}

/*
 * ADD and MODIFY: the kevent's mask, which is also the key of its own poll
 * table (what a look asks ->poll() for, as epoll asks for an item's events).
 */
static void kevent_fd_set_mask(struct kevent *k)
{
	__poll_t mask = kevent_fd_mask(k->uk.type, k->uk.event);

	WRITE_ONCE(k->fd.mask, mask);
	WRITE_ONCE(k->fd.look._key, mask);
}

/* A socket's pending error as -errno, for kevent_fd_classify(). */
int kevent_fd_sock_error(struct kevent *k)
{
	/* Without CONFIG_NET there are no sockets (and no sock_from_file()). */
	struct socket *sock = IS_ENABLED(CONFIG_NET) ?
			      sock_from_file(k->fd.file) : NULL;
	int err = sock && sock->sk ? READ_ONCE(sock->sk->sk_err) : 0;

	return err ? -err : -EIO;
}

/*
 * A wake-up of one of the file's wait queue heads, under that head's lock,
 * in any context (often softirq or hardirq).
 */
static int kevent_fd_wake(wait_queue_entry_t *wait, unsigned int mode,
			  int sync, void *key)
{
	struct kevent_pwq *pwq = container_of(wait, struct kevent_pwq, wait);
	struct kevent *k = pwq->k;
	__poll_t events = key_to_poll(key);

	if (unlikely(events & POLLFREE)) {
		/*
		 * The head dies before the file (signalfd, binder). Report
		 * first, then let go of the head as the very last step: once
		 * whead is NULL, kevent_fd_unhook() no longer waits on the
		 * head's lock, and a concurrent REMOVE or close may free @k,
		 * its queue and @pwq. Nothing here may touch them after the
		 * store (as ep_poll_callback() does).
		 */
		kevent_notify_bits(k, 0, 0);
		list_del_init(&wait->entry);
		/* Pairs with smp_load_acquire() in kevent_fd_unhook(). */
		smp_store_release(&pwq->whead, NULL);
		return 0;
	}
	/* No key: some sources do not say; the re-poll at delivery decides. */
	if (events && !(events & READ_ONCE(k->fd.mask)))
		return 0;
	/*
	 * What the key names: an asynchronous ring may post it (P38). Inlined
	 * (notify.h): the wake-up is one function, as ep_poll_callback(). @k
	 * is read after q->lock is dropped: it cannot go while its head's lock
	 * is held (kevent_fd_unhook() takes it).
	 */
	if (__kevent_notify(k, 0, (__force u32)(events & READ_ONCE(k->fd.mask)),
			    false))
		kevent_wake_pollers(k->q, k->fd.target ? 1 : 0);
	return 0;
}

static void kevent_fd_qproc(struct file *file, wait_queue_head_t *whead,
			    poll_table *pt)
{
	struct kevent_ptable *kpt = container_of(pt, struct kevent_ptable, pt);
	struct kevent *k = kpt->k;
	struct kevent_pwq *pwq;

	if (kpt->err)
		return;
	pwq = kmem_cache_alloc(kevent_pwq_cache, GFP_KERNEL_ACCOUNT);
	if (!pwq) {
		kpt->err = -ENOMEM;
		return;
	}
	init_waitqueue_func_entry(&pwq->wait, kevent_fd_wake);
	pwq->whead = whead;
	pwq->k = k;
	pwq->next = k->fd.pwq;
	k->fd.pwq = pwq;
	add_wait_queue(whead, &pwq->wait);
}

/* After this no kevent_fd_wake() runs for @k. */
static void kevent_fd_unhook(struct kevent *k)
{
	struct kevent_pwq *pwq, *next;

	for (pwq = k->fd.pwq; pwq; pwq = next) {
		wait_queue_head_t *whead;

		next = pwq->next;
		/* A head that sent POLLFREE is freed after an RCU period. */
		rcu_read_lock();
		/* Pairs with smp_store_release() in kevent_fd_wake(). */
		whead = smp_load_acquire(&pwq->whead);
		if (whead)
			remove_wait_queue(whead, &pwq->wait);
		rcu_read_unlock();
		kmem_cache_free(kevent_pwq_cache, pwq);
	}
	k->fd.pwq = NULL;
}

static int kevent_nest(struct kevent *k, struct kevent_queue *target)
{
	struct kevent_queue *q = k->q;
	int err = 0;

	if (target == q)
		return -EINVAL;
	mutex_lock(&kevent_nest_mutex);
	if (target->watching || q->watched_by) {
		err = -ELOOP;
	} else {
		target->watched_by++;
		q->watching++;
		k->fd.target = target;
	}
	mutex_unlock(&kevent_nest_mutex);
	return err;
}

static void kevent_unnest(struct kevent *k)
{
	mutex_lock(&kevent_nest_mutex);
	k->fd.target->watched_by--;
	k->q->watching--;
	mutex_unlock(&kevent_nest_mutex);
}

static void kevent_fd_disarm(struct kevent *k)
{
	struct file *file = k->fd.file;

	kevent_fd_unhook(k);
	spin_lock(&file->f_lock);
	if (!hlist_unhashed(&k->fd.fnode))
		hlist_del_init(&k->fd.fnode);
	spin_unlock(&file->f_lock);
	if (k->fd.target)
		kevent_unnest(k);
}

/* Whether the file is of the kind the type needs (spec section 3). */
static int kevent_fd_kind(u32 type, struct file *file)
{
	umode_t mode = file_inode(file)->i_mode;

	switch (type) {
	case KEVENT_SOCKET:
		return IS_ENABLED(CONFIG_NET) && sock_from_file(file) ?
		       0 : -EINVAL;
	case KEVENT_PIPE:
		return get_pipe_info(file, false) ? 0 : -EINVAL;
	default:
		if (S_ISREG(mode) || S_ISDIR(mode) || !file_can_poll(file) ||
		    file_is_epoll(file))
			return -EINVAL;
		return 0;
	}
}

static int kevent_fd_arm(struct kevent *k, __poll_t *ready)
{
	struct kevent_ptable kpt = { .k = k };
	int fd = k->uk.id.raw[0];
	struct file *file;
	int err;

	/* P28: the id is the fd, raw[1] must be 0. */
	if (k->uk.id.raw[1])
		return -EINVAL;
	CLASS(fd, f)(fd);
	if (fd_empty(f))
		return -EBADF;
	file = fd_file(f);
	err = kevent_fd_kind(k->uk.type, file);
	if (err)
		return err;
	k->fd.file = file;
	k->fd.fd = fd;
	init_poll_funcptr(&k->fd.look, NULL);
	kevent_fd_set_mask(k);
	k->level = !(k->uk.req_flags & KEVENT_REQ_ET);
	INIT_HLIST_NODE(&k->fd.fnode);
	if (file->f_op == &kevent_fops) {
		err = kevent_nest(k, file->private_data);
		if (err)
			return err;
	}
	spin_lock(&file->f_lock);
	hlist_add_head(&k->fd.fnode, &file->f_kevent);
	spin_unlock(&file->f_lock);

	init_poll_funcptr(&kpt.pt, kevent_fd_qproc);
	kpt.pt._key = k->fd.mask;
	*ready = kevent_fd_poll(k, &kpt.pt, 1);
	if (kpt.err) {
		kevent_fd_disarm(k);
		return kpt.err;
	}
	return 0;
}

static __poll_t kevent_fd_modify(struct kevent *k, int *err)
{
	if (!kevent_fd_current(k)) {
		*err = -EBADF;
		return 0;
	}
	kevent_fd_set_mask(k);
	k->level = !(k->uk.req_flags & KEVENT_REQ_ET);
	/*
	 * The new mask before the re-poll; pairs with the barrier of the
	 * source's wq_has_sleeper() before it wakes (as ep_modify()).
	 */
	smp_mb();
	return kevent_fd_poll_now(k, 1);
}

static int kevent_fd_ready_data(struct kevent *k, __poll_t ready,
				u32 data[2])
{
	switch (kevent_fd_classify(k, ready, data)) {
	case KEVENT_DELIVER:
		return 1;
	case KEVENT_BROKEN:
		return (int)data[1];
	default:
		return 0;
	}
}

static bool kevent_fd_peek(struct kevent *k, int depth)
{
	u32 data[2] = { 0, 0 };

	if (kevent_fd_classify(k, kevent_fd_poll_now(k, depth), data) !=
	    KEVENT_SKIP)
		return true;
	if (kevent_last_check(k))
		return false;
	/* A hint only: the delivery decides under q->lock. */
	return data_race(k->marked);
}

/*
 * An asynchronous ring's producer (P38): an edge-triggered SOCKET or PIPE
 * kevent without LAST_CHECK whose wake-up named ready bits reports them,
 * if the owner's fd still names the file (D10, P39). Everything else is
 * queued and reported by kevent_wait() after a fresh ->poll().
 */
static enum kevent_report kevent_fd_post(struct kevent *k,
					 struct kevent_snap *snap,
					 u32 data[2])
{
	u32 type = k->uk.type, flags = READ_ONCE(k->uk.req_flags);

	if ((type != KEVENT_SOCKET && type != KEVENT_PIPE) || k->fd.target ||
	    !(flags & KEVENT_REQ_ET) || (flags & KEVENT_REQ_LAST_CHECK) ||
	    snap->marked || !snap->bits)
		return KEVENT_SKIP;
	if (!kevent_aring_fd_current(k->q, k->fd.fd, k->fd.file))
		return KEVENT_SKIP;
	return kevent_fd_classify(k, (__force __poll_t)snap->bits, data);
}

static bool kevent_fd_stale(struct kevent *k)
{
	return !kevent_fd_current(k);
}

/* The delivery loop calls kevent_fd_report_now() itself (fdpoll.h). */
static enum kevent_report kevent_fd_report(struct kevent *k,
					   struct kevent_snap *snap,
					   u32 data[2])
{
	return kevent_fd_report_now(k, snap, data);
}

const struct kevent_ops kevent_fd_ops = {
	.slab		= KEVENT_SLAB_FD,
	.arm		= kevent_fd_arm,
	.disarm		= kevent_fd_disarm,
	.modify		= kevent_fd_modify,
	.peek		= kevent_fd_peek,
	.stale		= kevent_fd_stale,
	.report		= kevent_fd_report,
	.ready_data	= kevent_fd_ready_data,
	.post		= kevent_fd_post,
};

/**
 * kevent_release_file - the last close of a file that kevents watch
 * @file: the file, in __fput(), before its ->release()
 *
 * Unregisters every kevent on @file. Context: process or kworker (never uses
 * current); may sleep.
 */
void kevent_release_file(struct file *file)
{
	for (;;) {
		struct kevent_queue *q;
		struct kevent *k;

		spin_lock(&file->f_lock);
		if (hlist_empty(&file->f_kevent)) {
			spin_unlock(&file->f_lock);
			return;
		}
		k = hlist_entry(file->f_kevent.first, struct kevent, fd.fnode);
		hlist_del_init(&k->fd.fnode);
		/* On the list, so not yet disarmed: k and its queue live. */
		refcount_inc(&k->ref);
		q = k->q;
		kevent_queue_get(q);
		spin_unlock(&file->f_lock);

		mutex_lock(&q->mtx);
		if (k->registered)
			kevent_unregister(k);
		mutex_unlock(&q->mtx);
		kevent_put(k);
		kevent_queue_put(q);
		cond_resched();
	}
}

int __init kevent_fd_setup(void)
{
	kevent_pwq_cache = KMEM_CACHE(kevent_pwq, SLAB_ACCOUNT | SLAB_PANIC);
	return 0;
}
