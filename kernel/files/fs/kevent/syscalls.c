// SPDX-License-Identifier: GPL-2.0
/*
 * The five kevent system calls and /sys/kernel/kevent.
 *
 * The syscalls are thin wrappers: they find the queue (-EBADF for a closed
 * fd or a child's copy of it, D11; -EINVAL for a file that is not a queue),
 * check the arguments the spec names and call into queue.c and ctl.c.
 * kevent_get_events() and kevent_wait() take the timeout by pointer (D16).
 *
 * /sys/kernel/kevent/abi holds the ABI version, .../syscalls the numbers of
 * init, ctl, get_events, wait and commit: userspace never calls a kevent
 * number the kernel did not advertise (spec section 6).
 */
#include <linux/file.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/sched/mm.h>
#include <linux/syscalls.h>
#include <linux/sysfs.h>
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
	return kevent_collect(q, fd, max(min_nr, 1U), buf, max_nr, false,
			      timeout, flags, kevent_nonblock(f));
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
	return kevent_wait_ring(q, fd, num, old_uidx, timeout, flags,
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

static ssize_t syscalls_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
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

static int __init kevent_setup(void)
{
	struct kobject *kobj;
	int err;

	kevent_queue_setup();
	kevent_fd_setup();
	kobj = kobject_create_and_add("kevent", kernel_kobj);
	if (!kobj)
		return -ENOMEM;
	err = sysfs_create_group(kobj, &kevent_attr_group);
	if (err)
		kobject_put(kobj);
	return err;
}
fs_initcall(kevent_setup);
