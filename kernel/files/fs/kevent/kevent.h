/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kevent internals: the queue, one kevent, and what each type provides.
 *
 * Locking, outermost first:
 *
 *   q->mtx             (ctl, delivery, the ring, commit, the tree); the
 *                       q->mtx of a watched kevent queue nests inside its
 *                       watcher's (subclass 1: ->poll() of the watched one)
 *   kevent_nest_mutex  (global; taken inside q->mtx, only while a POLL
 *                       kevent on a kevent queue is armed or disarmed;
 *                       nothing is taken inside it)
 *   source locks       (wait queue heads, hrtimer base, file->f_lock,
 *                       siglock, it_lock, fsnotify's mark locks)
 *   q->lock            (IRQ-safe leaf: the ready list, every field marked
 *                       "under q->lock", and the sleeping waiters)
 *
 * An AIO request's own lock (aio.c) is a leaf taken inside its socket's wait
 * queue lock; its work takes q->lock only (kevent_notify()), never q->mtx.
 *
 * Producers (wait queue callbacks, hrtimer callbacks, READY) run in any
 * context and take only q->lock. They never touch the tree or user memory
 * (an asynchronous ring is written through its pinned kernel mapping,
 * ring.c); everything that sleeps or faults runs under q->mtx in the
 * owner's system call or in a worker.
 */
#ifndef _FS_KEVENT_KEVENT_H
#define _FS_KEVENT_KEVENT_H

#include <linux/file.h>
#include <linux/hrtimer.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/uaccess.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/ukevent.h>

struct files_struct;
struct fsnotify_group;
struct k_itimer;
struct kevent;
struct kevent_aring;
struct kevent_inode_mark;
struct kevent_queue;
struct mem_cgroup;

/* What a type's report() says about one kevent at delivery. */
enum kevent_report {
	KEVENT_SKIP,		/* nothing to deliver now */
	KEVENT_DELIVER,		/* deliver, ret_data filled in */
	KEVENT_BROKEN,		/* deliver as RET_BROKEN, ret_data[1] = -errno */
};

/* The ready state a delivery takes from a kevent (under q->lock). */
struct kevent_snap {
	u32 pending;		/* occurrences and READY marks (D8) */
	u32 bits;		/* what occurrences said (INODE), OR-ed */
	bool marked;		/* named by READY or added with REQ_READY */
};

/* Each type's kevents come from a cache sized for its part of the union. */
enum kevent_slab {
	KEVENT_SLAB_FD,
	KEVENT_SLAB_TIMER,
	KEVENT_SLAB_USER,
	KEVENT_SLAB_SIGNAL,
	KEVENT_SLAB_PTIMER,
	KEVENT_SLAB_INODE,
	KEVENT_SLAB_AIO,
	KEVENT_NR_SLABS,
};

/**
 * struct kevent_ops - what differs between kevent types
 * @slab: where its kevents are allocated
 * @arm: ADD: check the entry and start watching. Process context, q->mtx
 *	held, the kevent not yet in the tree. Sets *@ready to what the source
 *	has right now (state types). Returns 0 or -errno.
 * @disarm: stop watching; after it returns no callback touches the kevent.
 *	Process context, q->mtx held.
 * @modify: MODIFY changed event/req_flags: re-evaluate (D17); optional.
 *	Returns what the source has now, or a negative errno in *@err.
 * @peek: whether a delivery would report something now, without
 *	consuming anything (->poll() of the queue); NULL: always. @depth is
 *	the lockdep subclass for a watched kevent queue.
 * @stale: D10: the registration no longer names what it watched; NULL:
 *	never
 * @report: at delivery, what to report from @snap and the source now; it
 *	may add to @snap what it finds at delivery (TIMER: periods elapsed
 *	since its callback), so that a failed copy puts that back too.
 *	@ret_data is zero on entry. Process context, q->mtx held, q->lock
 *	not held.
 * @ready_data: state types: 1 if @ready (what arm() or modify() saw) is
 *	something to report, with its ret_data; 0 if not; -errno if the
 *	source is broken. NULL: never ready at ADD.
 * @post: an asynchronous ring's producer (ring.c): what to report from
 *	@snap alone, in any context with q->lock held, never sleeping;
 *	KEVENT_SKIP leaves the kevent to be queued. NULL: always queued.
 */
struct kevent_ops {
	enum kevent_slab slab;
	int (*arm)(struct kevent *k, __poll_t *ready);
	void (*disarm)(struct kevent *k);
	__poll_t (*modify)(struct kevent *k, int *err);
	bool (*peek)(struct kevent *k, int depth);
	bool (*stale)(struct kevent *k);
	enum kevent_report (*report)(struct kevent *k,
				     struct kevent_snap *snap,
				     u32 ret_data[2]);
	int (*ready_data)(struct kevent *k, __poll_t ready, u32 ret_data[2]);
	enum kevent_report (*post)(struct kevent *k, struct kevent_snap *snap,
				   u32 ret_data[2]);
};

/* SOCKET, PIPE, POLL: one file and its wait queue entries (fd.c). */
struct kevent_fd {
	struct file *file;		/* no reference: see fd.c */
	int fd;
	__poll_t mask;			/* EPOLL* bits that matter */
	poll_table look;		/* a look's: @mask as its key */
	struct hlist_node fnode;	/* on file->f_kevent, under f_lock */
	struct kevent_pwq *pwq;		/* wait queue entries, under q->mtx */
	struct kevent_queue *target;	/* the watched file is this queue */
};

/* SIGNAL: a link in the owner process's signal_struct (signal.c). */
struct kevent_signal {
	struct hlist_node node;		/* under the owner's siglock */
	struct pid *owner;		/* its thread group */
	int signo;
	bool nomask;
};

/* POSIX_TIMER: the k_itimer that reports here (ptimer.c). */
struct kevent_ptimer {
	struct k_itimer *timr;		/* under q->mtx; NULL once detached */
	ktime_t last;			/* last expiry */
	s64 overrun;			/* timr->it_overrun seen; under it_lock */
};

/* INODE: one fsnotify mark on a directory (inode.c). */
struct kevent_inode {
	struct kevent_inode_mark *mark;
};

/*
 * AIO: one kevent_aio_sendfile() request (aio.c). The work owns the fields
 * but @lock's while it runs; see aio.c for who owns a request when.
 */
struct kevent_aio {
	struct work_struct work;
	struct wait_queue_entry wait;	/* on the socket's wait queue */
	wait_queue_head_t *whead;	/* where @wait was hung, or NULL */
	struct file *in;		/* references; NULL once released */
	struct file *sock;
	const struct cred *cred;	/* the caller's */
	struct mem_cgroup *memcg;	/* the caller's, or NULL */
	loff_t pos;			/* next byte of @in */
	u64 left;
	u64 sent;
	int err;			/* ended on it (-errno), or 0 */
	bool done;			/* the result is final (release/acquire) */
	spinlock_t lock;		/* IRQ-safe: the three below */
	u8 state;
	bool cancelled;
	bool woken;
};

/* TIMER: one hrtimer (timer.c). */
struct kevent_timer {
	struct hrtimer timer;
	ktime_t interval;
	/* under q->lock */
	ktime_t next;			/* next period boundary */
	ktime_t last;			/* last expiry */
	bool stopped;			/* fired; re-armed by its delivery */
};

/*
 * struct kevent - one registration
 * @node: in q->tree, keyed by (type, id); under q->mtx
 * @link: on q->ready, or on a delivery's private list; under q->lock.
 *	Empty means not queued.
 * @counted: on q->ready (or a part set aside from it, or a call's list of
 *	level kevents to requeue) and counted in q->nready; under q->lock
 * @dead: unregistered, or posted as done (ring.c): producers must not
 *	queue it; under q->lock
 */
struct kevent {
	struct rb_node node;
	struct list_head link;
	struct kevent_queue *q;
	const struct kevent_ops *ops;
	struct ukevent uk;		/* as registered; under q->mtx */
	refcount_t ref;
	bool registered;		/* in the tree; under q->mtx */
	bool charged;			/* counted in max_user_kevents */
	/*
	 * A state, delivered again by every wait while it lasts (D7): an fd
	 * kevent without KEVENT_REQ_ET (fd.c sets it on ADD and MODIFY);
	 * every other kevent is an occurrence, consumed by its delivery.
	 * Under q->mtx.
	 */
	bool level;
	u64 stamp;			/* its call; q->mtx and q->lock */
	/*
	 * A delivery's (queue.c), under q->mtx: its chains, of the batch in
	 * hand and then of what it delivered (one at a time), and the ready
	 * state it took (of a level kevent only its READY mark, the one part
	 * its report reads)
	 */
	struct kevent *hand_next;
	struct kevent_snap hand;

	/* under q->lock */
	bool counted;
	bool dead;
	bool marked;
	bool merged;			/* a producer found it queued */
	u32 pending;
	u32 bits;

	/* Last: each type's cache holds only its own member (queue.c). */
	union {
		struct kevent_fd fd;
		struct kevent_timer timer;
		struct kevent_signal sig;
		struct kevent_ptimer ptimer;
		struct kevent_inode inode;
		struct kevent_aio aio;
	};
};

/*
 * struct kevent_queue - one queue: the private_data of a "[kevent]" file
 *
 * The ring's indices are the kernel's own (@kidx, @uidx, @over): they are
 * written to the caller's ring and never read back from it (D12, D13).
 */
struct kevent_queue {
	struct mutex mtx;		/* ctl, delivery, ring, tree */
	spinlock_t lock;		/* IRQ-safe leaf: ready state */
	wait_queue_head_t poll_wait;	/* ->poll() waiters */

	/* under q->lock */
	struct list_head ready;
	unsigned int nready;
	unsigned int nbusy;		/* kevents in a delivery's hand */
	struct list_head waiters;	/* sleeping get_events/wait calls */
	struct list_head holders;	/* sleeping waiters' own (queue.c) */
	unsigned int wake_gen;		/* bumped by READY with num == 0 */
	bool wake_pending;		/* READY(0) not yet seen by a wait */
	unsigned int flush_gen;		/* bumped by close() of any fd of it */
	u32 posted;			/* events written to an async ring */
	struct list_head reap;		/* posted as done: to unregister */
	struct files_struct *files;	/* the owner's, until its ->flush */

	/* under q->mtx */
	struct rb_root tree;
	unsigned int count;
	unsigned int max;
	u64 calls;
	struct kevent_ring __user *ring;
	u32 ring_n, kidx, uidx, over;	/* async ring: kidx, over under q->lock */
	struct kevent_aring *aring;	/* KEVENT_INIT_ASYNC_RING (ring.c) */
	struct work_struct reap_work;	/* unregisters q->reap */
	u64 aio_last;			/* the last AIO request id (D18) */

	struct fsnotify_group *fsn_group;	/* INODE marks; under q->mtx */

	/* under kevent_nest_mutex */
	unsigned int watching;		/* POLL kevents on kevent queues */
	unsigned int watched_by;	/* other queues' POLL kevents on this one */

	struct mm_struct *mm;		/* owner (D11), mmgrab()ed */
	struct ucounts *ucounts;	/* the creator's: queues and kevents */
	refcount_t ref;			/* the file, and fd.c's release path */
};

/* ADD, REMOVE, MODIFY, READY of single entries (ctl.c). */
long kevent_ctl_entries(struct kevent_queue *q, unsigned int cmd,
			unsigned int num, struct ukevent __user *arg);

/* queue.c */
extern const struct file_operations kevent_fops;
extern unsigned int kevent_max_per_queue;
extern int kevent_unprivileged_disabled;
struct kevent *kevent_alloc(struct kevent_queue *q, const struct ukevent *uk,
			    const struct kevent_ops *ops);
void kevent_put(struct kevent *k);
void kevent_queue_get(struct kevent_queue *q);
void kevent_queue_put(struct kevent_queue *q);
/* Where a missing key goes in q->tree (kevent_find_link()). */
struct kevent_pos {
	struct rb_node *parent;
	struct rb_node **link;
};

struct kevent *kevent_find(struct kevent_queue *q, u32 type, u64 id);
struct kevent *kevent_find_link(struct kevent_queue *q, u32 type, u64 id,
				struct kevent_pos *pos);
void kevent_link(struct kevent *k, const struct kevent_pos *pos);
void kevent_insert(struct kevent *k);
void kevent_unregister(struct kevent *k);
void kevent_notify(struct kevent *k, const struct kevent_snap *add,
		   int nest);
void kevent_notify_bits(struct kevent *k, u32 bits, int nest);
bool kevent_notify_locked(struct kevent *k, const struct kevent_snap *add);
void kevent_wake_locked(struct kevent_queue *q, bool all);
void __kevent_wake_pollers(struct kevent_queue *q, int nest);

/*
 * user_access_begin() for the few dozen bytes of a record or a timeout,
 * accessed from the start of *@pptr: where the architecture can, the
 * pointer is masked instead (an address above user space then faults), with
 * no test and no speculation barrier, as pselect6() reads its argument
 * pack. Paired with user_access_end(). Return: false if the pointer is
 * refused; *@pptr may be replaced by its masked value.
 */
#define kevent_user_access_begin(pptr, len)				\
({									\
	__auto_type __pp = (pptr);					\
	bool __ok = true;						\
									\
	if (can_do_masked_user_access())				\
		*__pp = masked_user_access_begin(*__pp);		\
	else								\
		__ok = user_access_begin(*__pp, (len));			\
	__ok;								\
})

/**
 * kevent_wake_pollers - wake ->poll() waiters of a queue, if there are any
 * @q: the queue
 * @nest: the lockdep subclass of q->poll_wait.lock: 1 when the caller runs
 *	inside the wake-up of another kevent queue's poll_wait (a kevent queue
 *	watching this one), whose lock is of the same class
 *
 * The test is inlined: it runs after every newly queued kevent, and usually
 * nobody polls a queue.
 */
static __always_inline void kevent_wake_pollers(struct kevent_queue *q,
						int nest)
{
	/*
	 * A poller hooks itself before it takes q->lock to look at the ready
	 * list; the producer queued under q->lock before it looks here: the
	 * lock orders the two, so no wake-up is lost.
	 */
	if (waitqueue_active(&q->poll_wait))
		__kevent_wake_pollers(q, nest);
}

/**
 * kevent_queue_from - the queue behind a caller's fd, for its owner only
 * @f: the fd
 * @err: -EBADF (closed, or D11: another process's copy) or -EINVAL (not a
 *	queue) when NULL is returned
 *
 * Inlined into each system call: it runs once per call.
 *
 * Return: the queue, or NULL.
 */
static __always_inline struct kevent_queue *kevent_queue_from(struct fd f,
							      long *err)
{
	struct kevent_queue *q;

	*err = -EBADF;
	if (fd_empty(f))
		return NULL;
	*err = -EINVAL;
	if (fd_file(f)->f_op != &kevent_fops)
		return NULL;
	q = fd_file(f)->private_data;
	/* D11: a forked child (or an exec'ed image) shares nothing. */
	*err = -EBADF;
	if (q->mm != current->mm)
		return NULL;
	*err = 0;
	return q;
}

void kevent_dequeue(struct kevent *k);
void kevent_wake_waiters(struct kevent_queue *q);
__poll_t kevent_queue_poll(struct file *file, poll_table *wait, int depth);
long kevent_create(struct kevent_ring __user *ring, unsigned int num,
		   unsigned int flags);
long kevent_collect(struct kevent_queue *q, int fd, unsigned int want,
		    struct ukevent __user *buf, unsigned int max, u32 old_uidx,
		    const struct __kernel_timespec __user *uts,
		    unsigned int flags, bool nonblock);
int kevent_queue_setup(void);
int kevent_fd_setup(void);
long kevent_commit_ring(struct kevent_queue *q, u32 new_uidx, u32 over);

/**
 * kevent_commit_rule - the commit rule of D13, as arithmetic
 * @n: ring size
 * @kidx: producer index
 * @uidx: consumer index
 * @over: wrap counter
 * @new_uidx: the committer's index, one past the last slot consumed
 * @cover: the ring_over the committer read
 * @released: slots released (0: a stale commit)
 * @uidx_out: the consumer index afterwards
 * @over_out: the wrap counter afterwards
 *
 * @new_uidx names the one position among the @n that end at the producer;
 * only a position after @uidx releases anything. @kidx and @uidx are below
 * @n (the queue keeps its own indices so; ring.c checks the ring_uidx it
 * reads), and @new_uidx is checked here.
 *
 * Inline: both commits (queue.c, ring.c) run it once per call, and its
 * nine arguments would otherwise travel through the stack.
 *
 * Return: 0, -EINVAL or -EOVERFLOW.
 */
static inline int kevent_commit_rule(u32 n, u32 kidx, u32 uidx, u32 over,
				     u32 new_uidx, u32 cover, u32 *released,
				     u32 *uidx_out, u32 *over_out)
{
	u32 used, back;

	if (new_uidx >= n)
		return -EINVAL;
	if (cover != over && cover != over - 1)
		return -EOVERFLOW;
	/* Every index is below @n now: no division. */
	used = kidx >= uidx ? kidx - uidx : n - uidx + kidx;
	back = kidx >= new_uidx ? kidx - new_uidx : n - new_uidx + kidx;
	*uidx_out = uidx;
	*over_out = over;
	*released = 0;
	if (back >= used)
		return 0;
	*released = used - back;
	*uidx_out = new_uidx;
	if ((u64)uidx + *released >= n)
		*over_out = over + 1;
	return 0;
}

/* ring.c: the asynchronous ring (P38). */
struct kevent_aring *kevent_aring_create(struct kevent_ring __user *ring,
					 unsigned int num);
void kevent_aring_destroy(struct kevent_aring *ar);
void kevent_aring_init_queue(struct kevent_queue *q);
u32 kevent_aring_room(struct kevent_queue *q);
bool kevent_aring_push(struct kevent_queue *q, const struct ukevent *ev);
bool kevent_aring_post(struct kevent *k, const struct kevent_snap *add);
void kevent_aring_reap(struct kevent_queue *q);
int kevent_aring_begin(struct kevent_queue *q, u32 old_uidx, u32 *posted);
u32 kevent_aring_gained(struct kevent_queue *q, u32 posted);
bool kevent_aring_unread(struct kevent_queue *q);
long kevent_aring_commit(struct kevent_queue *q, u32 new_uidx, u32 cover);
bool kevent_aring_fd_current(struct kevent_queue *q, int fd,
			     const struct file *file);

/* The types. */
extern const struct kevent_ops kevent_fd_ops;
extern const struct kevent_ops kevent_timer_ops;
extern const struct kevent_ops kevent_user_ops;
extern const struct kevent_ops kevent_signal_ops;
extern const struct kevent_ops kevent_ptimer_ops;
extern const struct kevent_ops kevent_inode_ops;
#ifdef CONFIG_NET
void kevent_aio_setup(void);
#else
/* No sockets: no kevent_aio_sendfile() (COND_SYSCALL: -ENOSYS). */
static inline void kevent_aio_setup(void)
{
}
#endif
void kevent_inode_release_queue(struct kevent_queue *q);

static inline bool kevent_is_oneshot(const struct kevent *k)
{
	return READ_ONCE(k->uk.req_flags) & KEVENT_REQ_ONESHOT;
}

static inline bool kevent_last_check(const struct kevent *k)
{
	return k->uk.req_flags & KEVENT_REQ_LAST_CHECK;
}

#define KEVENT_KNOWN_REQ_FLAGS	(KEVENT_REQ_ONESHOT | KEVENT_REQ_WAKEUP_ALL | \
				 KEVENT_REQ_ET | KEVENT_REQ_LAST_CHECK | \
				 KEVENT_REQ_ALWAYS_QUEUE | KEVENT_REQ_READY)

#endif /* _FS_KEVENT_KEVENT_H */
