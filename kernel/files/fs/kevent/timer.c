// SPDX-License-Identifier: GPL-2.0
/*
 * TIMER kevents: one CLOCK_MONOTONIC hrtimer per kevent.
 *
 * id.raw[0] is the interval's seconds, id.raw[1] its nanoseconds (not both
 * zero). The timer is periodic unless ONESHOT. Each expiry adds to the
 * kevent's pending count (D8: ret_data[1] = expirations since the last
 * delivery; ret_data[0] = the CLOCK_MONOTONIC milliseconds, low 32 bits, of
 * the last one).
 *
 * A periodic timer is re-armed by the delivery of its expiry, not by its
 * callback, as timerfd re-arms when read: the callback queues the kevent
 * and stops, so a timer nobody consumes costs one callback, not one per
 * period (or per KEVENT_TIMER_MIN_PERIOD), and a queue that outlives its
 * owner stops firing. The count stays what elapsed time says: the period
 * boundaries form a fixed grid (@next), and the delivery adds the
 * boundaries passed since the callback before it re-arms at the next one.
 * A period shorter than KEVENT_TIMER_MIN_PERIOD is re-armed at least that
 * far ahead; the count is exact all the same.
 *
 * The callback runs in hardirq context with interrupts off: it takes only
 * q->lock, under which the grid lives. The delivery re-arms under q->mtx
 * after dropping q->lock; disarming is hrtimer_cancel() under q->mtx, which
 * waits for a running callback.
 */
#include <linux/hrtimer.h>
#include <linux/ktime.h>

#include "kevent.h"

/* Shortest time between two callbacks of one timer. */
#define KEVENT_TIMER_MIN_PERIOD	(100 * NSEC_PER_USEC)

/*
 * The period boundaries @now has passed since the last count, which become
 * the last expiry; @next moves past @now. Context: q->lock held.
 */
static u32 kevent_timer_elapsed(struct kevent_timer *kt, ktime_t now)
{
	u64 periods;

	if (ktime_before(now, kt->next))
		return 0;
	periods = 1 + ktime_divns(ktime_sub(now, kt->next), kt->interval);
	kt->last = ktime_add_ns(kt->next, (periods - 1) * kt->interval);
	kt->next = ktime_add(kt->last, kt->interval);
	return min_t(u64, periods, U32_MAX);
}

static enum hrtimer_restart kevent_timer_fire(struct hrtimer *t)
{
	struct kevent_timer *kt = container_of(t, struct kevent_timer, timer);
	struct kevent *k = container_of(kt, struct kevent, timer);
	struct kevent_queue *q = k->q;
	struct kevent_snap add = { .pending = 1 };
	enum hrtimer_restart ret = HRTIMER_NORESTART;
	unsigned long flags;
	bool newly;

	spin_lock_irqsave(&q->lock, flags);
	if (kevent_is_oneshot(k)) {
		kt->last = kt->next;
	} else {
		/* The timer never fires before kt->next: at least 1. */
		add.pending = kevent_timer_elapsed(kt,
						   hrtimer_cb_get_time(t)) ?: 1;
		kt->stopped = true;
	}
	newly = kevent_notify_locked(k, &add);
	/*
	 * Posted into an asynchronous ring (not queued, not done): that was
	 * its delivery, so it runs on at the next boundary (P38).
	 */
	if (newly && kt->stopped && list_empty(&k->link) && !k->dead) {
		ktime_t fire = kt->next;

		kt->stopped = false;
		if (kt->interval < KEVENT_TIMER_MIN_PERIOD)
			fire = max(fire, ktime_add_ns(hrtimer_cb_get_time(t),
						      KEVENT_TIMER_MIN_PERIOD));
		hrtimer_set_expires(t, fire);
		ret = HRTIMER_RESTART;
	}
	spin_unlock_irqrestore(&q->lock, flags);
	if (newly)
		kevent_wake_pollers(q, 0);
	return ret;
}

static int kevent_timer_arm(struct kevent *k, __poll_t *ready)
{
	struct kevent_timer *kt = &k->timer;
	u32 sec = k->uk.id.raw[0], nsec = k->uk.id.raw[1];

	if (nsec >= NSEC_PER_SEC || (!sec && !nsec))
		return -EINVAL;
	kt->interval = ktime_set(sec, nsec);
	hrtimer_init(&kt->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
	kt->timer.function = kevent_timer_fire;
	/* Not yet in the tree: nothing else sees kt. */
	kt->next = ktime_add(ktime_get(), kt->interval);
	hrtimer_start(&kt->timer, kt->next, HRTIMER_MODE_ABS);
	*ready = 0;
	return 0;
}

static void kevent_timer_disarm(struct kevent *k)
{
	hrtimer_cancel(&k->timer.timer);
}

/*
 * A delivery: the periods elapsed since the callback join its count, and a
 * stopped periodic timer starts again at the next boundary.
 */
static enum kevent_report kevent_timer_report(struct kevent *k,
					      struct kevent_snap *snap,
					      u32 data[2])
{
	struct kevent_timer *kt = &k->timer;
	struct kevent_queue *q = k->q;
	ktime_t fire = 0, last;
	bool rearm;

	spin_lock_irq(&q->lock);
	rearm = kt->stopped;
	if (rearm) {
		ktime_t now = ktime_get();
		u32 more = kevent_timer_elapsed(kt, now);

		snap->pending = snap->pending + more < snap->pending ?
				U32_MAX : snap->pending + more;
		kt->stopped = false;
		fire = kt->next;
		if (kt->interval < KEVENT_TIMER_MIN_PERIOD)
			fire = max(fire,
				   ktime_add_ns(now, KEVENT_TIMER_MIN_PERIOD));
	}
	last = kt->last;
	spin_unlock_irq(&q->lock);
	/* Only a holder of q->mtx starts or cancels the timer. */
	if (rearm)
		hrtimer_start(&kt->timer, fire, HRTIMER_MODE_ABS);
	if (!snap->pending)
		return KEVENT_SKIP;
	data[0] = (u32)ktime_to_ms(last);
	data[1] = snap->pending;
	return KEVENT_DELIVER;
}

/* An asynchronous ring's producer: the count the callback made (P38). */
static enum kevent_report kevent_timer_post(struct kevent *k,
					    struct kevent_snap *snap,
					    u32 data[2])
{
	if (!snap->pending)
		return KEVENT_SKIP;
	data[0] = (u32)ktime_to_ms(k->timer.last);
	data[1] = snap->pending;
	return KEVENT_DELIVER;
}

const struct kevent_ops kevent_timer_ops = {
	.slab		= KEVENT_SLAB_TIMER,
	.arm		= kevent_timer_arm,
	.disarm		= kevent_timer_disarm,
	.report		= kevent_timer_report,
	.post		= kevent_timer_post,
};
