// SPDX-License-Identifier: GPL-2.0
/*
 * The five kevent system calls and /sys/kernel/kevent (the sixth,
 * kevent_aio_sendfile(), is aio.c's).
 *
 * The syscalls are thin wrappers: they find the queue (-EBADF for a closed
 * fd or a child's copy of it, D11; -EINVAL for a file that is not a queue),
 * check the arguments the spec names and call into queue.c and ctl.c.
 * kevent_get_events() and kevent_wait() take the timeout by pointer (D16).
 *
 * /sys/kernel/kevent/abi holds the ABI version, .../syscalls the numbers of
 * init, ctl, get_events, wait and commit, and aio_sendfile's where it is
 * built (CONFIG_NET): userspace never calls a kevent number the kernel did
 * not advertise (spec section 6).
 *
 * /proc/sys/fs/kevent/ holds the per-user limits (the initial user
 * namespace's UCOUNT_KEVENT_* maxima, as fs/inotify/ holds inotify's) and
 * unprivileged_disabled (Documentation/admin-guide/sysctl/fs.rst).
 */
#include <linux/file.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/syscalls.h>
#include <linux/sysctl.h>
#include <linux/sysfs.h>
#include <linux/user_namespace.h>
#include <asm/unistd.h>

#include "kevent.h"

#define KEVENT_ABI_VERSION	1

static bool kevent_nonblock(struct fd f)
{
	return fd_file(f)->f_flags & O_NONBLOCK;
}

SYSCALL_DEFINE3(kevent_init, struct kevent_ring __user *, ring,
		unsigned int, num, unsigned int, flags)
{
	return kevent_create(ring, num, flags);
}

SYSCALL_DEFINE4(kevent_ctl, int, fd, unsigned int, cmd, unsigned int, num,
		struct ukevent __user *, arg)
{
	struct kevent_queue *q;
	long err;

	CLASS(fd, f)(fd);
	q = kevent_queue_from(f, &err);
	if (!q)
		return err;
	return kevent_ctl_entries(q, cmd, num, arg);
}

SYSCALL_DEFINE6(kevent_get_events, int, fd, unsigned int, min_nr,
		unsigned int, max_nr,
		const struct __kernel_timespec __user *, timeout,
		struct ukevent __user *, buf, unsigned int, flags)
{
	struct kevent_queue *q;
	long err;

	CLASS(fd, f)(fd);
	q = kevent_queue_from(f, &err);
	if (!q)
		return err;
	/* D15 */
	if (!max_nr || min_nr > max_nr)
		return -EINVAL;
	/*
	 * Only NULL is refused up front: max_nr bounds what is copied, not
	 * the buffer, and each copy_to_user() checks its own entry.
	 */
	if (!buf)
		return -EFAULT;
	return kevent_collect(q, fd, max(min_nr, 1U), buf, max_nr, 0, timeout,
			      flags, kevent_nonblock(f));
}

SYSCALL_DEFINE5(kevent_wait, int, fd, unsigned int, num,
		unsigned int, old_uidx,
		const struct __kernel_timespec __user *, timeout,
		unsigned int, flags)
{
	struct kevent_queue *q;
	long err;

	CLASS(fd, f)(fd);
	q = kevent_queue_from(f, &err);
	if (!q)
		return err;
	/* No buffer: into the ring. */
	return kevent_collect(q, fd, 1, NULL, num, old_uidx, timeout, flags,
			      kevent_nonblock(f));
}

SYSCALL_DEFINE3(kevent_commit, int, fd, unsigned int, new_uidx,
		unsigned int, over)
{
	struct kevent_queue *q;
	long err;

	CLASS(fd, f)(fd);
	q = kevent_queue_from(f, &err);
	if (!q)
		return err;
	return kevent_commit_ring(q, new_uidx, over);
}

static ssize_t abi_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%d\n", KEVENT_ABI_VERSION);
}

/* D18: kevent_aio_sendfile()'s number is the sixth, where it is built. */
static ssize_t syscalls_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	if (IS_ENABLED(CONFIG_NET))
		return sysfs_emit(buf, "%d %d %d %d %d %d\n", __NR_kevent_init,
				  __NR_kevent_ctl, __NR_kevent_get_events,
				  __NR_kevent_wait, __NR_kevent_commit,
				  __NR_kevent_aio_sendfile);
	return sysfs_emit(buf, "%d %d %d %d %d\n", __NR_kevent_init,
			  __NR_kevent_ctl, __NR_kevent_get_events,
			  __NR_kevent_wait, __NR_kevent_commit);
}

static ssize_t max_per_queue_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(kevent_max_per_queue));
}

static ssize_t max_per_queue_store(struct kobject *kobj,
				   struct kobj_attribute *attr,
				   const char *buf, size_t count)
{
	unsigned int v;
	int err = kstrtouint(buf, 10, &v);

	if (err)
		return err;
	if (!v)
		return -EINVAL;
	WRITE_ONCE(kevent_max_per_queue, v);
	return count;
}

static struct kobj_attribute abi_attr = __ATTR_RO(abi);
static struct kobj_attribute syscalls_attr = __ATTR_RO(syscalls);
static struct kobj_attribute max_per_queue_attr = __ATTR_RW(max_per_queue);

static struct attribute *kevent_attrs[] = {
	&abi_attr.attr,
	&syscalls_attr.attr,
	&max_per_queue_attr.attr,
	NULL,
};

static const struct attribute_group kevent_attr_group = {
	.attrs = kevent_attrs,
};

static long kevent_long_zero;
static long kevent_long_int_max = INT_MAX;

/* The initial user namespace's maximum of a ucount, as fs/inotify/ has. */
#define KEVENT_UCOUNT_SYSCTL(name, type) {				\
		.procname	= name,					\
		.data		= &init_user_ns.ucount_max[type],	\
		.maxlen		= sizeof(long),				\
		.mode		= 0644,					\
		.proc_handler	= proc_doulongvec_minmax,		\
		.extra1		= &kevent_long_zero,			\
		.extra2		= &kevent_long_int_max,			\
	}

static struct ctl_table kevent_sysctls[] = {
	KEVENT_UCOUNT_SYSCTL("max_user_queues", UCOUNT_KEVENT_QUEUES),
	KEVENT_UCOUNT_SYSCTL("max_user_kevents", UCOUNT_KEVENT_KEVENTS),
	{
		.procname	= "unprivileged_disabled",
		.data		= &kevent_unprivileged_disabled,
		.maxlen		= sizeof(int),
		.mode		= 0644,
		.proc_handler	= proc_dointvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= SYSCTL_TWO,
	},
};

/* What one kevent costs at most: the largest kevent and one wait entry. */
#define KEVENT_ITEM_COST	(sizeof(struct kevent) + \
				 sizeof(wait_queue_entry_t) + \
				 3 * sizeof(void *))

/*
 * The defaults: 128 queues per user (inotify's max_user_instances), and
 * kevents worth 4% of low memory (epoll's max_user_watches), at least 8192.
 */
static void __init kevent_limits_setup(void)
{
	unsigned long kevents;
	struct sysinfo si;

	si_meminfo(&si);
	kevents = (((si.totalram - si.totalhigh) / 25) << PAGE_SHIFT) /
		  KEVENT_ITEM_COST;
	init_user_ns.ucount_max[UCOUNT_KEVENT_QUEUES] = 128;
	init_user_ns.ucount_max[UCOUNT_KEVENT_KEVENTS] =
		clamp(kevents, 8192UL, (unsigned long)INT_MAX);
	register_sysctl_init("fs/kevent", kevent_sysctls);
}

static int __init kevent_setup(void)
{
	struct kobject *kobj;
	int err;

	kevent_queue_setup();
	kevent_fd_setup();
	kevent_aio_setup();
	kevent_limits_setup();
	kobj = kobject_create_and_add("kevent", kernel_kobj);
	if (!kobj)
		return -ENOMEM;
	err = sysfs_create_group(kobj, &kevent_attr_group);
	if (err)
		kobject_put(kobj);
	return err;
}
fs_initcall(kevent_setup);
