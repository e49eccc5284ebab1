// SPDX-License-Identifier: GPL-2.0
/*
 * INODE kevents: entries created in (CREATE) or removed from (REMOVE) a
 * watched directory, on the kernel's fsnotify machinery as inotify uses it.
 *
 * A queue owns one fsnotify group, made at its first INODE kevent, and each
 * kevent one mark (struct kevent_inode_mark) on the directory's inode. A
 * queue watches a directory once (P29): a second kevent on it, through
 * another fd, is -EEXIST (the group has no FSNOTIFY_GROUP_DUPS), so every
 * change to a directory runs at most one mark per queue, queues are bounded
 * by fs.kevent.max_user_queues, and each kevent (so each pinned inode) is
 * charged to fs.kevent.max_user_kevents. id.raw[1] must be 0 (P29).
 * Creation and renames into the directory count as CREATE, deletion and
 * renames out of it as REMOVE (ret_data[0] says which happened
 * since the last delivery). The directory going away (rmdir, unmount)
 * reports the kevent once as BROKEN with -ENOENT.
 *
 * fsnotify calls ->handle_inode_event() in the task changing the directory,
 * under SRCU, possibly after fsnotify_destroy_mark() returned: the mark
 * therefore points at its kevent only under q->lock, and disarm cuts that
 * pointer before it lets the kevent go. The mark holds a queue reference
 * until ->free_mark(), which fsnotify calls after an SRCU period.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/fsnotify_backend.h>
#include <linux/security.h>
#include <linux/slab.h>

#include "kevent.h"

/* The directory went away: reported as BROKEN. */
#define KEVENT_INODE_GONE	0x80000000U

#define KEVENT_INODE_FS_MASK	(FS_CREATE | FS_MOVED_TO | FS_DELETE | \
				 FS_MOVED_FROM | FS_DELETE_SELF | FS_UNMOUNT)

struct kevent_inode_mark {
	struct fsnotify_mark fsn;
	struct kevent_queue *q;
	struct kevent *k;		/* under q->lock; NULL once disarmed */
};

static u32 kevent_inode_bits(u32 mask)
{
	u32 bits = 0;

	if (mask & (FS_CREATE | FS_MOVED_TO))
		bits |= KEVENT_INODE_CREATE;
	if (mask & (FS_DELETE | FS_MOVED_FROM))
		bits |= KEVENT_INODE_REMOVE;
	if (mask & (FS_DELETE_SELF | FS_UNMOUNT | FS_IN_IGNORED))
		bits |= KEVENT_INODE_GONE;
	return bits;
}

/* Queues the mark's kevent with @bits, if they concern it. */
static void kevent_inode_report(struct fsnotify_mark *mark, u32 bits)
{
	struct kevent_inode_mark *m = container_of(mark,
						   struct kevent_inode_mark,
						   fsn);
	struct kevent_snap add = { .pending = 1 };
	struct kevent_queue *q = m->q;
	unsigned long flags;
	bool newly = false;

	spin_lock_irqsave(&q->lock, flags);
	if (m->k) {
		/* MODIFY writes it under q->mtx only. */
		add.bits = bits & (READ_ONCE(m->k->uk.event) |
				   KEVENT_INODE_GONE);
		if (add.bits)
			newly = kevent_notify_locked(m->k, &add);
	}
	spin_unlock_irqrestore(&q->lock, flags);
	if (newly)
		kevent_wake_pollers(q, 0);
}

static int kevent_inode_event(struct fsnotify_mark *mark, u32 mask,
			      struct inode *inode, struct inode *dir,
			      const struct qstr *name, u32 cookie)
{
	kevent_inode_report(mark, kevent_inode_bits(mask));
	return 0;
}

/* The mark is being detached by fsnotify: the directory is gone. */
static void kevent_inode_freeing_mark(struct fsnotify_mark *mark,
				      struct fsnotify_group *group)
{
	kevent_inode_report(mark, KEVENT_INODE_GONE);
}

static void kevent_inode_free_mark(struct fsnotify_mark *mark)
{
	struct kevent_inode_mark *m = container_of(mark,
						   struct kevent_inode_mark,
						   fsn);

	kevent_queue_put(m->q);
	kfree(m);
}

static const struct fsnotify_ops kevent_fsnotify_ops = {
	.handle_inode_event	= kevent_inode_event,
	.freeing_mark		= kevent_inode_freeing_mark,
	.free_mark		= kevent_inode_free_mark,
};

/* The queue's group, made on first use. Context: q->mtx held. */
static struct fsnotify_group *kevent_inode_group(struct kevent_queue *q)
{
	struct fsnotify_group *g;

	lockdep_assert_held(&q->mtx);
	if (q->fsn_group)
		return q->fsn_group;
	g = fsnotify_alloc_group(&kevent_fsnotify_ops, FSNOTIFY_GROUP_USER);
	if (IS_ERR(g))
		return g;
	q->fsn_group = g;
	return g;
}

static int kevent_inode_arm(struct kevent *k, __poll_t *ready)
{
	struct kevent_queue *q = k->q;
	struct fsnotify_group *g;
	struct kevent_inode_mark *m;
	struct inode *inode;
	int err;

	CLASS(fd, f)(k->uk.id.raw[0]);
	*ready = 0;
	if (k->uk.id.raw[1])
		return -EINVAL;
	if (fd_empty(f))
		return -EBADF;
	inode = file_inode(fd_file(f));
	if (!S_ISDIR(inode->i_mode))
		return -EINVAL;
	/* As inotify_find_inode(): read permission and the LSM's word. */
	err = path_permission(&fd_file(f)->f_path, MAY_READ);
	if (!err)
		err = security_path_notify(&fd_file(f)->f_path,
					   KEVENT_INODE_FS_MASK,
					   FSNOTIFY_OBJ_TYPE_INODE);
	if (err)
		return err;
	g = kevent_inode_group(q);
	if (IS_ERR(g))
		return PTR_ERR(g);
	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m)
		return -ENOMEM;
	fsnotify_init_mark(&m->fsn, g);
	m->fsn.mask = KEVENT_INODE_FS_MASK;
	m->q = q;
	m->k = k;
	kevent_queue_get(q);
	err = fsnotify_add_inode_mark(&m->fsn, inode, 0);
	if (err) {
		/* ->free_mark() drops the queue reference and frees m. */
		spin_lock_irq(&q->lock);
		m->k = NULL;
		spin_unlock_irq(&q->lock);
		fsnotify_put_mark(&m->fsn);
		return err;
	}
	k->inode.mark = m;
	return 0;
}

static void kevent_inode_disarm(struct kevent *k)
{
	struct kevent_inode_mark *m = k->inode.mark;
	struct kevent_queue *q = k->q;

	spin_lock_irq(&q->lock);
	m->k = NULL;
	spin_unlock_irq(&q->lock);
	fsnotify_destroy_mark(&m->fsn, q->fsn_group);
	fsnotify_put_mark(&m->fsn);
	k->inode.mark = NULL;
}

static enum kevent_report kevent_inode_deliver(struct kevent *k,
					       struct kevent_snap *snap,
					       u32 data[2])
{
	u32 bits = snap->bits & ~KEVENT_INODE_GONE;

	if (!snap->pending)
		return KEVENT_SKIP;
	if ((snap->bits & KEVENT_INODE_GONE) && !bits) {
		data[1] = (u32)-ENOENT;
		return KEVENT_BROKEN;
	}
	data[0] = bits;
	return KEVENT_DELIVER;
}

const struct kevent_ops kevent_inode_ops = {
	.slab		= KEVENT_SLAB_INODE,
	.arm		= kevent_inode_arm,
	.disarm		= kevent_inode_disarm,
	.report		= kevent_inode_deliver,
	.post		= kevent_inode_deliver,
};

/* The queue's last reference goes: its group with it (may sleep). */
void kevent_inode_release_queue(struct kevent_queue *q)
{
	if (q->fsn_group)
		fsnotify_destroy_group(q->fsn_group);
}
