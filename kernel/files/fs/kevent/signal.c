// SPDX-License-Identifier: GPL-2.0
/*
 * SIGNAL kevents: a signal sent to the owner process is reported to every
 * queue of the process that watches it (D8: ret_data[0] counts deliveries
 * since the last report).
 *
 * The kevents of a process hang on signal_struct::kevent_signals, under
 * sighand->siglock like signal_struct::posix_timers. __send_signal_locked()
 * and send_sigqueue() call kevent_signal_send() first, with siglock held and
 * interrupts off: it queues every matching kevent (siglock -> q->lock). With
 * KEVENT_SIGNAL_NOMASK the signal is then dropped before it is queued: no
 * handler runs and the default action does not happen, whichever thread
 * has it unblocked. NOMASK never drops SIGKILL or SIGSTOP (refused at ADD),
 * a signal of a group that is exiting, or a synchronous fault the kernel
 * forces (a dropped SIGSEGV would re-run the faulting instruction forever).
 *
 * A queue watches one signal once: its key is the signal number and the
 * NOMASK bit, nothing else (id bits 32-62 are -EINVAL), and the second
 * variant of a watched signal is -EEXIST (decision P27). So a signal walks
 * at most one kevent per queue of the process, and a process has at most
 * fs.kevent.max_user_queues queues per user: the walk under siglock with
 * interrupts off is bounded.
 *
 * fork() starts with an empty list (D11: signal kevents are not
 * inherited); exit and exec flush it (kevent_signal_flush()), after which
 * the kevents stay registered in their queues but inert.
 */
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/signal.h>

#include <linux/kevent.h>
#include "kevent.h"

/**
 * kevent_signal_send - a signal is about to be sent to @t's process
 * @t: the target thread
 * @sig: the signal
 * @forced: a synchronous signal the kernel forces (never dropped)
 *
 * Context: @t's siglock held, interrupts off.
 * Return: true if the signal is to be dropped (NOMASK).
 */
bool kevent_signal_send(struct task_struct *t, int sig, bool forced)
{
	struct kevent_snap add = { .pending = 1 };
	struct kevent *k;
	bool drop = false;

	lockdep_assert_held(&t->sighand->siglock);
	hlist_for_each_entry(k, &t->signal->kevent_signals, sig.node) {
		if (k->sig.signo != sig)
			continue;
		kevent_notify(k, &add, 0);
		drop |= k->sig.nomask;
	}
	return drop && !forced && !(t->signal->flags & SIGNAL_GROUP_EXIT);
}

/* Exit or exec: the process's signal kevents stop watching. */
void kevent_signal_flush(struct task_struct *tsk)
{
	struct hlist_node *tmp;
	unsigned long flags;
	struct kevent *k;

	/* The sanctioned way to the RCU-managed sighand (sparse). */
	if (!lock_task_sighand(tsk, &flags))
		return;
	hlist_for_each_entry_safe(k, tmp, &tsk->signal->kevent_signals,
				  sig.node)
		hlist_del_init(&k->sig.node);
	unlock_task_sighand(tsk, &flags);
}

static int kevent_signal_arm(struct kevent *k, __poll_t *ready)
{
	u64 id = k->uk.id.raw_u64;
	u32 signo = (u32)id;
	unsigned long flags;

	*ready = 0;
	if (!signo || signo > _NSIG || sig_kernel_only(signo))
		return -EINVAL;
	/* P27: the key is the signal and NOMASK, nothing else. */
	if ((id & ~KEVENT_SIGNAL_NOMASK) >> 32)
		return -EINVAL;
	/* One kevent per signal per queue, with or without NOMASK. */
	if (kevent_find(k->q, KEVENT_SIGNAL, id ^ KEVENT_SIGNAL_NOMASK))
		return -EEXIST;
	k->sig.signo = signo;
	k->sig.nomask = id & KEVENT_SIGNAL_NOMASK;
	/* A task in a system call has its sighand: this cannot fail. */
	if (!lock_task_sighand(current, &flags))
		return -ESRCH;
	k->sig.owner = get_pid(task_tgid(current));
	hlist_add_head(&k->sig.node, &current->signal->kevent_signals);
	unlock_task_sighand(current, &flags);
	return 0;
}

/* May run in a kworker (the queue's ->release): never uses current. */
static void kevent_signal_disarm(struct kevent *k)
{
	struct task_struct *t;
	unsigned long flags;

	rcu_read_lock();
	/*
	 * No task or no sighand: the process has exited, and its exit
	 * flushed the list before either went away.
	 */
	t = pid_task(k->sig.owner, PIDTYPE_TGID);
	if (t && lock_task_sighand(t, &flags)) {
		if (!hlist_unhashed(&k->sig.node))
			hlist_del_init(&k->sig.node);
		unlock_task_sighand(t, &flags);
	}
	rcu_read_unlock();
	put_pid(k->sig.owner);
}

static enum kevent_report kevent_signal_report(struct kevent *k,
					       struct kevent_snap *snap,
					       u32 data[2])
{
	if (!snap->pending)
		return KEVENT_SKIP;
	data[0] = snap->pending;
	return KEVENT_DELIVER;
}

const struct kevent_ops kevent_signal_ops = {
	.slab		= KEVENT_SLAB_SIGNAL,
	.arm		= kevent_signal_arm,
	.disarm		= kevent_signal_disarm,
	.report		= kevent_signal_report,
	.post		= kevent_signal_report,
};
