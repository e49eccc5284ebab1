// SPDX-License-Identifier: GPL-2.0
/*
 * TIMER kevents: one CLOCK_MONOTONIC hrtimer per kevent.
 *
 * id.raw[0] is the interval's seconds, id.raw[1] its nanoseconds (not both
 * zero). The timer is periodic unless ONESHOT. Each expiry adds to the
 * kevent's pending count (D8: ret_data[1] = expirations since the last
 * delivery; ret_data[0] = the CLOCK_MONOTONIC milliseconds, low 32 bits, of
 * the last one). The callback keeps its own grid of period boundaries, so
 * the count is exact even when it fires late or when a short period is
 * rate-limited to KEVENT_TIMER_MIN_PERIOD between callbacks.
 *
 * The callback runs in hardirq context with interrupts off: it takes only
 * q->lock (through kevent_notify()). Disarming is hrtimer_cancel() under
 * q->mtx, which waits for a running callback.
 */
#include <linux/hrtimer.h>
#include <linux/ktime.h>

#include "kevent.h"

/* Shortest time between two callbacks of one timer. */
#define KEVENT_TIMER_MIN_PERIOD	(100 * NSEC_PER_USEC)

static enum hrtimer_restart kevent_timer_fire(struct hrtimer *t)
{
	struct kevent_timer *kt = container_of(t, struct kevent_timer, timer);
	struct kevent *k = container_of(kt, struct kevent, timer);
	struct kevent_snap add = { .pending = 1 };
	ktime_t now, last, fire;
	u64 periods;

	if (kevent_is_oneshot(k)) {
		WRITE_ONCE(kt->last, kt->next);
		kevent_notify(k, &add, 0);
		return HRTIMER_NORESTART;
	}
	now = hrtimer_cb_get_time(t);
	/* The timer never fires before kt->next. */
	periods = 1 + ktime_divns(ktime_sub(now, kt->next), kt->interval);
	last = ktime_add_ns(kt->next, (periods - 1) * kt->interval);
	kt->next = ktime_add(last, kt->interval);
	WRITE_ONCE(kt->last, last);
	add.pending = min_t(u64, periods, U32_MAX);
	fire = kt->next;
	if (kt->interval < KEVENT_TIMER_MIN_PERIOD)
		fire = max(fire, ktime_add_ns(now, KEVENT_TIMER_MIN_PERIOD));
	hrtimer_set_expires(t, fire);
	kevent_notify(k, &add, 0);
	return HRTIMER_RESTART;
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
	kt->next = ktime_add(ktime_get(), kt->interval);
	hrtimer_start(&kt->timer, kt->next, HRTIMER_MODE_ABS);
	*ready = 0;
	return 0;
}

static void kevent_timer_disarm(struct kevent *k)
{
	hrtimer_cancel(&k->timer.timer);
}

static enum kevent_report kevent_timer_report(struct kevent *k,
					      const struct kevent_snap *snap,
					      u32 data[2])
{
	if (!snap->pending)
		return KEVENT_SKIP;
	data[0] = (u32)ktime_to_ms(READ_ONCE(k->timer.last));
	data[1] = snap->pending;
	return KEVENT_DELIVER;
}

const struct kevent_ops kevent_timer_ops = {
	.slab		= KEVENT_SLAB_TIMER,
	.occurrence	= true,
	.arm		= kevent_timer_arm,
	.disarm		= kevent_timer_disarm,
	.report		= kevent_timer_report,
};
