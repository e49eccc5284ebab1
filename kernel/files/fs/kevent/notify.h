/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The producer's path: how a source's report queues a kevent and wakes a
 * waiter, under q->lock. Inlined into queue.c's kevent_notify*() and into
 * fd.c's kevent_fd_wake(), which runs once per socket or pipe wake-up; the
 * delivery loops (queue.c) count what they queue with the same helpers.
 */
#ifndef _FS_KEVENT_NOTIFY_H
#define _FS_KEVENT_NOTIFY_H

#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/spinlock.h>

#include "kevent.h"

void kevent_own(struct kevent_queue *q, struct kevent *k, int d);

/*
 * Whether a waiter asleep holds its own: only then do kevent_count() and
 * queue.c's kevent_stamp() and kevent_uncount() call kevent_own(). Read once
 * per hold of q->lock by the delivery loops (q->holders changes only under
 * it), not once per kevent.
 */
static __always_inline bool kevent_owners(const struct kevent_queue *q)
{
	lockdep_assert_held(&q->lock);
	return !list_empty(&q->holders);
}

/*
 * @k, just put on a ready list or batch, counts in q->nready; @owners is
 * kevent_owners(). Inlined, as queue.c's kevent_stamp(): once per delivered
 * kevent, usually with no waiter asleep.
 */
static __always_inline void kevent_count(struct kevent_queue *q,
					 struct kevent *k, bool owners)
{
	k->counted = true;
	q->nready++;
	if (owners)
		kevent_own(q, k, 1);
}

/*
 * What kevent_notify(), kevent_notify_bits() and kevent_notify_locked() do
 * under q->lock, inlined into each and into kevent_fd_wake() (fd.c), every
 * fd kevent's wake-up: a source's wake-up then reaches the waiter's with no
 * call of its own. The snapshot comes by value, so that an fd wake-up's
 * constant parts fold away; only an asynchronous ring's producer needs it
 * in memory.
 */
static __always_inline bool __kevent_notify_locked(struct kevent *k,
						   u32 pending, u32 bits,
						   bool marked)
{
	struct kevent_queue *q = k->q;

	lockdep_assert_held(&q->lock);
	if (unlikely(k->dead))
		return false;
	/*
	 * An asynchronous ring: posted as it occurs if it can be (ring.c),
	 * unless events queued earlier, or one in a delivery's hand, would
	 * enter the ring after it (P40: the ring keeps their order).
	 */
	if (q->aring && !q->nready && !q->nbusy && list_empty(&k->link)) {
		const struct kevent_snap add = {
			.pending = pending,
			.bits = bits,
			.marked = marked,
		};

		if (kevent_aring_post(k, &add))
			return true;
	}
	if (pending)
		k->pending = k->pending + pending < k->pending ?
			     U32_MAX : k->pending + pending;
	k->bits |= bits;
	if (marked)
		k->marked = true;
	if (!list_empty(&k->link)) {
		/* Queued, or a level kevent in a delivery's hand. */
		k->merged = true;
		return false;
	}
	list_add_tail(&k->link, &q->ready);
	kevent_count(q, k, kevent_owners(q));
	/* Pairs with the waiter's check under q->lock: no lost wake. */
	if (!list_empty(&q->waiters))
		kevent_wake_locked(q, READ_ONCE(k->uk.req_flags) &
				      KEVENT_REQ_WAKEUP_ALL);
	return true;
}

/*
 * kevent_notify(), kevent_notify_bits() and kevent_fd_wake()'s, q->lock
 * taken and dropped. Return: whether @k was newly queued: the caller then
 * wakes ->poll() waiters (kevent_wake_pollers()), reading what it needs for
 * that only then.
 */
static __always_inline bool __kevent_notify(struct kevent *k, u32 pending,
					    u32 bits, bool marked)
{
	struct kevent_queue *q = k->q;
	unsigned long flags;
	bool newly;

	spin_lock_irqsave(&q->lock, flags);
	newly = __kevent_notify_locked(k, pending, bits, marked);
	spin_unlock_irqrestore(&q->lock, flags);
	return newly;
}

#endif /* _FS_KEVENT_NOTIFY_H */
