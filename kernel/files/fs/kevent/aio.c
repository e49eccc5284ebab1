// SPDX-License-Identifier: GPL-2.0
/*
 * kevent_aio_sendfile() (spec D18): a file sent to a connected stream socket
 * by a kernel worker; the end is one ONESHOT KEVENT_AIO event.
 *
 * The caller's thread only sets a request up: it takes its own references
 * to both files and to the caller's credentials and memory cgroup,
 * registers a KEVENT_AIO kevent under a new id of the queue (a per-queue
 * counter, never an address) and queues the work. The work runs on the
 * unbound "kevent_aio" workqueue with the caller's credentials: it moves
 * the page cache's pages into a pipe of its own (splice_direct_to_actor(),
 * as sendfile() does) and hands them to the socket with sock_sendmsg() and
 * MSG_SPLICE_PAGES | MSG_DONTWAIT | MSG_NOSIGNAL: no copy, never a sleep on
 * a full socket, never SIGPIPE. A full socket parks the request: its wait
 * entry on the socket's wait queue queues the work again when the socket
 * becomes writable, fails or hangs up (io_uring's approach), so a slow peer
 * holds no worker. A request moves at most KEVENT_AIO_TURN bytes per run of
 * the work, then queues itself behind the others; the workqueue runs at most
 * KEVENT_AIO_ACTIVE of them at once.
 *
 * Who owns a request (@state, under @lock):
 *
 *   WORK    the work is queued or running; it holds a reference to the
 *           kevent and to the queue, and it alone may release them
 *   PARKED  nothing runs; the wait entry is on the socket's wait queue and
 *           whoever takes the request out of PARKED owns it: the wake
 *           function (queues the work) or disarm (releases it)
 *   GONE    released: the files are closed, the result (if any) final
 *
 * Cancellation (REMOVE, the queue's release) is disarm(), under q->mtx: it
 * sets @cancelled, and releases a parked request at once; a request in WORK
 * sees @cancelled before its next chunk (at most KEVENT_AIO_CHUNK bytes
 * still go out) and releases itself. Either way it never reaches the queue
 * afterwards: the unregistered kevent is dead, so a completion that raced
 * with the REMOVE is not queued (kevent_notify_locked()) or was dequeued by
 * it. The work never takes q->mtx, so disarm never waits for it.
 *
 * Lock order: the socket's wait queue lock, then @lock (the wake function);
 * nothing is taken inside @lock.
 */
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/memcontrol.h>
#include <linux/net.h>
#include <linux/pipe_fs_i.h>
#include <linux/sched/mm.h>
#include <linux/security.h>
#include <linux/socket.h>
#include <linux/splice.h>
#include <linux/syscalls.h>
#include <linux/uio.h>
#include <linux/workqueue.h>

#include "kevent.h"

/*
 * Bytes a request moves per run of its work before the others' turn, and
 * per splice between two looks at @cancelled (what the pipe holds).
 */
#define KEVENT_AIO_TURN		(256 * 1024)
#define KEVENT_AIO_CHUNK	(64 * 1024)

/*
 * Runs of the work at once, over every queue: a run blocks only on the page
 * cache (a read from disk), never on a socket, so a few suffice; an unbound
 * workqueue would otherwise start a worker per queued request.
 */
#define KEVENT_AIO_ACTIVE	16

enum {
	KEVENT_AIO_WORK,
	KEVENT_AIO_PARKED,
	KEVENT_AIO_GONE,
};

/* What a run of the work ends with. */
enum kevent_aio_next {
	KEVENT_AIO_AGAIN,	/* queued again, or parked: not ours now */
	KEVENT_AIO_DONE,	/* ended: report it */
	KEVENT_AIO_CANCELLED,	/* cancelled: release it, report nothing */
};

static struct workqueue_struct *kevent_aio_wq __ro_after_init;

static struct kevent *kevent_of(struct kevent_aio *a)
{
	return container_of(a, struct kevent, aio);
}

/* The files, credentials and cgroup of a request that no work will run. */
static void kevent_aio_drop(struct kevent_aio *a)
{
	if (a->whead)
		remove_wait_queue(a->whead, &a->wait);
	a->whead = NULL;
	if (a->sock)
		fput(a->sock);
	if (a->in)
		fput(a->in);
	a->sock = NULL;
	a->in = NULL;
	put_cred(a->cred);
	a->cred = NULL;
	mem_cgroup_put(a->memcg);
	a->memcg = NULL;
}

/* Drop, and the work's references to the kevent and its queue. */
static void kevent_aio_release(struct kevent_aio *a)
{
	struct kevent *k = kevent_of(a);
	struct kevent_queue *q = k->q;

	kevent_aio_drop(a);
	kevent_put(k);
	kevent_queue_put(q);
}

/*
 * The splice actor: the pipe's pages to the socket, without blocking.
 * Returns the bytes sent (the pipe's buffers up to them released), or
 * -errno when none were.
 */
static int kevent_aio_actor(struct pipe_inode_info *pipe,
			    struct splice_desc *sd)
{
	struct kevent_aio *a = sd->u.data;
	struct socket *sock = sock_from_file(a->sock);
	unsigned int mask = pipe->ring_size - 1;
	size_t left = sd->total_len;
	int sent = 0;

	while (left) {
		unsigned int tail, nr = 0;
		struct msghdr msg = {
			.msg_flags = MSG_SPLICE_PAGES | MSG_DONTWAIT |
				     MSG_NOSIGNAL,
		};
		struct pipe_buffer *buf;
		struct bio_vec bv[16];
		size_t len = 0;
		int ret, n;

		for (tail = pipe->tail; tail != pipe->head &&
		     nr < ARRAY_SIZE(bv) && len < left; tail++) {
			size_t seg;

			buf = &pipe->bufs[tail & mask];
			seg = min_t(size_t, buf->len, left - len);
			if (!seg)
				continue;
			ret = pipe_buf_confirm(pipe, buf);
			if (ret)
				return sent ?: ret;
			bvec_set_page(&bv[nr++], buf->page, seg, buf->offset);
			len += seg;
		}
		if (!nr)
			break;
		iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, nr, len);
		n = sock_sendmsg(sock, &msg);
		if (n <= 0)
			return sent ?: n;
		sent += n;
		left -= n;
		/* Consume what went out. */
		for (tail = pipe->tail, ret = n; ret > 0; ) {
			size_t seg;

			buf = &pipe->bufs[tail & mask];
			seg = min_t(size_t, ret, buf->len);
			buf->offset += seg;
			buf->len -= seg;
			ret -= seg;
			if (!buf->len) {
				pipe_buf_release(pipe, buf);
				tail++;
			}
		}
		pipe->tail = tail;
		/* The socket took less: it is full. */
		if (n < len)
			break;
	}
	/* All of it went out: what is left are empty buffers. */
	if (!left) {
		for (; pipe->tail != pipe->head; pipe->tail++) {
			struct pipe_buffer *buf = &pipe->bufs[pipe->tail & mask];

			if (buf->ops)
				pipe_buf_release(pipe, buf);
		}
	}
	return sent;
}

/* Up to @len bytes from a->pos: how many went out, 0 at EOF, or -errno. */
static ssize_t kevent_aio_splice(struct kevent_aio *a, size_t len)
{
	struct splice_desc sd = {
		.total_len = len,
		.pos = a->pos,
		.u.data = a,
	};

	return splice_direct_to_actor(a->in, &sd, kevent_aio_actor);
}

/* Whether the request was cancelled; if so it is the caller's to release. */
static bool kevent_aio_cancelled(struct kevent_aio *a)
{
	bool cancelled;

	spin_lock_irq(&a->lock);
	cancelled = a->cancelled;
	if (cancelled)
		a->state = KEVENT_AIO_GONE;
	spin_unlock_irq(&a->lock);
	return cancelled;
}

/* The wait entry on the socket: any context, the socket's wait lock held. */
static int kevent_aio_wake(struct wait_queue_entry *wait, unsigned int mode,
			   int sync, void *key)
{
	struct kevent_aio *a = container_of(wait, struct kevent_aio, wait);
	__poll_t mask = key_to_poll(key);
	unsigned long flags;

	if (mask && !(mask & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
		return 0;
	spin_lock_irqsave(&a->lock, flags);
	if (a->state == KEVENT_AIO_PARKED) {
		list_del_init(&wait->entry);
		a->state = KEVENT_AIO_WORK;
		queue_work(kevent_aio_wq, &a->work);
	} else {
		/* The work is about to park: it must not. */
		a->woken = true;
	}
	spin_unlock_irqrestore(&a->lock, flags);
	return 0;
}

struct kevent_aio_pt {
	poll_table pt;
	struct kevent_aio *a;
};

static void kevent_aio_qproc(struct file *file, wait_queue_head_t *head,
			     poll_table *pt)
{
	struct kevent_aio *a = container_of(pt, struct kevent_aio_pt, pt)->a;

	/* A socket has one wait queue; take the first head only. */
	if (a->whead)
		return;
	a->whead = head;
	add_wait_queue(head, &a->wait);
}

/*
 * The socket is full: hang the wait entry on it, then park unless it became
 * writable (or failed) meanwhile. Return: true parked (the request is no
 * longer the caller's), false try again now.
 */
static bool kevent_aio_park(struct kevent_aio *a)
{
	struct kevent_aio_pt apt = { .a = a };
	__poll_t mask;

	/* An entry the wake function took off: off the head for good. */
	if (a->whead)
		remove_wait_queue(a->whead, &a->wait);
	a->whead = NULL;
	spin_lock_irq(&a->lock);
	a->woken = false;
	spin_unlock_irq(&a->lock);

	init_poll_funcptr(&apt.pt, kevent_aio_qproc);
	mask = vfs_poll(a->sock, &apt.pt);
	if (!a->whead) {
		/* Nothing to wait on: the socket cannot be waited for. */
		a->err = -EAGAIN;
		return false;
	}

	spin_lock_irq(&a->lock);
	if (!a->cancelled && !a->woken &&
	    !(mask & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		a->state = KEVENT_AIO_PARKED;
		spin_unlock_irq(&a->lock);
		return true;
	}
	spin_unlock_irq(&a->lock);
	remove_wait_queue(a->whead, &a->wait);
	a->whead = NULL;
	return false;
}

/* One run of the work, with the caller's credentials and cgroup. */
static enum kevent_aio_next kevent_aio_run(struct kevent_aio *a)
{
	size_t turn = KEVENT_AIO_TURN;

	for (;;) {
		ssize_t n;

		if (kevent_aio_cancelled(a))
			return KEVENT_AIO_CANCELLED;
		if (!a->left || a->err)
			return KEVENT_AIO_DONE;
		if (!turn) {
			queue_work(kevent_aio_wq, &a->work);
			return KEVENT_AIO_AGAIN;
		}
		n = kevent_aio_splice(a, min_t(u64, a->left,
					       min_t(size_t, turn,
						     KEVENT_AIO_CHUNK)));
		if (n > 0) {
			a->pos += n;
			a->left -= n;
			a->sent += n;
			turn -= n;
			cond_resched();
		} else if (!n) {
			/* End of file: fewer bytes, not an error. */
			return KEVENT_AIO_DONE;
		} else if (n == -EAGAIN) {
			if (kevent_aio_park(a))
				return KEVENT_AIO_AGAIN;
		} else {
			a->err = n;
		}
	}
}

static void kevent_aio_work(struct work_struct *work)
{
	struct kevent_aio *a = container_of(work, struct kevent_aio, work);
	struct kevent_snap add = { .pending = 1 };
	struct mem_cgroup *old_memcg;
	const struct cred *old_cred;
	enum kevent_aio_next next;
	bool cancelled;

	old_cred = override_creds(a->cred);
	old_memcg = set_active_memcg(a->memcg);
	next = kevent_aio_run(a);
	set_active_memcg(old_memcg);
	revert_creds(old_cred);
	if (next == KEVENT_AIO_AGAIN)
		return;
	if (next == KEVENT_AIO_DONE) {
		spin_lock_irq(&a->lock);
		cancelled = a->cancelled;
		a->state = KEVENT_AIO_GONE;
		spin_unlock_irq(&a->lock);
		/* The peer sees EOF without waiting for the delivery. */
		kevent_aio_drop(a);
		if (!cancelled) {
			/* The result before @done: kevent_aio_report() acquires. */
			smp_store_release(&a->done, true);
			kevent_notify(kevent_of(a), &add, 0);
		}
	}
	kevent_aio_release(a);
}

/* The checks of D18 on the two files and the range. */
static int kevent_aio_check(struct file *in, struct file *out, u64 offset,
			    u64 count)
{
	struct socket *sock;
	int err;

	if (!S_ISREG(file_inode(in)->i_mode) || !(in->f_mode & FMODE_READ) ||
	    !(in->f_mode & FMODE_LSEEK) || !in->f_op->splice_read)
		return -EINVAL;
	sock = sock_from_file(out);
	if (!sock || sock->type != SOCK_STREAM)
		return -EINVAL;
	if (READ_ONCE(sock->state) != SS_CONNECTED)
		return -ENOTCONN;
	/* Past the largest file offset (P36). */
	if (offset > LLONG_MAX || count > LLONG_MAX - offset)
		return -EINVAL;
	err = security_file_permission(in, MAY_READ);
	if (err)
		return err;
	return security_file_permission(out, MAY_WRITE);
}

/* REMOVE, the queue's release, or the delivery of the end. */
static void kevent_aio_disarm(struct kevent *k)
{
	struct kevent_aio *a = &k->aio;
	bool parked;

	spin_lock_irq(&a->lock);
	a->cancelled = true;
	parked = a->state == KEVENT_AIO_PARKED;
	if (parked)
		a->state = KEVENT_AIO_GONE;
	spin_unlock_irq(&a->lock);
	/* A request in WORK releases itself at its next chunk. */
	if (parked)
		kevent_aio_release(a);
}

/* ->poll() of the queue: a READY mark on a running request is nothing. */
static bool kevent_aio_peek(struct kevent *k, int depth)
{
	/* Pairs with the work's store-release of the result. */
	return smp_load_acquire(&k->aio.done);
}

static enum kevent_report kevent_aio_report(struct kevent *k,
					    struct kevent_snap *snap,
					    u32 data[2])
{
	struct kevent_aio *a = &k->aio;

	/* A READY mark on a running request: nothing yet (P36). */
	if (!smp_load_acquire(&a->done))
		return KEVENT_SKIP;
	if (a->err) {
		data[0] = lower_32_bits(a->sent);
		data[1] = (u32)a->err;
		return KEVENT_BROKEN;
	}
	data[0] = lower_32_bits(a->sent);
	data[1] = upper_32_bits(a->sent);
	return KEVENT_DELIVER;
}

static const struct kevent_ops kevent_aio_ops = {
	.slab		= KEVENT_SLAB_AIO,
	/* No arm: never through ADD (kevent_type_ops() has no AIO). */
	.disarm		= kevent_aio_disarm,
	.peek		= kevent_aio_peek,
	.report		= kevent_aio_report,
	/* Posted into an asynchronous ring as it completes (P38): never sleeps. */
	.post		= kevent_aio_report,
};

/*
 * Registers the request's kevent and starts it. Takes over @in and @out.
 * Return: the request id, or -errno.
 */
static long kevent_aio_start(struct kevent_queue *q, struct file *in,
			     struct file *out, u64 offset, u64 count)
{
	struct ukevent uk = {
		.type = KEVENT_AIO,
		.event = KEVENT_MASK_ALL,
		.req_flags = KEVENT_REQ_ONESHOT,
	};
	struct kevent_snap add = { .pending = 1 };
	struct kevent_aio *a;
	struct kevent *k;
	long id;

	mutex_lock(&q->mtx);
	if (q->count >= q->max) {
		k = ERR_PTR(-ENOSPC);
		goto fail;
	}
	uk.id.raw_u64 = q->aio_last + 1;
	k = kevent_alloc(q, &uk, &kevent_aio_ops);
	if (IS_ERR(k))
		goto fail;
	id = ++q->aio_last;
	a = &k->aio;
	INIT_WORK(&a->work, kevent_aio_work);
	init_waitqueue_func_entry(&a->wait, kevent_aio_wake);
	spin_lock_init(&a->lock);
	a->in = in;
	a->sock = out;
	a->cred = get_current_cred();
	a->memcg = get_mem_cgroup_from_mm(current->mm);
	a->pos = offset;
	a->left = count;
	kevent_insert(k);
	if (!count) {
		/* Complete at once with 0 (D18). */
		a->state = KEVENT_AIO_GONE;
		kevent_aio_drop(a);
		/* Under q->mtx, as the delivery: no barrier needed, kept alike. */
		smp_store_release(&a->done, true);
		kevent_notify(k, &add, 0);
	} else {
		a->state = KEVENT_AIO_WORK;
		refcount_inc(&k->ref);
		kevent_queue_get(q);
		queue_work(kevent_aio_wq, &a->work);
	}
	mutex_unlock(&q->mtx);
	return id;
fail:
	mutex_unlock(&q->mtx);
	fput(out);
	fput(in);
	return PTR_ERR(k);
}

SYSCALL_DEFINE5(kevent_aio_sendfile, int, fd, int, sock_fd, int, in_fd,
		u64, offset, u64, count)
{
	struct kevent_queue *q;
	struct file *in, *out;
	long err;

	CLASS(fd, f)(fd);
	q = kevent_queue_from(f, &err);
	if (!q)
		return err;
	if (!kevent_aio_wq)
		return -ENOMEM;
	/* O_PATH: not open for reading (EINVAL), as the fallback says. */
	in = fget_raw(in_fd);
	if (!in)
		return -EBADF;
	out = fget(sock_fd);
	if (!out) {
		fput(in);
		return -EBADF;
	}
	err = kevent_aio_check(in, out, offset, count);
	if (err) {
		fput(out);
		fput(in);
		return err;
	}
	return kevent_aio_start(q, in, out, offset, count);
}

void __init kevent_aio_setup(void)
{
	kevent_aio_wq = alloc_workqueue("kevent_aio", WQ_UNBOUND,
					KEVENT_AIO_ACTIVE);
}
