// SPDX-License-Identifier: GPL-2.0
/*
 * The asynchronous ring (decision P38): kevent_init(ring, num,
 * KEVENT_INIT_ASYNC_RING).
 *
 * The caller's ring (struct kevent_ring of num entries, then struct
 * kevent_ring_tail) is pinned for the queue's life, charged to the
 * creator's RLIMIT_MEMLOCK (user->locked_vm, as io_uring charges a ring the
 * caller provides) and mapped into the kernel with vmap(), so that a
 * producer writes a slot from whatever context it runs in, under q->lock,
 * with no fault possible. A slot is written, then ring_kidx is
 * store-released; ring_uidx, the consumer's index, is load-acquired at each
 * use and trusted for nothing but which slots may be written: a value
 * >= num makes the ring count as full.
 *
 * Producers post only while nothing is queued and no delivery has a kevent
 * in hand (q->nready, q->nbusy): so the ring keeps the order in which events
 * occurred, a kevent is in the ring at most once per posting, and what
 * piles up while it is queued coalesces (D8). An event that finds the ring
 * full, or others queued before it, is queued for the next kevent_wait(). A posted ONESHOT (or
 * BROKEN) kevent is marked dead at once and put on q->reap; its
 * unregistration, which sleeps, runs in task context: a worker, or the
 * next kevent_ctl()/kevent_wait(), whichever comes first (P40).
 *
 * Every index the kernel keeps (q->kidx, q->over, q->posted) is under
 * q->lock on such a queue.
 */
#include <linux/capability.h>
#include <linux/fdtable.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/rcupdate.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include "kevent.h"

/* The pinned, mapped ring of one queue. */
struct kevent_aring {
	struct page **pages;
	unsigned int nr_pages;
	void *vaddr;			/* vmap() of @pages */
	struct kevent_ring *ring;	/* the caller's ring, kernel mapping */
	struct kevent_ring_tail *tail;
	u32 n;
	struct user_struct *user;	/* charged, or NULL (CAP_IPC_LOCK) */
};

/* Bytes of a ring of @num entries with its tail (P38's layout). */
static size_t kevent_aring_bytes(u32 num)
{
	return struct_size_t(struct kevent_ring, event, num) +
	       sizeof(struct kevent_ring_tail);
}

/* RLIMIT_MEMLOCK, as io_uring charges the pages a caller provides. */
static int kevent_aring_account(struct user_struct *user, unsigned long nr)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long cur = atomic_long_read(&user->locked_vm), new;

	do {
		new = cur + nr;
		if (new > limit || new < cur)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
	return 0;
}

static void kevent_aring_unpin(struct kevent_aring *ar)
{
	if (ar->vaddr)
		vunmap(ar->vaddr);
	if (ar->pages)
		unpin_user_pages(ar->pages, ar->nr_pages);
	kvfree(ar->pages);
	if (ar->user) {
		atomic_long_sub(ar->nr_pages, &ar->user->locked_vm);
		free_uid(ar->user);
	}
	kfree(ar);
}

/**
 * kevent_aring_create - check, charge, pin and map an asynchronous ring
 * @ring: the caller's ring
 * @num: its entries
 *
 * Context: process (kevent_init()).
 * Return: the ring, or ERR_PTR(-EINVAL, -EFAULT or -ENOMEM).
 */
struct kevent_aring *kevent_aring_create(struct kevent_ring __user *ring,
					 unsigned int num)
{
	unsigned long addr = (unsigned long)ring, start, end;
	struct kevent_aring *ar;
	long pinned;
	int err;

	if (!ring || num < 2 || num > KEVENT_RING_ASYNC_MAX)
		return ERR_PTR(-EINVAL);
	if (!IS_ALIGNED(addr, 8))
		return ERR_PTR(-EINVAL);
	if (!access_ok(ring, kevent_aring_bytes(num)))
		return ERR_PTR(-EFAULT);
	start = addr & PAGE_MASK;
	end = PAGE_ALIGN(addr + kevent_aring_bytes(num));

	ar = kzalloc(sizeof(*ar), GFP_KERNEL_ACCOUNT);
	if (!ar)
		return ERR_PTR(-ENOMEM);
	ar->n = num;
	ar->nr_pages = (end - start) >> PAGE_SHIFT;
	if (!capable(CAP_IPC_LOCK)) {
		struct user_struct *user = get_uid(current_user());

		err = kevent_aring_account(user, ar->nr_pages);
		if (err) {
			free_uid(user);
			kfree(ar);
			return ERR_PTR(err);
		}
		ar->user = user;
	}
	err = -ENOMEM;
	ar->pages = kvmalloc_array(ar->nr_pages, sizeof(*ar->pages),
				   GFP_KERNEL_ACCOUNT);
	if (!ar->pages)
		goto fail;
	pinned = pin_user_pages_fast(start, ar->nr_pages,
				     FOLL_WRITE | FOLL_LONGTERM, ar->pages);
	if (pinned != ar->nr_pages) {
		/* Not mapped writable from end to end (or not pinnable). */
		if (pinned > 0)
			unpin_user_pages(ar->pages, pinned);
		err = pinned == -ENOMEM ? -ENOMEM : -EFAULT;
		kvfree(ar->pages);
		ar->pages = NULL;
		goto fail;
	}
	ar->vaddr = vmap(ar->pages, ar->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!ar->vaddr)
		goto fail;
	ar->ring = ar->vaddr + offset_in_page(addr);
	ar->tail = (void *)&ar->ring->event[num];
	WRITE_ONCE(ar->ring->ring_kidx, 0);
	WRITE_ONCE(ar->ring->ring_over, 0);
	WRITE_ONCE(ar->tail->ring_uidx, 0);
	WRITE_ONCE(ar->tail->ring_resv, 0);
	return ar;
fail:
	kevent_aring_unpin(ar);
	return ERR_PTR(err);
}

/* The queue is released: no producer can post any more (q->aring is NULL). */
void kevent_aring_destroy(struct kevent_aring *ar)
{
	if (ar)
		kevent_aring_unpin(ar);
}

/* The consumer's index, or U32_MAX if it is not one. */
static __always_inline u32 kevent_aring_uidx(const struct kevent_aring *ar)
{
	/* Its slots were read before it was stored (the consumer's release). */
	u32 uidx = smp_load_acquire(&ar->tail->ring_uidx);

	return uidx < ar->n ? uidx : U32_MAX;
}

/* Free slots after @kidx (one always stays free, D12); 0 if ring_uidx is bad. */
static __always_inline u32 __kevent_aring_room(const struct kevent_aring *ar,
					       u32 kidx)
{
	u32 uidx = kevent_aring_uidx(ar);

	if (uidx == U32_MAX)
		return 0;
	return ar->n - 1 - (kidx >= uidx ? kidx - uidx : ar->n - uidx + kidx);
}

/*
 * Free slots. Exact with q->lock held; without it (kevent_wait()'s room) a
 * snapshot that the write re-checks under q->lock.
 */
u32 kevent_aring_room(struct kevent_queue *q)
{
	return __kevent_aring_room(q->aring, READ_ONCE(q->kidx));
}

/*
 * The next free slot, for the caller to fill in place and then publish with
 * kevent_aring_publish(); NULL if the ring is full. The consumer cannot
 * read it before it is published. Context: q->lock held, any context.
 */
static __always_inline struct ukevent *kevent_aring_slot(struct kevent_queue *q)
{
	lockdep_assert_held(&q->lock);
	if (!__kevent_aring_room(q->aring, q->kidx))
		return NULL;
	return &q->aring->ring->event[q->kidx];
}

/*
 * Publishes the slot kevent_aring_slot() gave; wakes a sleeping
 * kevent_wait(). Context: q->lock held, any context.
 */
static __always_inline void kevent_aring_publish(struct kevent_queue *q,
						 bool wake_all)
{
	struct kevent_aring *ar = q->aring;
	u32 next = q->kidx + 1 == ar->n ? 0 : q->kidx + 1;

	/* The slot before the index: pairs with the consumer's acquire. */
	smp_store_release(&ar->ring->ring_kidx, next);
	WRITE_ONCE(q->kidx, next);
	q->posted++;
	/* Pairs with the waiter's check under q->lock: no lost wake. */
	if (!list_empty(&q->waiters))
		kevent_wake_locked(q, wake_all);
}

/*
 * kevent_wait() moves a queued event into the ring. Context: q->mtx held,
 * q->lock not held. Return: false if the ring is full (a producer filled it
 * since the room was counted): the event stays queued.
 */
bool kevent_aring_push(struct kevent_queue *q, const struct ukevent *ev)
{
	struct ukevent *slot;

	spin_lock_irq(&q->lock);
	slot = kevent_aring_slot(q);
	if (slot) {
		memcpy(slot, ev, sizeof(*ev));
		kevent_aring_publish(q, false);
	}
	spin_unlock_irq(&q->lock);
	return slot;
}

/* Unregisters the kevents producers posted as done. Context: q->mtx held. */
void kevent_aring_reap(struct kevent_queue *q)
{
	struct kevent *k;

	lockdep_assert_held(&q->mtx);
	/* Only an asynchronous ring's producers fill it (released: empty). */
	if (!q->aring || list_empty_careful(&q->reap))
		return;
	spin_lock_irq(&q->lock);
	while ((k = list_first_entry_or_null(&q->reap, struct kevent, link))) {
		list_del_init(&k->link);
		spin_unlock_irq(&q->lock);
		/*
		 * Still the tree's: whatever unregisters a kevent takes it
		 * off q->reap first (kevent_dequeue()), under q->mtx.
		 */
		kevent_unregister(k);
		spin_lock_irq(&q->lock);
	}
	spin_unlock_irq(&q->lock);
}

static void kevent_aring_reap_work(struct work_struct *work)
{
	struct kevent_queue *q = container_of(work, struct kevent_queue,
					      reap_work);

	mutex_lock(&q->mtx);
	kevent_aring_reap(q);
	mutex_unlock(&q->mtx);
	kevent_queue_put(q);
}

void kevent_aring_init_queue(struct kevent_queue *q)
{
	INIT_LIST_HEAD(&q->reap);
	INIT_WORK(&q->reap_work, kevent_aring_reap_work);
}

/**
 * kevent_aring_post - a producer posts @k into the ring
 * @k: a kevent of an asynchronous queue, nothing queued or in a delivery
 * @add: what the source reports
 *
 * Asks the type what to report (its ->post(), which never sleeps) and
 * writes the event in place, into the slot it will publish. A full ring, a
 * type without ->post(), or a ->post() that cannot decide here leaves @k
 * to be queued by the caller.
 *
 * Context: q->lock held, any context.
 * Return: whether @k was posted.
 */
bool kevent_aring_post(struct kevent *k, const struct kevent_snap *add)
{
	struct kevent_queue *q = k->q;
	struct kevent_snap snap = *add;
	u32 data[2] = { 0, 0 };
	enum kevent_report r;
	struct ukevent *slot;
	u32 req_flags;
	bool done;

	lockdep_assert_held(&q->lock);
	if (!k->ops->post || !q->aring)
		return false;
	/* Full: queued, with nothing asked of the type. */
	slot = kevent_aring_slot(q);
	if (!slot)
		return false;
	r = k->ops->post(k, &snap, data);
	if (r == KEVENT_SKIP)
		return false;
	/* MODIFY stores these with WRITE_ONCE() under q->mtx only. */
	req_flags = READ_ONCE(k->uk.req_flags);
	done = r == KEVENT_BROKEN || (req_flags & KEVENT_REQ_ONESHOT);
	*slot = k->uk;
	slot->event = READ_ONCE(k->uk.event);
	slot->req_flags = req_flags;
	slot->ret_flags = (r == KEVENT_BROKEN ? KEVENT_RET_BROKEN : 0) |
			  (done ? KEVENT_RET_DONE : 0);
	slot->ret_data[0] = data[0];
	slot->ret_data[1] = data[1];
	if (done) {
		/*
		 * Reported once: nothing queues it again (P40). On q->reap
		 * before the slot is published, so that a kevent_ctl() after
		 * the consumer saw the event finds it there and reaps it.
		 */
		k->dead = true;
		list_add_tail(&k->link, &q->reap);
	}
	kevent_aring_publish(q, req_flags & KEVENT_REQ_WAKEUP_ALL);
	if (done) {
		kevent_queue_get(q);
		if (!schedule_work(&q->reap_work))
			kevent_queue_put(q);	/* never the last: @k holds q */
	}
	return true;
}

/**
 * kevent_aring_begin - kevent_wait()'s first look at the ring
 * @q: the queue
 * @old_uidx: the consumer index the caller saw
 * @posted: set to q->posted, from which the ring's gain is counted
 *
 * Context: q->mtx held.
 * Return: 0 to go on, 1 to return 0 at once (the caller's view is stale,
 * or events it has not read are in the ring), -EINVAL for a bad ring_uidx.
 */
int kevent_aring_begin(struct kevent_queue *q, u32 old_uidx, u32 *posted)
{
	int ret = 0;
	u32 uidx;

	spin_lock_irq(&q->lock);
	uidx = kevent_aring_uidx(q->aring);
	if (uidx == U32_MAX)
		ret = -EINVAL;
	else if (old_uidx != uidx || old_uidx != q->kidx)
		ret = 1;
	*posted = q->posted;
	spin_unlock_irq(&q->lock);
	return ret;
}

/* What the ring gained since kevent_aring_begin(). */
u32 kevent_aring_gained(struct kevent_queue *q, u32 posted)
{
	u32 now;

	spin_lock_irq(&q->lock);
	now = q->posted;
	spin_unlock_irq(&q->lock);
	return now - posted;
}

/* ->poll(): events in the ring the consumer has not released. */
bool kevent_aring_unread(struct kevent_queue *q)
{
	bool unread = false;

	spin_lock_irq(&q->lock);
	if (q->aring)
		unread = q->kidx != READ_ONCE(q->aring->tail->ring_uidx);
	spin_unlock_irq(&q->lock);
	return unread;
}

/**
 * kevent_aring_commit - kevent_commit() on an asynchronous ring (D13)
 * @q: the queue
 * @new_uidx: the committer's index
 * @cover: the ring_over it read
 *
 * The consumer index is ring_uidx; the result is stored there.
 * Context: q->mtx held.
 * Return: slots released, or -errno.
 */
long kevent_aring_commit(struct kevent_queue *q, u32 new_uidx, u32 cover)
{
	struct kevent_aring *ar = q->aring;
	u32 released, uidx, over;
	long err;

	spin_lock_irq(&q->lock);
	uidx = kevent_aring_uidx(ar);
	err = -EINVAL;
	if (uidx == U32_MAX)
		goto out;
	err = kevent_commit_rule(ar->n, q->kidx, uidx, q->over, new_uidx,
				 cover, &released, &uidx, &over);
	if (err)
		goto out;
	if (released) {
		/* As a consumer stores it: after reading the slots it releases. */
		smp_store_release(&ar->tail->ring_uidx, uidx);
	}
	if (over != q->over) {
		q->over = over;
		WRITE_ONCE(ar->ring->ring_over, over);
	}
	err = released;
out:
	spin_unlock_irq(&q->lock);
	return err;
}

/*
 * D10 for a producer (P39): whether @fd of the queue's owner names @file.
 * q->files is the owner's table, cleared under q->lock by ->flush before
 * that table can be freed; the fd array is freed after an RCU grace period.
 * Context: q->lock held.
 */
bool kevent_aring_fd_current(struct kevent_queue *q, int fd,
			     const struct file *file)
{
	struct files_struct *files = q->files;
	struct file *f;

	lockdep_assert_held(&q->lock);
	if (!files)
		return false;
	rcu_read_lock();
	f = files_lookup_fd_raw(files, fd);
	rcu_read_unlock();
	/* Only compared: the registered file is alive (fd.c). */
	return f == file;
}
