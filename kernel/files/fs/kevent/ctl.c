// SPDX-License-Identifier: GPL-2.0
/*
 * kevent_ctl(): ADD, REMOVE, MODIFY and READY, one entry at a time.
 *
 * Entries are read and written back one by one, each inside one user
 * access window (kevent_ctl_read(), kevent_ctl_result()) or with
 * copy_to_user(): the kernel never allocates in proportion to @num. ADD
 * writes back, to the start of the array and in order, the entries that
 * were ready at once or failed, and returns how many; REMOVE and MODIFY
 * write every entry back in place and return 0 (D14); READY returns how
 * many it marked and copies the missing ones to the start.
 *
 * @num may be anything up to UINT_MAX, and an array of one READY entry
 * repeated over zero pages costs its caller nothing: so q->mtx is let go
 * every KEVENT_CTL_BATCH entries (a watched file's __fput() waits on it),
 * the loop reschedules, and a fatal signal ends it with what was done. The
 * counts are longs: they cannot overflow.
 */
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kevent.h"

/*
 * The type registry: what ADD accepts. POSIX_TIMER kevents come only from
 * timer_create() (ptimer.c), AIO ones from kevent_aio_sendfile() (aio.c);
 * NAIO, AIO and unknown types answer -ENOSYS (D2).
 */
static const struct kevent_ops *kevent_type_ops(u32 type)
{
	switch (type) {
	case KEVENT_SOCKET:
	case KEVENT_PIPE:
	case KEVENT_POLL:
		return &kevent_fd_ops;
	case KEVENT_TIMER:
		return &kevent_timer_ops;
	case KEVENT_UNOTIFY:
		return &kevent_user_ops;
	case KEVENT_SIGNAL:
		return &kevent_signal_ops;
	case KEVENT_INODE:
		return &kevent_inode_ops;
	default:
		return NULL;
	}
}

/*
 * The request flags the queue keeps: POLL always re-checks (section 4), an
 * AIO request ends with its one event whatever MODIFY says (P36).
 */
static u32 kevent_effective_flags(u32 type, u32 req_flags)
{
	switch (type) {
	case KEVENT_POLL:
		return req_flags | KEVENT_REQ_LAST_CHECK;
	case KEVENT_AIO:
		return req_flags | KEVENT_REQ_ONESHOT;
	default:
		return req_flags;
	}
}

static void kevent_entry_failed(struct ukevent *e, int err)
{
	e->ret_flags = KEVENT_RET_BROKEN | KEVENT_RET_DONE;
	e->ret_data[0] = 0;
	e->ret_data[1] = (u32)err;
}

/* Whether what a state source has now is something to report. */
static int kevent_ready_data(struct kevent *k, __poll_t ready,
			     u32 data[2])
{
	if (!k->ops->ready_data)
		return 0;
	return k->ops->ready_data(k, ready, data);
}

/*
 * Reads one entry in five 8-byte loads, inline: copy_from_user() would
 * call out and loop over the 40 bytes, once per entry.
 */
static __always_inline int kevent_ctl_read(struct ukevent *e,
					   const struct ukevent __user *src)
{
	const u64 __user *from = (const u64 __user *)src;
	u64 *to = (u64 *)e;
	unsigned int j;

	BUILD_BUG_ON(sizeof(*e) != 5 * sizeof(u64));
	if (!kevent_user_access_begin(&from, sizeof(*src)))
		return -EFAULT;
	for (j = 0; j < 5; j++)
		unsafe_get_user(to[j], &from[j], efault);
	user_access_end();
	return 0;
efault:
	user_access_end();
	return -EFAULT;
}

/*
 * REMOVE and MODIFY write an entry back in place: only its results,
 * ret_flags and ret_data, can differ from what the caller wrote.
 */
static __always_inline int kevent_ctl_result(struct ukevent __user *dst,
					     const struct ukevent *e)
{
	if (!kevent_user_access_begin(&dst, sizeof(*dst)))
		return -EFAULT;
	unsafe_put_user(e->ret_flags, &dst->ret_flags, efault);
	/* Both words in one 8-byte store. */
	unsafe_copy_to_user((void __user *)dst->ret_data,
			    (const void *)e->ret_data, sizeof(dst->ret_data),
			    efault);
	user_access_end();
	return 0;
efault:
	user_access_end();
	return -EFAULT;
}

/* Entries processed under one hold of q->mtx. */
#define KEVENT_CTL_BATCH	64

/* Return: true if @e is to be written back. */
static bool kevent_add_one(struct kevent_queue *q, struct ukevent *e)
{
	const struct kevent_ops *ops = kevent_type_ops(e->type);
	struct kevent_snap add = { .pending = 1 };
	u32 data[2] = { 0, 0 };
	struct kevent *k, *old;
	/* Set by kevent_find_link() whenever it is used: not zeroed first. */
	struct kevent_pos pos __uninitialized;
	__poll_t ready = 0;
	int err, now;

	if (!ops) {
		err = -ENOSYS;
		goto fail;
	}
	err = -EINVAL;
	if (e->req_flags & ~KEVENT_KNOWN_REQ_FLAGS)
		goto fail;
	/* One walk of the tree for the lookup and the insert below. */
	old = kevent_find_link(q, e->type, e->id.raw_u64, &pos);
	if (old) {
		/* D10: a registration whose fd now names another file. */
		err = -EEXIST;
		if (!old->ops->stale || !old->ops->stale(old))
			goto fail;
		kevent_unregister(old);
		/* The erase moved nodes: where the key goes, again. */
		if (WARN_ON_ONCE(kevent_find_link(q, e->type, e->id.raw_u64,
						  &pos)))
			goto fail;
	}
	err = -ENOSPC;
	if (q->count >= q->max)
		goto fail;
	k = kevent_alloc(q, e, ops);
	if (IS_ERR(k)) {
		err = PTR_ERR(k);
		goto fail;
	}
	k->uk.req_flags = kevent_effective_flags(e->type, e->req_flags);
	err = ops->arm(k, &ready);
	if (err) {
		kevent_put(k);
		goto fail;
	}
	now = kevent_ready_data(k, ready, data);
	if (!(k->uk.req_flags & KEVENT_REQ_READY) && now &&
	    !(k->uk.req_flags & KEVENT_REQ_ALWAYS_QUEUE)) {
		/* Ready at once: written back, not registered. */
		kevent_unregister(k);
		if (now < 0) {
			err = now;
			goto fail;
		}
		e->ret_flags = KEVENT_RET_DONE;
		e->ret_data[0] = data[0];
		e->ret_data[1] = data[1];
		return true;
	}
	/* Nothing entered or left the tree since the walk (q->mtx held). */
	kevent_link(k, &pos);
	if (k->uk.req_flags & KEVENT_REQ_READY) {
		add.marked = true;
		kevent_notify(k, &add, 0);
	} else if (now) {
		kevent_notify(k, &add, 0);
	}
	return false;
fail:
	kevent_entry_failed(e, err);
	return true;
}

/*
 * MODIFY (D17): the new mask is evaluated as EPOLL_CTL_MOD does: ready now
 * means queued (in ET mode as one new edge), not ready means nothing of the
 * kevent stays queued.
 */
static void kevent_modify_one(struct kevent *k, struct ukevent *e)
{
	struct kevent_queue *q = k->q;
	struct kevent_snap add = { .pending = 1 };
	u32 data[2] = { 0, 0 };
	__poll_t ready;
	int err = 0;

	if (e->req_flags & ~KEVENT_KNOWN_REQ_FLAGS) {
		kevent_entry_failed(e, -EINVAL);
		return;
	}
	/* Read under q->lock by INODE's fsnotify handler. */
	WRITE_ONCE(k->uk.event, e->event);
	WRITE_ONCE(k->uk.req_flags,
		   kevent_effective_flags(e->type, e->req_flags));
	k->uk.ptr = e->ptr;
	if (!k->ops->modify)
		return;
	ready = k->ops->modify(k, &err);
	if (err) {
		kevent_unregister(k);
		kevent_entry_failed(e, err);
		return;
	}
	spin_lock_irq(&q->lock);
	if (k->counted)
		kevent_dequeue(k);
	k->pending = 0;
	k->marked = false;
	spin_unlock_irq(&q->lock);
	if (kevent_ready_data(k, ready, data))
		kevent_notify(k, &add, 0);
}

/**
 * kevent_ctl_entries - kevent_ctl() on a queue
 * @q: the queue
 * @cmd: KEVENT_CTL_*
 * @num: entries at @arg
 * @arg: the caller's entries
 *
 * Context: process; takes q->mtx.
 * Return: see the file comment, or -errno.
 */
long kevent_ctl_entries(struct kevent_queue *q, unsigned int cmd,
			unsigned int num, struct ukevent __user *arg)
{
	unsigned long i, back = 0;
	/*
	 * Each entry is read whole before any use, and a failed read ends
	 * the loop: the 40 bytes are not zeroed first.
	 */
	struct ukevent e __uninitialized;
	long ret = 0;

	if (cmd > KEVENT_CTL_READY)
		return -EINVAL;
	if (num && !arg)
		return -EFAULT;
	if (!access_ok(arg, array_size(num, sizeof(e))))
		return -EFAULT;
	if (cmd == KEVENT_CTL_READY && !num) {
		kevent_wake_waiters(q);
		return 0;
	}

	mutex_lock(&q->mtx);
	/* A kevent an asynchronous ring reported as done is gone (P40). */
	kevent_aring_reap(q);
	for (i = 0; i < num; i++) {
		struct kevent *k;
		bool write = true;

		if (i && !(i % KEVENT_CTL_BATCH)) {
			mutex_unlock(&q->mtx);
			/* Killed: the process goes, what was done stays. */
			if (fatal_signal_pending(current))
				goto out;
			cond_resched();
			mutex_lock(&q->mtx);
		}
		if (kevent_ctl_read(&e, &arg[i])) {
			ret = -EFAULT;
			break;
		}
		switch (cmd) {
		case KEVENT_CTL_ADD:
			write = kevent_add_one(q, &e);
			break;
		case KEVENT_CTL_READY:
			k = kevent_find(q, e.type, e.id.raw_u64);
			write = !k;
			if (k) {
				struct kevent_snap add = {
					.pending = 1,
					.marked = true,
				};

				kevent_notify(k, &add, 0);
				ret++;
			}
			break;
		default:
			k = kevent_find(q, e.type, e.id.raw_u64);
			if (!k) {
				kevent_entry_failed(&e, -ENOENT);
				break;
			}
			e.ret_flags = KEVENT_RET_DONE;
			e.ret_data[0] = 0;
			e.ret_data[1] = 0;
			if (cmd == KEVENT_CTL_REMOVE)
				kevent_unregister(k);
			else
				kevent_modify_one(k, &e);
			break;
		}
		if (!write)
			continue;
		/* REMOVE and MODIFY in place; ADD and READY to the start. */
		if (cmd == KEVENT_CTL_REMOVE || cmd == KEVENT_CTL_MODIFY) {
			if (kevent_ctl_result(&arg[i], &e)) {
				ret = -EFAULT;
				break;
			}
			continue;
		}
		if (copy_to_user(&arg[back], &e, sizeof(e))) {
			ret = -EFAULT;
			break;
		}
		back++;
	}
	mutex_unlock(&q->mtx);
out:
	if (ret < 0)
		return ret;
	return cmd == KEVENT_CTL_ADD ? back : ret;
}
