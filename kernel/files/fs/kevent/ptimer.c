// SPDX-License-Identifier: GPL-2.0
/*
 * POSIX_TIMER kevents: timer_create(clock, {SIGEV_KEVENT, queue fd in
 * sigev_notify_thread_id, sival_ptr}) makes the timer report its expiries
 * to the queue instead of sending a signal. The kevent's id is the timer
 * id, its event KEVENT_MASK_ALL, its cookie sival_ptr; ret_data[0] holds the
 * CLOCK_MONOTONIC milliseconds of the last expiry, ret_data[1] the
 * expiries since the last delivery (D8). ADD never creates one (D2).
 *
 * The timer and the kevent point at each other under timr->it_lock: the
 * expiry (posix_timer_queue_signal(), it_lock held, interrupts off) queues
 * the kevent and tells posix-timers that no signal was queued, so interval
 * timers re-arm from the expiry path itself (D9). Whichever side goes first
 * cuts the link: timer_delete() or exit (kevent_posix_timer_detach(),
 * process context) unregisters the kevent under q->mtx; a queue closed or
 * the kevent removed first (disarm) clears timr->it_kevent. The timer holds
 * a reference to the kevent and to the queue (not the queue's file, so
 * close() still reaches ->release), and the k_itimer stays allocated while
 * its kevent is registered: its deletion passes through the detach.
 */
#include <linux/file.h>
#include <linux/posix-timers.h>
#include <linux/spinlock.h>

#include <linux/kevent.h>
#include "kevent.h"

/**
 * kevent_posix_timer_attach - timer_create() with SIGEV_KEVENT
 * @timr: the new timer (its id set, not yet visible to other threads)
 * @fd: the queue fd from the sigevent
 * @cookie: sigev_value.sival_ptr
 *
 * Return: 0, -EBADF (closed fd, or another process's queue), -EINVAL (not a
 * queue), -EAGAIN (no memory, the queue is full, or its user has
 * fs.kevent.max_user_kevents).
 */
int kevent_posix_timer_attach(struct k_itimer *timr, int fd,
			      void __user *cookie)
{
	struct ukevent uk = {
		.type = KEVENT_POSIX_TIMER,
		.event = KEVENT_MASK_ALL,
	};
	struct kevent_queue *q;
	struct kevent *k;
	long err;

	CLASS(fd, f)(fd);
	q = kevent_queue_from(f, &err);
	if (!q)
		return err;
	uk.id.raw_u64 = (u32)timr->it_id;
	/* An opaque cookie, handed back, never dereferenced. */
	uk.ptr = (void __force *)cookie;

	mutex_lock(&q->mtx);
	err = -EAGAIN;
	if (q->count >= q->max || kevent_find(q, uk.type, uk.id.raw_u64))
		goto out;
	k = kevent_alloc(q, &uk, &kevent_ptimer_ops);
	if (IS_ERR(k))
		goto out;
	k->ptimer.timr = timr;
	k->ptimer.overrun = -1;
	/* The timer's references: the kevent and the queue. */
	refcount_inc(&k->ref);
	kevent_queue_get(q);
	kevent_insert(k);
	spin_lock_irq(&timr->it_lock);
	timr->it_kevent = k;
	spin_unlock_irq(&timr->it_lock);
	err = 0;
out:
	mutex_unlock(&q->mtx);
	return err;
}

/*
 * An expiry. Context: timr->it_lock held, interrupts off.
 *
 * A late expiry stands for several: the re-arm after it forwards the timer
 * past now and adds the periods it skipped to it_overrun, which settime
 * resets to -1. So the expiries since the previous one are the growth of
 * it_overrun since then (D8), and 1 after a (re)start.
 */
void kevent_posix_timer_fire(struct k_itimer *timr)
{
	struct kevent_snap add = { .pending = 1 };
	struct kevent *k = timr->it_kevent;
	s64 orun = timr->it_overrun;

	lockdep_assert_held(&timr->it_lock);
	if (!k)
		return;
	if (orun != -1 && orun > k->ptimer.overrun)
		add.pending = min_t(s64, orun - k->ptimer.overrun, U32_MAX);
	k->ptimer.overrun = orun;
	WRITE_ONCE(k->ptimer.last, ktime_get());
	kevent_notify(k, &add, 0);
}

/* The timer goes away (timer_delete(), exit, exec). Context: process. */
void kevent_posix_timer_detach(struct k_itimer *timr)
{
	struct kevent_queue *q;
	struct kevent *k;

	spin_lock_irq(&timr->it_lock);
	k = timr->it_kevent;
	timr->it_kevent = NULL;
	spin_unlock_irq(&timr->it_lock);
	if (!k)
		return;
	q = k->q;
	mutex_lock(&q->mtx);
	k->ptimer.timr = NULL;
	if (k->registered)
		kevent_unregister(k);
	mutex_unlock(&q->mtx);
	kevent_put(k);
	kevent_queue_put(q);
}

/* The queue closes or the kevent is removed first. Context: q->mtx held. */
static void kevent_ptimer_disarm(struct kevent *k)
{
	struct k_itimer *timr = k->ptimer.timr;
	bool linked;

	if (!timr)
		return;
	spin_lock_irq(&timr->it_lock);
	linked = timr->it_kevent == k;
	if (linked)
		timr->it_kevent = NULL;
	spin_unlock_irq(&timr->it_lock);
	k->ptimer.timr = NULL;
	if (linked) {
		/* The timer's references; the file still holds the queue. */
		kevent_put(k);
		kevent_queue_put(k->q);
	}
}

static enum kevent_report kevent_ptimer_report(struct kevent *k,
					       struct kevent_snap *snap,
					       u32 data[2])
{
	if (!snap->pending)
		return KEVENT_SKIP;
	data[0] = (u32)ktime_to_ms(READ_ONCE(k->ptimer.last));
	data[1] = snap->pending;
	return KEVENT_DELIVER;
}

const struct kevent_ops kevent_ptimer_ops = {
	.slab		= KEVENT_SLAB_PTIMER,
	.disarm		= kevent_ptimer_disarm,
	.report		= kevent_ptimer_report,
	.post		= kevent_ptimer_report,
};
