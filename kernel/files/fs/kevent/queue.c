// SPDX-License-Identifier: GPL-2.0
/*
 * kevent queues: the file, the registration tree, the ready list, waiting,
 * delivery and the ring in the caller's memory.
 *
 * A kevent is "queued" while its @link is on a list, and then counted in
 * q->nready: q->ready, the part of it a delivery set aside, or the private
 * list of level kevents a call delivered while it holds q->mtx (counted as
 * they are put on it, so that nothing walks it again). That list goes back on
 * q->ready when the call ends and before it sleeps (as ep_poll() puts level
 * items back), so other waiters and ->poll() always see every ready
 * kevent. A call that may sleep remembers what it delivered (struct
 * kevent_sink), so it never delivers one twice, and its wake-up target
 * ignores the queued kevents stamped with its call (struct kevent_waiter),
 * so it never spins on them. Producers only add a kevent that is not
 * queued, and otherwise merge into its pending state: nothing is lost while
 * a delivery has it in hand.
 *
 * The ring (spec sections 3, D12, D13) is ordinary user memory. It is
 * written only with copy_to_user()/put_user() from the owner's system calls
 * under q->mtx, never from a callback. Entries are stored before ring_kidx
 * (smp_wmb() between them pairs with the consumer's load-acquire of
 * ring_kidx); the kernel's own kidx/uidx/over are authoritative and the
 * caller's copies are never read back.
 */
#include <linux/anon_inodes.h>
#include <linux/bsearch.h>
#include <linux/capability.h>
#include <linux/compat.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/overflow.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>

#include "kevent.h"
#include "fdpoll.h"
#include "notify.h"

static struct kmem_cache *kevent_caches[KEVENT_NR_SLABS] __ro_after_init;

static const struct {
	const char *name;
	size_t size;
} kevent_slabs[KEVENT_NR_SLABS] = {
	[KEVENT_SLAB_FD] = { "kevent_fd", offsetofend(struct kevent, fd) },
	[KEVENT_SLAB_TIMER] = { "kevent_timer",
				offsetofend(struct kevent, timer) },
	[KEVENT_SLAB_USER] = { "kevent_user", offsetof(struct kevent, fd) },
	[KEVENT_SLAB_SIGNAL] = { "kevent_signal",
				 offsetofend(struct kevent, sig) },
	[KEVENT_SLAB_PTIMER] = { "kevent_ptimer",
				 offsetofend(struct kevent, ptimer) },
	[KEVENT_SLAB_INODE] = { "kevent_inode",
				offsetofend(struct kevent, inode) },
	[KEVENT_SLAB_AIO] = { "kevent_aio", offsetofend(struct kevent, aio) },
};

/* Registrations per queue; /sys/kernel/kevent/max_per_queue. */
unsigned int kevent_max_per_queue __read_mostly = 1U << 20;

/* fs.kevent.unprivileged_disabled: 0 all, 1 CAP_SYS_ADMIN only, 2 none. */
int kevent_unprivileged_disabled __read_mostly;

/* ---------------------------------------------------------------------
 * Objects
 */

void kevent_queue_get(struct kevent_queue *q)
{
	refcount_inc(&q->ref);
}

void kevent_queue_put(struct kevent_queue *q)
{
	if (!refcount_dec_and_test(&q->ref))
		return;
	WARN_ON_ONCE(!RB_EMPTY_ROOT(&q->tree));
	dec_ucount(q->ucounts, UCOUNT_KEVENT_QUEUES);
	mmdrop(q->mm);
	kfree(q);
}

/**
 * kevent_alloc - a new kevent of @q, charged to the queue's user
 * @q: the queue
 * @uk: what was registered
 * @ops: its type
 *
 * Beyond fs.kevent.max_user_kevents only a caller with CAP_SYS_RESOURCE
 * gets one, uncharged (as pipe buffers beyond pipe-user-pages-soft, or
 * POSIX message queues beyond queues_max).
 *
 * Return: the kevent, ERR_PTR(-ENOSPC) beyond the limit, or
 * ERR_PTR(-ENOMEM).
 */
struct kevent *kevent_alloc(struct kevent_queue *q, const struct ukevent *uk,
			    const struct kevent_ops *ops)
{
	/* q->ucounts is held by the queue, which outlives the kevent. */
	bool charged = inc_ucount_held(q->ucounts, UCOUNT_KEVENT_KEVENTS);
	struct kevent *k;

	if (!charged && !capable(CAP_SYS_RESOURCE))
		return ERR_PTR(-ENOSPC);
	k = kmem_cache_zalloc(kevent_caches[ops->slab], GFP_KERNEL_ACCOUNT);
	if (!k) {
		if (charged)
			dec_ucount_held(q->ucounts, UCOUNT_KEVENT_KEVENTS);
		return ERR_PTR(-ENOMEM);
	}
	k->charged = charged;
	RB_CLEAR_NODE(&k->node);
	INIT_LIST_HEAD(&k->link);
	refcount_set(&k->ref, 1);
	k->q = q;
	k->ops = ops;
	k->uk = *uk;
	k->uk.ret_flags = 0;
	k->uk.ret_data[0] = 0;
	k->uk.ret_data[1] = 0;
	return k;
}

/* Every holder of a kevent holds its queue too: q outlives k. */
void kevent_put(struct kevent *k)
{
	if (!refcount_dec_and_test(&k->ref))
		return;
	if (k->charged)
		dec_ucount_held(k->q->ucounts, UCOUNT_KEVENT_KEVENTS);
	kmem_cache_free(kevent_caches[k->ops->slab], k);
}

/* ---------------------------------------------------------------------
 * The tree: registrations keyed by (type, id) (D3), under q->mtx.
 */

static int kevent_cmp(u32 type, u64 id, const struct kevent *k)
{
	if (type != k->uk.type)
		return type < k->uk.type ? -1 : 1;
	if (id != k->uk.id.raw_u64)
		return id < k->uk.id.raw_u64 ? -1 : 1;
	return 0;
}

/**
 * kevent_find_link - look a key up, remembering where it would go
 * @q: the queue
 * @type: the key's type
 * @id: the key's id
 * @pos: where a kevent of this key would be linked, when it is not there
 *
 * One walk for ADD's lookup and its insert (kevent_link()): @pos stays
 * valid while q->mtx is held and nothing is inserted or erased.
 *
 * Return: the kevent registered under the key, or NULL.
 */
struct kevent *kevent_find_link(struct kevent_queue *q, u32 type, u64 id,
				struct kevent_pos *pos)
{
	struct rb_node **p = &q->tree.rb_node, *parent = NULL;

	lockdep_assert_held(&q->mtx);
	while (*p) {
		struct kevent *k = rb_entry(*p, struct kevent, node);
		int c = kevent_cmp(type, id, k);

		if (!c)
			return k;
		parent = *p;
		p = c < 0 ? &parent->rb_left : &parent->rb_right;
	}
	pos->parent = parent;
	pos->link = p;
	return NULL;
}

struct kevent *kevent_find(struct kevent_queue *q, u32 type, u64 id)
{
	struct rb_node *n = q->tree.rb_node;

	lockdep_assert_held(&q->mtx);
	while (n) {
		struct kevent *k = rb_entry(n, struct kevent, node);
		int c = kevent_cmp(type, id, k);

		if (!c)
			return k;
		n = c < 0 ? n->rb_left : n->rb_right;
	}
	return NULL;
}

/*
 * Links @k where kevent_find_link() found its key missing; nothing was
 * inserted or erased since.
 */
void kevent_link(struct kevent *k, const struct kevent_pos *pos)
{
	struct kevent_queue *q = k->q;

	lockdep_assert_held(&q->mtx);
	rb_link_node(&k->node, pos->parent, pos->link);
	rb_insert_color(&k->node, &q->tree);
	k->registered = true;
	q->count++;
}

/* Inserts @k, whose key is not in the tree (the caller checked). */
void kevent_insert(struct kevent *k)
{
	struct kevent_pos pos;

	if (WARN_ON_ONCE(kevent_find_link(k->q, k->uk.type, k->uk.id.raw_u64,
					  &pos)))
		return;
	kevent_link(k, &pos);
}

/*
 * A thread in kevent_get_events() or kevent_wait(), on q->holders from the
 * first time it sleeps after delivering something to the end of its call.
 *
 * The kevents its call delivered (or skipped as delivered) go back on
 * q->ready before it sleeps, where other waiters and ->poll() see them (a
 * private list would hide them: a producer merging into them wakes
 * nobody). Its own call must not deliver them twice, so its wake-up target
 * does not count them: @own is how many queued kevents (counted in
 * q->nready) carry its call's stamp. It is counted under q->lock when the
 * call joins, over the kevents the call stamped so far (kevent_hold()); from
 * then on every change of k->counted or k->stamp goes through kevent_own(),
 * so @own is exact.
 *
 * A call that has delivered nothing yet does not join: no kevent carries its
 * stamp (only its own deliveries stamp it, kevent_take() and kevent_scan()),
 * so its @own is 0 and stays 0 while it sleeps, exact without any walk.
 * That is every sleep of a min_nr = 1 wait (a call that delivered returns),
 * so a single-threaded server's wake-ups and deliveries never walk
 * q->holders. It joins at the first sleep with something delivered, when
 * everything stamped is on s->chain (it held q->mtx since it began, or since
 * a sleep with nothing stamped).
 */
struct kevent_waiter {
	/*
	 * Not a list_head first: GCC then aligns the waiter on the stack to
	 * 16 and realigns kevent_collect_deadline()'s frame, which costs the
	 * delivery loop a register.
	 */
	unsigned int need;
	struct list_head entry;		/* on q->waiters, under q->lock */
	struct task_struct *task;
	struct kevent_queue *q;
	unsigned int wake_gen;
	unsigned int flush_gen;
	u64 call;			/* the stamp of its call */
	u32 posted;			/* q->posted when an async wait began */
	struct list_head hold;		/* on q->holders, under q->lock */
	unsigned int own;		/* under q->lock */
};

/* Its target is met, or something ends its wait. Context: q->lock held. */
static bool kevent_waiter_done(const struct kevent_waiter *w)
{
	const struct kevent_queue *q = w->q;

	return q->nready - w->own >= w->need || q->wake_gen != w->wake_gen ||
	       q->flush_gen != w->flush_gen || q->posted != w->posted;
}

/* @k, counted in q->nready, joins (@d = 1) or leaves (-1) its call's own. */
void kevent_own(struct kevent_queue *q, struct kevent *k, int d)
{
	struct kevent_waiter *w;

	lockdep_assert_held(&q->lock);
	list_for_each_entry(w, &q->holders, hold) {
		if (w->call != k->stamp)
			continue;
		if (d > 0)
			w->own++;
		else if (!WARN_ON_ONCE(!w->own))
			w->own--;
		return;
	}
}

/* @k is now the call @call's: it counts toward that call's own. */
static __always_inline void kevent_stamp(struct kevent_queue *q,
					 struct kevent *k, u64 call,
					 bool owners)
{
	lockdep_assert_held(&q->lock);
	if (owners && k->counted) {
		kevent_own(q, k, -1);
		k->stamp = call;
		kevent_own(q, k, 1);
		return;
	}
	k->stamp = call;
}

/*
 * @k, queued and counted, leaves its list and q->nready. The unlink is
 * list_del_init() in its parts, which -Os inlines: it calls list_del_init()
 * and __list_del_entry() (once per drained level kevent).
 */
static __always_inline void kevent_uncount(struct kevent_queue *q,
					   struct kevent *k, bool owners)
{
	__list_del(k->link.prev, k->link.next);
	INIT_LIST_HEAD(&k->link);
	k->counted = false;
	q->nready--;
	if (owners)
		kevent_own(q, k, -1);
}

/* A level kevent (D7): fd.c keeps the flag on ADD and MODIFY. */
static __always_inline bool kevent_level(const struct kevent *k)
{
	return k->level;
}

/* Takes @k off whatever list it is queued on. */
void kevent_dequeue(struct kevent *k)
{
	struct kevent_queue *q = k->q;

	lockdep_assert_held(&q->lock);
	if (list_empty(&k->link))
		return;
	if (k->counted)
		kevent_uncount(q, k, kevent_owners(q));
	else
		list_del_init(&k->link);
}

/**
 * kevent_unregister - stop watching, forget and drop one kevent
 * @k: a kevent that is registered, or armed but not yet inserted
 *
 * Context: process, q->mtx held. Drops the tree's reference.
 */
void kevent_unregister(struct kevent *k)
{
	struct kevent_queue *q = k->q;

	lockdep_assert_held(&q->mtx);
	if (k->registered) {
		rb_erase(&k->node, &q->tree);
		RB_CLEAR_NODE(&k->node);
		k->registered = false;
		q->count--;
	}
	k->ops->disarm(k);
	spin_lock_irq(&q->lock);
	k->dead = true;
	kevent_dequeue(k);
	spin_unlock_irq(&q->lock);
	kevent_put(k);
}

/* ---------------------------------------------------------------------
 * Producers: any context.
 */

/* kevent_wake_pollers() (kevent.h) when a poller is there. */
void __kevent_wake_pollers(struct kevent_queue *q, int nest)
{
	unsigned long flags;

	spin_lock_irqsave_nested(&q->poll_wait.lock, flags, nest);
	wake_up_locked_poll(&q->poll_wait, EPOLLIN | EPOLLRDNORM);
	spin_unlock_irqrestore(&q->poll_wait.lock, flags);
}

/**
 * kevent_wake_locked - wake sleeping waiters whose target is met
 * @q: the queue
 * @all: every such waiter; else the first one that was asleep
 *
 * A waiter whose target is not met (D4: min_nr) stays asleep and the
 * wake-up passes on to the next one, so a min_nr = 8 sleeper never eats the
 * wake-up a min_nr = 1 sleeper needs (io_uring's idea); so does one that is
 * running already (a signal or its timeout woke it), as an exclusive
 * wake-up of a wait queue does. q->waiters is a plain list under q->lock,
 * not a wait queue head: every sleeper is added, and every wake-up made,
 * under q->lock, so a second lock would order nothing. Context: q->lock
 * held, any context.
 */
void kevent_wake_locked(struct kevent_queue *q, bool all)
{
	struct kevent_waiter *w, *next;

	lockdep_assert_held(&q->lock);
	list_for_each_entry_safe(w, next, &q->waiters, entry) {
		if (!kevent_waiter_done(w) || !wake_up_process(w->task))
			continue;
		list_del_init(&w->entry);
		if (!all)
			return;
	}
}

/**
 * kevent_notify - a source reports readiness or an occurrence
 * @k: the kevent
 * @add: what to merge into its pending state
 * @nest: lockdep subclass for waking ->poll() waiters (kevent.h)
 *
 * Queues @k unless it is queued already, and wakes one waiter (every waiter
 * with KEVENT_REQ_WAKEUP_ALL). Context: any; takes q->lock only.
 */
void kevent_notify(struct kevent *k, const struct kevent_snap *add, int nest)
{
	/* Read first: once q->lock is dropped, @k may be delivered and go. */
	struct kevent_queue *q = k->q;

	if (__kevent_notify(k, add->pending, add->bits, add->marked))
		kevent_wake_pollers(q, nest);
}

/*
 * kevent_notify() of a wake-up that names ready bits and nothing else (an fd
 * kevent's, kevent_fd_wake()): with the snapshot built here, what the merge
 * adds to the pending count and the READY mark is known to be nothing.
 */
void kevent_notify_bits(struct kevent *k, u32 bits, int nest)
{
	struct kevent_queue *q = k->q;

	if (__kevent_notify(k, 0, bits, false))
		kevent_wake_pollers(q, nest);
}

/*
 * kevent_notify() for a caller that holds q->lock; returns whether @k was
 * newly queued, in which case the caller wakes ->poll() waiters after
 * dropping q->lock.
 */
bool kevent_notify_locked(struct kevent *k, const struct kevent_snap *add)
{
	return __kevent_notify_locked(k, add->pending, add->bits, add->marked);
}

/* READY with num == 0: every waiter returns, and the next wait does. */
void kevent_wake_waiters(struct kevent_queue *q)
{
	spin_lock_irq(&q->lock);
	q->wake_gen++;
	q->wake_pending = true;
	kevent_wake_locked(q, true);
	spin_unlock_irq(&q->lock);
	kevent_wake_pollers(q, 0);
}

/* ---------------------------------------------------------------------
 * The queue file.
 */

/*
 * Whether a wait would deliver something now: READY(0) pending, or a
 * queued kevent whose type says so without consuming anything.
 */
static bool kevent_readable(struct kevent_queue *q, int depth)
{
	LIST_HEAD(scan);
	struct kevent *k;
	bool ready, empty;

	if (q->aring && kevent_aring_unread(q))
		return true;
	spin_lock_irq(&q->lock);
	ready = q->wake_pending;
	empty = list_empty(&q->ready);
	spin_unlock_irq(&q->lock);
	if (ready || empty)
		return ready;

	mutex_lock_nested(&q->mtx, depth);
	/*
	 * Take the queued kevents aside: producers see them queued and only
	 * merge state, and nothing unregisters them without q->mtx, so the
	 * walk needs no lock.
	 */
	spin_lock_irq(&q->lock);
	list_splice_init(&q->ready, &scan);
	spin_unlock_irq(&q->lock);
	list_for_each_entry(k, &scan, link) {
		if (!k->ops->peek || k->ops->peek(k, depth + 1)) {
			ready = true;
			break;
		}
		/* Up to max_user_kevents entries, each a ->poll(). */
		cond_resched();
	}
	spin_lock_irq(&q->lock);
	list_splice(&scan, &q->ready);
	spin_unlock_irq(&q->lock);
	mutex_unlock(&q->mtx);
	return ready;
}

/* ->poll() of a queue; @depth is the lockdep subclass of its q->mtx. */
__poll_t kevent_queue_poll(struct file *file, poll_table *wait, int depth)
{
	struct kevent_queue *q = file->private_data;

	poll_wait(file, &q->poll_wait, wait);
	return kevent_readable(q, depth) ? EPOLLIN | EPOLLRDNORM : 0;
}

static __poll_t kevent_file_poll(struct file *file, poll_table *wait)
{
	return kevent_queue_poll(file, wait, 0);
}

/*
 * Every close() of a queue fd: waiters re-check that their fd still names
 * this queue, so that closing it under them makes them return (EBADF).
 */
static int kevent_file_flush(struct file *file, fl_owner_t id)
{
	struct kevent_queue *q = file->private_data;

	spin_lock_irq(&q->lock);
	q->flush_gen++;
	/* The owner's table may be freed next: producers stop using it (P39). */
	if (id == q->files)
		q->files = NULL;
	kevent_wake_locked(q, true);
	spin_unlock_irq(&q->lock);
	return 0;
}

/*
 * The last reference: no system call runs on the queue any more (each holds
 * the file), epoll and kevent watchers of this file were detached by
 * eventpoll_release() and kevent_release() already. Detach every kevent from
 * its source, then let the last reference free the queue.
 */
static int kevent_file_release(struct inode *inode, struct file *file)
{
	struct kevent_queue *q = file->private_data;
	struct kevent_aring *ar;
	struct rb_node *n;

	mutex_lock(&q->mtx);
	while ((n = rb_first(&q->tree))) {
		kevent_unregister(rb_entry(n, struct kevent, node));
		cond_resched();
	}
	mutex_unlock(&q->mtx);
	kevent_inode_release_queue(q);
	/* Every kevent is dead: nothing posts; a late post sees NULL. */
	spin_lock_irq(&q->lock);
	ar = q->aring;
	q->aring = NULL;
	spin_unlock_irq(&q->lock);
	kevent_aring_destroy(ar);
	kevent_queue_put(q);
	return 0;
}

const struct file_operations kevent_fops = {
	.poll		= kevent_file_poll,
	.flush		= kevent_file_flush,
	.release	= kevent_file_release,
	.llseek		= noop_llseek,
};

/*
 * The ring must be mapped writable from end to end (spec: an unmapped or
 * read-only buffer gives EFAULT). Checking the mappings instead of touching
 * every page neither allocates the caller's memory nor depends on @num.
 */
static int kevent_ring_mapped(struct kevent_ring __user *ring, size_t len)
{
	unsigned long addr = (unsigned long)ring, end = addr + len;
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	int err = 0;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	while (addr < end) {
		vma = vma_lookup(mm, addr);
		if (!vma || !(vma->vm_flags & VM_WRITE)) {
			err = -EFAULT;
			break;
		}
		addr = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return err;
}

/* fs.kevent.unprivileged_disabled, as kernel.io_uring_disabled. */
static bool kevent_allowed(void)
{
	switch (READ_ONCE(kevent_unprivileged_disabled)) {
	case 0:
		return true;
	case 1:
		return capable(CAP_SYS_ADMIN);
	default:
		return false;
	}
}

/**
 * kevent_create - kevent_init(): a new queue and its fd
 * @ring: the caller's ring, or NULL with @num == 0
 * @num: ring entries
 * @flags: KEVENT_INIT_ASYNC_RING (P38) or 0; anything else is -EINVAL (D1)
 *
 * Return: the fd (close-on-exec) or -errno.
 */
long kevent_create(struct kevent_ring __user *ring, unsigned int num,
		   unsigned int flags)
{
	struct kevent_aring *ar = NULL;
	struct kevent_queue *q;
	struct ucounts *ucounts;
	int fd, err;

	if (!kevent_allowed())
		return -EPERM;
	if (flags & ~KEVENT_INIT_ASYNC_RING)
		return -EINVAL;
	if (flags) {
		/* Checked, pinned, charged and zeroed by ring.c. */
		ar = kevent_aring_create(ring, num);
		if (IS_ERR(ar))
			return PTR_ERR(ar);
	} else if (ring || num) {
		if (!ring || num < 2)
			return -EINVAL;
		/* The entries' 8-byte fields need it (spec section 1). */
		if (!IS_ALIGNED((unsigned long)ring, __alignof__(*ring)))
			return -EINVAL;
		if (!access_ok(ring, struct_size(ring, event, num)))
			return -EFAULT;
		err = kevent_ring_mapped(ring, struct_size(ring, event, num));
		if (err)
			return err;
		if (put_user(0, &ring->ring_kidx) ||
		    put_user(0, &ring->ring_over))
			return -EFAULT;
	}
	/* fs.kevent.max_user_queues, as inotify's max_user_instances. */
	ucounts = inc_ucount(current_user_ns(), current_uid(),
			     UCOUNT_KEVENT_QUEUES);
	if (!ucounts) {
		kevent_aring_destroy(ar);
		return -EMFILE;
	}
	q = kzalloc(sizeof(*q), GFP_KERNEL_ACCOUNT);
	if (!q) {
		dec_ucount(ucounts, UCOUNT_KEVENT_QUEUES);
		kevent_aring_destroy(ar);
		return -ENOMEM;
	}
	q->ucounts = ucounts;
	mutex_init(&q->mtx);
	spin_lock_init(&q->lock);
	INIT_LIST_HEAD(&q->waiters);
	init_waitqueue_head(&q->poll_wait);
	INIT_LIST_HEAD(&q->ready);
	INIT_LIST_HEAD(&q->holders);
	q->tree = RB_ROOT;
	q->max = READ_ONCE(kevent_max_per_queue);
	q->ring = ring;
	q->ring_n = ring ? num : 0;
	q->aring = ar;
	q->files = current->files;
	kevent_aring_init_queue(q);
	refcount_set(&q->ref, 1);
	mmgrab(current->mm);
	q->mm = current->mm;

	/* Nothing of q may be touched after this: another thread may close. */
	fd = anon_inode_getfd("[kevent]", &kevent_fops, q, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		kevent_aring_destroy(ar);
		kevent_queue_put(q);
	}
	return fd;
}

/* ---------------------------------------------------------------------
 * The ring.
 */

static u32 kevent_ring_used(const struct kevent_queue *q)
{
	/* Both indices are below ring_n: no division on the delivery path. */
	return q->kidx >= q->uidx ? q->kidx - q->uidx :
				    q->ring_n - q->uidx + q->kidx;
}

/* Slots a producer may still fill: one always stays free (D12). */
static u32 kevent_ring_free(struct kevent_queue *q)
{
	if (q->aring)
		return kevent_aring_room(q);
	return q->ring ? q->ring_n - 1 - kevent_ring_used(q) : 0;
}

/*
 * Stores @ev in the next free slot; false when full or faulting. The slot
 * is written in 8-byte stores inside one user access window (as
 * kevent_put_record()), not through copy_to_user()'s out-of-line copy: it
 * runs once per event a kevent_wait() moves.
 */
static bool kevent_ring_push(struct kevent_queue *q, const struct ukevent *ev)
{
	struct ukevent __user *slot;

	if (q->aring)
		return kevent_aring_push(q, ev);
	if (!kevent_ring_free(q))
		return false;
	slot = &q->ring->event[q->kidx];
	if (!kevent_user_access_begin(&slot, sizeof(*slot)))
		return false;
	unsafe_copy_to_user((void __user *)slot, (const void *)ev,
			    sizeof(*slot), efault);
	user_access_end();
	q->kidx = q->kidx + 1 == q->ring_n ? 0 : q->kidx + 1;
	return true;
efault:
	user_access_end();
	return false;
}

static void kevent_ring_publish(struct kevent_queue *q)
{
	/* An asynchronous ring publishes each slot as it is written. */
	if (q->aring) {
		kevent_wake_pollers(q, 0);
		return;
	}
	/* Entries before the index: pairs with the consumer's load-acquire. */
	smp_wmb();
	if (put_user(q->kidx, &q->ring->ring_kidx))
		pr_debug("kevent: ring_kidx not writable\n");
}

/* kevent_commit(): slots released (a u32), or -errno. q->mtx not held. */
long kevent_commit_ring(struct kevent_queue *q, u32 new_uidx, u32 cover)
{
	u32 released, uidx, over;
	long err;

	mutex_lock(&q->mtx);
	err = -EINVAL;
	if (!q->ring)
		goto out;
	if (q->aring) {
		err = kevent_aring_commit(q, new_uidx, cover);
		goto out;
	}
	err = kevent_commit_rule(q->ring_n, q->kidx, q->uidx, q->over,
				 new_uidx, cover, &released, &uidx, &over);
	if (err)
		goto out;
	q->uidx = uidx;
	if (over != q->over) {
		q->over = over;
		if (put_user(over, &q->ring->ring_over))
			pr_debug("kevent: ring_over not writable\n");
	}
	err = released;
out:
	mutex_unlock(&q->mtx);
	return err;
}

/* ---------------------------------------------------------------------
 * Delivery: under q->mtx, in the owner's system call.
 */

struct kevent_sink {
	struct ukevent __user *buf;	/* get_events: the caller's buffer */
	unsigned int max;		/* buf entries, or events to move */
	unsigned int n;			/* delivered so far */
	bool to_ring;			/* kevent_wait: into the ring only */
	bool ring_dirty;
	u64 call;
	struct list_head requeue;	/* level kevents this call delivered */
	unsigned int fresh;		/* delivered since it last slept */
	/*
	 * A call that may sleep after a delivery remembers, with a reference,
	 * every kevent it delivered that stays registered: while it sleeps
	 * another call may deliver one and stamp it with its own call. Until
	 * it lets q->mtx go they are only chained (@chain, through
	 * k->hand_next, as their batch was: no other call delivers
	 * meanwhile, and this one takes none of them again), and moved to @seen
	 * just before it sleeps, so a call that returns without sleeping
	 * allocates and references nothing. The chain also gives the call's
	 * own when it first sleeps (kevent_hold()). @seen is sorted up to
	 * @nsorted; the rest carry this call's stamp (only a holder of q->mtx
	 * stamps).
	 */
	bool remember;
	/*
	 * What a batch delivers and keeps is chained (s->chain) and counted
	 * (s->fresh) only for a call that remembers or a sleeper's own
	 * (kevent_scan()). Any other call cannot sleep after a delivery (only
	 * one short of a target above 1 does, and it blocks: it remembers),
	 * so s->fresh, which only kevent_hold() reads, stays 0 for it.
	 */
	bool track;
	struct kevent *chain;
	unsigned int nchain;
	struct kevent **seen;
	unsigned int nseen, nsorted, cap;
};

static int kevent_ptr_cmp(const void *a, const void *b)
{
	const struct kevent *x = *(const struct kevent * const *)a;
	const struct kevent *y = *(const struct kevent * const *)b;

	return x < y ? -1 : x > y;
}

/*
 * Whether this call delivered @k already: it carries the call's stamp, or
 * it is one the call remembered before it slept. Context: q->lock held.
 */
static noinline bool kevent_seen(const struct kevent_sink *s,
				 struct kevent *k)
{
	return bsearch(&k, s->seen, s->nsorted, sizeof(*s->seen),
		       kevent_ptr_cmp);
}

/*
 * @slept: kevent_take_from()'s. Without it nothing taken can have been
 * delivered by this call: such a call has not slept since it delivered
 * anything (a call sleeps again only short of its target, and one that may
 * do so after a delivery remembers it, which makes @slept true), so it
 * scans once after its last delivery, and a scan takes each kevent on its
 * list once (what it delivers goes to s->requeue or off every list, never
 * back on the list it takes from). So the usual call tests no stamp.
 */
static __always_inline bool kevent_delivered(struct kevent_sink *s,
					     struct kevent *k, bool slept)
{
	if (!slept)
		return false;
	if (k->stamp == s->call)
		return true;
	/* Out of line: only a call that slept has remembered any. */
	return s->nsorted && kevent_seen(s, k);
}

/*
 * Before the call lets q->mtx go to sleep: what it chained is remembered,
 * with a reference (kevent_hold() then lets go of the chain). Context:
 * q->mtx held.
 */
static int kevent_sink_keep(struct kevent_sink *s)
{
	struct kevent **seen;
	struct kevent *k;
	unsigned int cap;

	if (!s->nchain)
		return 0;
	/* The call's first: nothing kept yet (kevent_collect_deadline()). */
	if (!s->seen) {
		s->nseen = 0;
		s->cap = 0;
	}
	if (s->nseen + s->nchain > s->cap) {
		/* A call delivers at most s->max kevents. */
		cap = s->cap > s->max / 2 ? s->max : max(16U, s->cap * 2);
		cap = min(max(cap, s->nseen + s->nchain), s->max);
		seen = kvrealloc(s->seen, array_size(cap, sizeof(*seen)),
				 GFP_KERNEL_ACCOUNT);
		if (!seen)
			return -ENOMEM;
		s->seen = seen;
		s->cap = cap;
	}
	for (k = s->chain; k; k = k->hand_next) {
		refcount_inc(&k->ref);
		s->seen[s->nseen++] = k;
	}
	/* For kevent_delivered(), sorted here: the scans hold q->lock. */
	sort(s->seen, s->nseen, sizeof(*s->seen), kevent_ptr_cmp, NULL);
	s->nsorted = s->nseen;
	return 0;
}

/* The end of a call: what it remembered is let go. */
static void kevent_sink_forget(struct kevent_sink *s)
{
	unsigned int i;

	if (!s->seen)
		return;
	for (i = 0; i < s->nseen; i++)
		kevent_put(s->seen[i]);
	kvfree(s->seen);
}

static unsigned int kevent_sink_room(struct kevent_queue *q,
				     struct kevent_sink *s)
{
	unsigned int room = s->max - s->n;

	return s->to_ring ? min(room, kevent_ring_free(q)) : room;
}

/*
 * A kevent taken in hand that was not delivered (its copy failed, or one
 * before it failed): back to @back, in order, with the state it had.
 * Context: q->lock held.
 */
static void kevent_restore(struct kevent_queue *q, struct kevent_sink *s,
			   struct kevent *k, struct list_head *back)
{
	const struct kevent_snap *snap = &k->hand;
	bool owners = kevent_owners(q);

	lockdep_assert_held(&q->lock);
	/* Not delivered: no longer this call's (kevent_take()). */
	if (!owners)
		k->stamp = 0;
	k->marked |= snap->marked;
	if (kevent_level(k)) {
		/* Still queued and counted on s->requeue (kevent_take()). */
		list_move_tail(&k->link, back);
		return;
	}
	k->pending = k->pending + snap->pending < k->pending ?
		     U32_MAX : k->pending + snap->pending;
	k->bits |= snap->bits;
	if (list_empty(&k->link)) {
		list_add_tail(&k->link, back);
		kevent_count(q, k, owners);
	}
}

/*
 * Writes @k's record with its results to @dst: straight from the kevent
 * into the caller's memory, with no copy built on the stack. Return: 0 or
 * -EFAULT.
 */
static __always_inline int kevent_put_record(struct ukevent __user *dst,
					     const struct kevent *k, u32 flags,
					     const u32 data[2])
{
	if (!kevent_user_access_begin(&dst, sizeof(*dst)))
		return -EFAULT;
	/* id, type, event, req_flags: as registered. */
	unsafe_copy_to_user((void __user *)dst, (const void *)&k->uk,
			    offsetof(struct ukevent, ret_flags), efault);
	unsafe_put_user(flags, &dst->ret_flags, efault);
	/* Both words in one 8-byte store. */
	unsafe_copy_to_user((void __user *)dst->ret_data, (const void *)data,
			    sizeof(dst->ret_data), efault);
	unsafe_copy_to_user((void __user *)dst->user,
			    (const void *)k->uk.user, sizeof(dst->user),
			    efault);
	user_access_end();
	return 0;
efault:
	user_access_end();
	return -EFAULT;
}

/*
 * Delivers one kevent in hand; q->lock not held. Inlined into its one
 * caller's loop, kevent_scan(): with the take inlined there too, -Os would
 * otherwise call it, once per delivered kevent.
 *
 * Return: 2 delivered and still registered, 1 delivered and to be
 * unregistered (ONESHOT, or BROKEN: the caller does it), 0 nothing to
 * deliver, -EFAULT, or -ENOSPC (an asynchronous ring a producer filled
 * meanwhile).
 */
static __always_inline int kevent_deliver_one(struct kevent_queue *q,
					      struct kevent *k,
					      struct kevent_sink *s)
{
	/* Written by an fd kevent's report unless it skips: not zeroed first. */
	u32 data[2] __uninitialized;
	enum kevent_report r;
	bool unregister;
	u32 flags;

	/* fd kevents, the common case: their report inlined (fdpoll.h). */
	if (likely(k->ops == &kevent_fd_ops)) {
		r = kevent_fd_report_now(k, &k->hand, data);
	} else {
		data[0] = 0;
		data[1] = 0;
		r = k->ops->report(k, &k->hand, data);
	}
	if (r == KEVENT_SKIP)
		return 0;
	flags = r == KEVENT_BROKEN ? KEVENT_RET_BROKEN : 0;
	unregister = r == KEVENT_BROKEN ||
		     (k->uk.req_flags & KEVENT_REQ_ONESHOT);
	if (unregister)
		flags |= KEVENT_RET_DONE;

	if (unlikely(q->ring)) {
		struct ukevent ev = k->uk;
		u32 kidx = q->kidx;

		ev.ret_flags = flags;
		ev.ret_data[0] = data[0];
		ev.ret_data[1] = data[1];
		if (s->to_ring) {
			/* An asynchronous ring a producer filled meanwhile. */
			if (!kevent_ring_push(q, &ev))
				return q->aring ? -ENOSPC : -EFAULT;
		} else {
			if (!kevent_ring_push(q, &ev))
				flags |= KEVENT_RET_COPY_FAILED;
			if (kevent_put_record(&s->buf[s->n], k, flags, data)) {
				q->kidx = kidx;
				return -EFAULT;
			}
		}
		s->ring_dirty |= q->kidx != kidx;
	} else if (kevent_put_record(&s->buf[s->n], k, flags, data)) {
		return -EFAULT;
	}
	s->n++;
	return unregister ? 1 : 2;
}

/* Entries a scan handles under one hold of q->lock, between reschedules. */
#define KEVENT_SCAN_STEPS	64

/*
 * Takes the next batch of what is queued in hand, oldest first: at most
 * @room kevents to deliver and KEVENT_SCAN_STEPS entries looked at. What
 * this call delivered already goes straight to s->requeue. Returns the
 * batch (through k->hand_next) and sets *@n to its length and *@full when
 * it stopped at KEVENT_SCAN_STEPS. Context: q->lock held.
 *
 * A level kevent goes to s->requeue already, queued and counted while it
 * is in hand: that is where its delivery leaves it (D7), so nothing moves
 * it again unless the delivery finds nothing (kevent_scan()). Producers
 * see it queued and only merge into it, setting k->merged. Only the others
 * leave @rest one by one; what stays is moved to s->requeue in one piece,
 * in order.
 *
 * With no waiter asleep on q->holders (kevent_owners(): this call is then
 * not one either), every kevent taken carries this call's stamp from here,
 * as if delivered, so the settle has nothing to do for those that are;
 * kevent_scan() and kevent_restore() reset it to 0, no call's, on the rare
 * one that is not. Nothing else reads a stamp meanwhile: only a holder's
 * own counts them, and none joins while this call holds q->mtx. With a
 * sleeper, the take stamps nothing new and the settle stamps what was
 * delivered: a sleeper's own must keep counting a kevent it delivered that
 * this call takes and finds nothing in. Were it unstamped, a producer
 * queueing it again would wake the sleeper for it instead of a waiter that
 * can take it, and the sleeper, finding it delivered, would sleep on with
 * the wake-up.
 *
 * Written once, compiled twice (kevent_take()): @slept is a constant, true
 * when a waiter is asleep on q->holders or this call remembered what it
 * delivered before it slept (then it is one of those waiters, so @slept is
 * kevent_owners()). The usual call, which has not slept and shares the
 * queue with no sleeper, then runs a loop with no test of either, and no
 * kevent_own().
 */
static __always_inline struct kevent *
kevent_take_from(struct kevent_queue *q, struct kevent_sink *s,
		 struct list_head *rest, unsigned int room, unsigned int *n,
		 bool *full, const bool slept)
{
	struct kevent *hand = NULL, **tail = &hand, *k;
	struct list_head *pos = rest->next, *next;
	/* kevent_owners(q), or nothing to own it: kevent_own() finds none. */
	const bool owners = slept;
	/* In a register: the loop's stores through @k could alias @s. */
	const u64 call = s->call;
	/* Without @slept every entry looked at is taken: one count. */
	const unsigned int limit = slept ? room :
				   min(room, KEVENT_SCAN_STEPS);
	unsigned int steps, taken = 0;
	LIST_HEAD(stay);

	for (steps = 0; taken < limit; steps++) {
		if (pos == rest || (slept && steps == KEVENT_SCAN_STEPS))
			break;
		k = list_entry(pos, struct kevent, link);
		next = pos->next;
		pos = next;
		if (kevent_delivered(s, k, slept)) {
			/* Delivered by this call already: stays counted. */
			kevent_stamp(q, k, call, owners);
			continue;
		}
		if (kevent_level(k)) {
			/*
			 * Its report reads only the READY mark (fdpoll.h):
			 * what producers count for a state is never read.
			 */
			k->hand.marked = k->marked;
			k->marked = false;
			k->merged = false;
			if (!owners)
				k->stamp = call;
		} else {
			/* On a copy of q->ready, so counted. */
			kevent_uncount(q, k, owners);
			if (!owners)
				k->stamp = call;
			k->hand.pending = k->pending;
			k->hand.bits = k->bits;
			k->hand.marked = k->marked;
			k->pending = 0;
			k->bits = 0;
			k->marked = false;
		}
		*tail = k;
		tail = &k->hand_next;
		taken++;
	}
	*tail = NULL;
	/* What stays queued, all of @rest before @pos, in one piece. */
	list_cut_before(&stay, rest, pos);
	list_splice_tail(&stay, &s->requeue);
	*n = taken;
	*full = (slept ? steps : taken) == KEVENT_SCAN_STEPS;
	return hand;
}

static noinline struct kevent *
kevent_take_slept(struct kevent_queue *q, struct kevent_sink *s,
		  struct list_head *rest, unsigned int room, unsigned int *n,
		  bool *full)
{
	return kevent_take_from(q, s, rest, room, n, full, true);
}

static __always_inline struct kevent *
kevent_take(struct kevent_queue *q, struct kevent_sink *s,
	    struct list_head *rest, unsigned int room, unsigned int *n,
	    bool *full)
{
	if (unlikely(kevent_owners(q) || s->nsorted))
		return kevent_take_slept(q, s, rest, room, n, full);
	return kevent_take_from(q, s, rest, room, n, full, false);
}

/*
 * What a batch had nothing to report for (chained through k->hand_next): a
 * level kevent leaves the queue, unless a source woke it since it was
 * taken; with no sleeper (@owners: kevent_owners(), a constant in each of
 * the two copies) each loses the stamp the take gave it (with one, the take
 * left every stamp as it was). Context: q->lock held.
 */
static __always_inline void kevent_settle(struct kevent_queue *q,
					  struct kevent *idle,
					  const bool owners)
{
	struct kevent *k;

	for (k = idle; k; k = k->hand_next) {
		if (kevent_level(k) && !k->merged)
			kevent_uncount(q, k, owners);
		if (!owners)
			k->stamp = 0;
	}
}

/*
 * Delivers what is queued, oldest first, while the sink has room, a batch
 * at a time (kevent_take()): q->lock, held when it is called and when it
 * returns, is dropped only while a batch is delivered (->report() and the
 * copy may sleep), so a call that delivers one batch holds it twice. A
 * kevent in hand cannot go away meanwhile: only a holder of q->mtx
 * unregisters; a producer finds it off every list and queues it again, or
 * (a level kevent) queued on s->requeue and merges into it (q->nbusy keeps
 * an asynchronous ring's producers out, P40).
 *
 * Inlined into its one caller, kevent_collect_deadline(), as -Os did before
 * the take was inlined here: a call would cost every wait its frame.
 */
static __always_inline int kevent_scan(struct kevent_queue *q,
				       struct kevent_sink *s)
	__must_hold(&q->lock)
{
	LIST_HEAD(rest);
	int err = 0;

	lockdep_assert_held(&q->lock);
	/* Constant while the call holds q->mtx: read once per scan. */
	s->track = s->remember || kevent_owners(q);
	list_splice_init(&q->ready, &rest);
	for (;;) {
		struct kevent *hand, *kept = NULL, **tail = &kept, *k, *next;
		struct kevent *idle = NULL, **itail = &idle;
		unsigned int n, nkept;
		bool full, owners;

		hand = kevent_take(q, s, &rest, kevent_sink_room(q, s), &n,
				   &full);
		if (!hand && !full)
			break;
		q->nbusy += n;
		spin_unlock_irq(&q->lock);

		/* Up to one delivery per registered kevent: long, not forever. */
		if (full)
			cond_resched();
		nkept = 0;
		for (k = hand; k; k = next) {
			err = kevent_deliver_one(q, k, s);
			if (err < 0)
				break;
			/*
			 * Read after the delivery, not kept across it: only
			 * what follows @k in a chain writes k->hand_next.
			 */
			next = k->hand_next;
			if (err == 1) {
				/* A level one leaves s->requeue too. */
				kevent_unregister(k);
			} else if (err == 2) {
				if (s->track) {
					*tail = k;
					tail = &k->hand_next;
					nkept++;
				}
			} else if (!err) {
				*itail = k;
				itail = &k->hand_next;
			}
		}
		/* k: the one that failed and those after it, still chained. */
		*tail = NULL;
		*itail = NULL;

		spin_lock_irq(&q->lock);
		q->nbusy -= n;
		/* Constant while this call holds q->mtx (kevent_take()). */
		owners = kevent_owners(q);
		/*
		 * What it delivered is the call's now. With no sleeper the
		 * take stamped it already; else it is stamped here (queued
		 * again by a producer meanwhile, or a level kevent on
		 * s->requeue, it counts in the call's own).
		 */
		if (owners) {
			for (next = kept; next; next = next->hand_next)
				kevent_stamp(q, next, s->call, true);
		}
		s->fresh += nkept;
		/* The batch's chain of what it delivered joins s->chain. */
		if (s->remember && kept) {
			*tail = s->chain;
			s->chain = kept;
			s->nchain += nkept;
		}
		if (idle) {
			if (owners)
				kevent_settle(q, idle, true);
			else
				kevent_settle(q, idle, false);
		}
		if (err < 0) {
			LIST_HEAD(back);

			for (; k; k = k->hand_next)
				kevent_restore(q, s, k, &back);
			list_splice(&back, &rest);
			if (err == -ENOSPC)
				err = 0;
			break;
		}
		err = 0;
		/* Nothing left to look at: no empty take. */
		if (list_empty(&rest))
			break;
	}
	if (!list_empty(&rest))
		list_splice(&rest, &q->ready);
	return err;
}

/*
 * The level kevents this call delivered (and those it skipped as delivered
 * already), counted as they were put aside, go back on q->ready; returns
 * whether there were any. Context: q->lock held.
 */
static bool kevent_requeue(struct kevent_queue *q, struct kevent_sink *s)
{
	lockdep_assert_held(&q->lock);
	if (list_empty(&s->requeue))
		return false;
	list_splice_tail_init(&s->requeue, &q->ready);
	return true;
}

/*
 * The end of a call: level kevents back, the ring published, wake-ups.
 * Called with q->lock held (the last scan's), which it releases.
 */
static void kevent_finish(struct kevent_queue *q, struct kevent_sink *s,
			  struct kevent_waiter *w)
	__releases(&q->lock)
{
	bool requeued;

	lockdep_assert_held(&q->lock);
	requeued = kevent_requeue(q, s);
	/* Only a call that slept joined q->holders. */
	if (!list_empty(&w->hold))
		list_del_init(&w->hold);
	q->wake_pending = false;
	/* Events left behind: the next waiter takes them. */
	if (q->nready && !list_empty(&q->waiters))
		kevent_wake_locked(q, false);
	spin_unlock_irq(&q->lock);
	/*
	 * A ->poll() that ran meanwhile did not see them (the test inlined:
	 * once per call, usually with nobody polling the queue).
	 */
	if (requeued)
		kevent_wake_pollers(q, 0);
	if (s->ring_dirty)
		kevent_ring_publish(q);
	kevent_sink_forget(s);
}

/*
 * Before a call sleeps: its level kevents back on q->ready (visible to other
 * waiters and ->poll()), counted in its own so that its wake-up target
 * ignores them, and another waiter woken if this call delivered something
 * since it last slept (what it only skipped was visible before its scan:
 * waking for it would let two sleepers that both delivered a kevent wake
 * each other forever).
 */
static void kevent_hold(struct kevent_queue *q, struct kevent_sink *s,
			struct kevent_waiter *w)
{
	bool requeued;
	bool wake = s->fresh;

	s->fresh = 0;
	spin_lock_irq(&q->lock);
	if (list_empty(&w->hold)) {
		struct kevent *k;

		/*
		 * Off q->holders nothing counts in @own (kevent_own()): 0.
		 * Its stamp is on what it delivered since it began (every
		 * earlier sleep had nothing stamped, or it would have joined
		 * then): the chain, when the call remembers; else it delivered
		 * nothing (min_nr 1), the chain is empty and it stays off
		 * q->holders with @own 0 (struct kevent_waiter). Those counted
		 * (on s->requeue, or queued again by a producer) are its own
		 * until kevent_own() keeps it.
		 */
		w->own = 0;
		if (s->chain) {
			for (k = s->chain; k; k = k->hand_next)
				w->own += k->counted;
			list_add(&w->hold, &q->holders);
		}
	}
	s->chain = NULL;
	s->nchain = 0;
	requeued = kevent_requeue(q, s);
	/* Under q->lock, as every waiter's check: no lost wake. */
	if (requeued && wake && !list_empty(&q->waiters))
		kevent_wake_locked(q, false);
	spin_unlock_irq(&q->lock);
	if (requeued)
		kevent_wake_pollers(q, 0);
}

/* ---------------------------------------------------------------------
 * Waiting.
 */

struct kevent_deadline {
	bool block;
	clockid_t clock;
	ktime_t expires;
};

/* Return: 0 (woken, or the target is met), -ETIMEDOUT or -EINTR. */
static int kevent_sleep(struct kevent_waiter *w, struct kevent_deadline *d)
{
	struct kevent_queue *q = w->q;
	int ret = 0;

	w->task = current;
	spin_lock_irq(&q->lock);
	/* Woken in the order they came (kevent_wake_locked()). */
	list_add_tail(&w->entry, &q->waiters);
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kevent_waiter_done(w))
			break;
		if (signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		spin_unlock_irq(&q->lock);
		if (!schedule_hrtimeout_range_clock(&d->expires,
						    current->timer_slack_ns,
						    HRTIMER_MODE_ABS,
						    d->clock))
			ret = -ETIMEDOUT;
		spin_lock_irq(&q->lock);
		/*
		 * Woken (the wake-up took it off q->waiters) or timed out:
		 * either way back to the caller, which scans and, if another
		 * waiter took the events meanwhile, sleeps again with a new
		 * entry. Sleeping on here without one would never be woken.
		 */
		break;
	}
	__set_current_state(TASK_RUNNING);
	if (!list_empty(&w->entry))
		list_del_init(&w->entry);
	spin_unlock_irq(&q->lock);
	return ret;
}

/*
 * The timeout, read as get_timespec64() reads it but inlined, with one
 * user access window for both words: it runs once per call.
 */
static __always_inline int
kevent_get_timespec(struct timespec64 *ts,
		    const struct __kernel_timespec __user *uts)
{
	s64 sec, nsec;

	if (!kevent_user_access_begin(&uts, sizeof(*uts)))
		return -EFAULT;
	unsafe_get_user(sec, &uts->tv_sec, efault);
	unsafe_get_user(nsec, &uts->tv_nsec, efault);
	user_access_end();
	ts->tv_sec = sec;
	/* A compat caller's tv_nsec has 32 bits of padding (get_timespec64()). */
	if (in_compat_syscall())
		nsec &= 0xFFFFFFFFUL;
	ts->tv_nsec = nsec;
	return 0;
efault:
	user_access_end();
	return -EFAULT;
}

/* Inlined into kevent_collect(), its one caller. */
static __always_inline int
kevent_get_deadline(const struct __kernel_timespec __user *uts,
		    unsigned int flags, bool nonblock, struct kevent_deadline *d)
{
	/* Filled by kevent_get_timespec() before any use. */
	struct timespec64 ts __uninitialized;
	ktime_t rel;

	if (flags & ~KEVENT_FLAGS_ABSTIME)
		return -EINVAL;
	if (kevent_get_timespec(&ts, uts))
		return -EFAULT;
	if (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= NSEC_PER_SEC)
		return -EINVAL;
	if (flags & KEVENT_FLAGS_ABSTIME) {
		d->clock = CLOCK_REALTIME;
		d->expires = timespec64_to_ktime(ts);
		d->block = !nonblock &&
			   ktime_after(d->expires, ktime_get_real());
	} else {
		d->clock = CLOCK_MONOTONIC;
		d->block = !nonblock && (ts.tv_sec || ts.tv_nsec);
		d->expires = 0;
		if (!d->block)
			return 0;
		/*
		 * Only a wait that may sleep needs the clock, and not one that
		 * never times out (KTIME_MAX: any later time saturates).
		 */
		rel = timespec64_to_ktime(ts);
		d->expires = rel == KTIME_MAX ? KTIME_MAX :
			     ktime_add_safe(ktime_get(), rel);
	}
	return 0;
}

/*
 * Whether @fd of the caller still names queue @q (it may be closed). With a
 * reference: a file found under RCU alone may be freed and reused while its
 * fields are read.
 */
static bool kevent_fd_names(int fd, struct kevent_queue *q)
{
	struct file *f = fget(fd);
	bool same;

	if (!f)
		return false;
	same = f->f_op == &kevent_fops && f->private_data == q;
	fput(f);
	return same;
}

/**
 * kevent_collect_deadline - the loop of kevent_get_events() and kevent_wait()
 * @q: the queue
 * @fd: the caller's fd of it (closing it under the wait ends the wait)
 * @want: wait until this many are delivered (D4)
 * @buf: get_events: the caller's buffer; NULL for kevent_wait
 * @max: entries of @buf, or events to move into the ring
 * @old_uidx: kevent_wait: the consumer index the caller saw
 * @d: when to give up
 *
 * Inlined into kevent_collect(), its one caller: one call and one frame
 * per system call.
 *
 * Return: events delivered, or -errno if none was.
 */
static __always_inline long
kevent_collect_deadline(struct kevent_queue *q, int fd, unsigned int want,
			struct ukevent __user *buf, unsigned int max,
			u32 old_uidx, struct kevent_deadline *d)
{
	const bool to_ring = !buf;
	/*
	 * The sink and the waiter are set field by field below, not zeroed
	 * first (CONFIG_INIT_STACK_ALL_ZERO would, once per call), each where
	 * it is first needed (the list after the fast return says where);
	 * the waiter's entry and task are kevent_sleep()'s. A field added to
	 * either must be set there too.
	 */
	struct kevent_sink s __uninitialized;
	struct kevent_waiter w __uninitialized;
	bool last = false, closed;
	long err = 0;
	int ret;

	/*
	 * A queue with nothing queued, nothing in a delivery's hand and no
	 * READY(0) to consume, and a call that will not sleep: 0 without
	 * q->mtx, as epoll_wait() returns when ep_events_available() says so
	 * (tested in this order: a call with something queued tests one
	 * word, an asynchronous ring's two). q->nready and q->nbusy change
	 * under q->lock only; a producer that queued before this call (in
	 * any order the caller can see) is counted. kevent_wait() on a ring
	 * returns 0 here too whatever its old_uidx (the locked path returns 0
	 * for a stale one as well), but not on a missing or too small ring
	 * (-EINVAL below). An asynchronous ring's queue takes the locked path
	 * (P38: it reaps, refuses get_events and reads its own indices).
	 * q->aring, q->ring and q->ring_n are set when the queue is created
	 * and never change while a call runs.
	 */
	if (!READ_ONCE(q->nready) && !q->aring && !READ_ONCE(q->nbusy) &&
	    !READ_ONCE(q->wake_pending) && !d->block &&
	    (!to_ring || (q->ring && max <= q->ring_n)))
		return 0;
	/*
	 * What every call reads. The rest is set where it is first needed:
	 * the call's stamp and generations once it will scan, @w.q and
	 * @w.need before each sleep, @w.own by kevent_hold() and @s.nseen
	 * and @s.cap by kevent_sink_keep() (@s.seen NULL: nothing kept).
	 */
	w.posted = 0;
	INIT_LIST_HEAD(&w.hold);
	s.buf = buf;
	s.max = max;
	s.n = 0;
	s.to_ring = to_ring;
	s.ring_dirty = false;
	INIT_LIST_HEAD(&s.requeue);
	s.fresh = 0;
	s.chain = NULL;
	s.nchain = 0;
	s.seen = NULL;
	s.nsorted = 0;
	mutex_lock(&q->mtx);
	if (q->aring)
		kevent_aring_reap(q);
	if (to_ring) {
		err = -EINVAL;
		if (!q->ring || max > q->ring_n)
			goto unlock;
		err = 0;
		if (q->aring) {
			/* P38: 0 at once if the caller has events to read. */
			err = kevent_aring_begin(q, old_uidx, &w.posted);
			if (err) {
				err = min(err, 0L);
				goto unlock;
			}
		} else if (old_uidx != q->uidx) {
			goto unlock;
		}
		if (!max)
			goto unlock;
		/*
		 * Nothing queued, no READY(0) to consume and no sleep: nothing
		 * to do. With q->mtx held no other call is delivering, so
		 * every ready kevent is on q->ready, counted in q->nready.
		 * (The test before q->mtx, for the asynchronous ring it
		 * skipped and for a race with a producer.)
		 */
		if (!d->block && !READ_ONCE(q->nready) &&
		    !READ_ONCE(q->wake_pending))
			goto unlock;
	} else if (q->aring) {
		/* P38: its events are read from the ring. */
		err = -EINVAL;
		goto unlock;
	}
	s.call = ++q->calls;
	w.call = s.call;
	s.remember = want > 1 && d->block;
	/* Held from here to the scan's end, and from each wake-up on. */
	spin_lock_irq(&q->lock);
	w.wake_gen = q->wake_gen;
	w.flush_gen = q->flush_gen;
	if (q->wake_pending)
		d->block = false;

	for (;;) {
		err = kevent_scan(q, &s);
		if (err || last || s.n >= want || !kevent_sink_room(q, &s) ||
		    !d->block)
			break;
		spin_unlock_irq(&q->lock);
		w.q = q;
		w.need = want - s.n;
		err = kevent_sink_keep(&s);
		if (err) {
			spin_lock_irq(&q->lock);
			break;
		}
		kevent_hold(q, &s, &w);
		mutex_unlock(&q->mtx);
		ret = kevent_sleep(&w, d);
		mutex_lock(&q->mtx);
		spin_lock_irq(&q->lock);
		closed = w.flush_gen != q->flush_gen;
		w.flush_gen = q->flush_gen;
		/*
		 * READY(0): return with whatever is ready, possibly nothing;
		 * likewise once a producer posted into an asynchronous ring.
		 */
		if (w.wake_gen != q->wake_gen || w.posted != q->posted)
			last = true;
		/* The fd was closed under this wait. */
		if (closed) {
			spin_unlock_irq(&q->lock);
			closed = !kevent_fd_names(fd, q);
			spin_lock_irq(&q->lock);
			if (closed) {
				err = -EBADF;
				break;
			}
		}
		/* A timeout or a signal: one last look, never -EINTR. */
		if (ret)
			last = true;
	}
	kevent_finish(q, &s, &w);
	/* P38: what the ring gained during the call, whoever posted it. */
	if (q->aring)
		s.n = kevent_aring_gained(q, w.posted);
unlock:
	mutex_unlock(&q->mtx);
	return s.n ? s.n : err;
}

/**
 * kevent_collect - kevent_get_events() and kevent_wait()
 * @q: the queue
 * @fd: the caller's fd of it
 * @want: wait until this many are delivered (D4)
 * @buf: get_events: the caller's buffer (not NULL); NULL: kevent_wait, into
 *	the ring
 * @max: entries of @buf, or events to move into the ring
 * @old_uidx: kevent_wait: the consumer index the caller saw
 * @uts: the timeout (D16)
 * @flags: KEVENT_FLAGS_*
 * @nonblock: the queue file is O_NONBLOCK
 *
 * Return: events delivered, or -errno if none was.
 */
long kevent_collect(struct kevent_queue *q, int fd, unsigned int want,
		    struct ukevent __user *buf, unsigned int max, u32 old_uidx,
		    const struct __kernel_timespec __user *uts,
		    unsigned int flags, bool nonblock)
{
	/* Set whole by kevent_get_deadline() before any use. */
	struct kevent_deadline d __uninitialized;
	int err = kevent_get_deadline(uts, flags, nonblock, &d);

	if (err)
		return err;
	return kevent_collect_deadline(q, fd, want, buf, max, old_uidx, &d);
}

int __init kevent_queue_setup(void)
{
	int i;

	BUILD_BUG_ON(sizeof(struct ukevent) != 40);
	BUILD_BUG_ON(offsetof(struct ukevent, type) != 8);
	BUILD_BUG_ON(offsetof(struct ukevent, ret_data) != 24);
	BUILD_BUG_ON(offsetof(struct ukevent, user) != 32);
	BUILD_BUG_ON(sizeof(struct kevent_ring) != 8);
	BUILD_BUG_ON(offsetof(struct kevent_ring, event) != 8);
	for (i = 0; i < KEVENT_NR_SLABS; i++)
		kevent_caches[i] = kmem_cache_create(kevent_slabs[i].name,
						     kevent_slabs[i].size, 0,
						     SLAB_ACCOUNT | SLAB_PANIC,
						     NULL);
	return 0;
}
