// SPDX-License-Identifier: GPL-2.0
/*
 * UNOTIFY kevents: any id the caller chooses, ready only when named by
 * kevent_ctl(READY) or added with REQ_READY. ret_data[0] counts the marks
 * since the last delivery.
 */
#include "kevent.h"

static int kevent_user_arm(struct kevent *k, __poll_t *ready)
{
	*ready = 0;
	return 0;
}

static void kevent_user_disarm(struct kevent *k)
{
}

static enum kevent_report kevent_user_report(struct kevent *k,
					     struct kevent_snap *snap,
					     u32 data[2])
{
	if (!snap->pending)
		return KEVENT_SKIP;
	data[0] = snap->pending;
	return KEVENT_DELIVER;
}

const struct kevent_ops kevent_user_ops = {
	.slab		= KEVENT_SLAB_USER,
	.arm		= kevent_user_arm,
	.disarm		= kevent_user_disarm,
	.report		= kevent_user_report,
	.post		= kevent_user_report,
};
