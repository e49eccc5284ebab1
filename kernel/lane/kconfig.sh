#!/bin/sh
# kernel/lane/kconfig.sh TREE: the base configuration of scripts/vm-lane's test kernel, applied
# right after `make tinyconfig` (then kernel/config, the kevent fragment; then, for
# `vm-lane test --debug`, the debug options; then `make olddefconfig`).
#
# A small x86_64 kernel that boots in QEMU (TCG, 2 CPUs) from an initramfs, with what the
# conformance suite, the C examples and the fuzz harness use, and nothing else:
#
# * 64BIT: tinyconfig on x86 is 32-bit; olddefconfig once after it so that x86_64-only
#   symbols become visible.
# * console on the first serial port, printk with timestamps (the lane's kernel-log check
#   reads `[ 1.234567] ...` lines), BUG (without it WARN_ON() prints nothing: tinyconfig turns
#   it off) and KALLSYMS (symbol names in traces).
# * ACPI + PCI: ACPI's MADT is what brings up the second CPU, QEMU's DSDT loads only with PCI,
#   and `poweroff -f` needs ACPI S5. DEVMEM + DEVPORT: busybox writes the exit status to
#   QEMU's isa-debug-exit port (0xf4) through /dev/port.
# * initramfs (gzip), ELF and #! binaries, proc, sysfs (/sys/kernel/kevent), tmpfs (/tmp),
#   devtmpfs, loopback TCP/UDP and AF_UNIX.
# * the fallback engine's and the suite's system calls: epoll, timerfd, signalfd, eventfd,
#   inotify, POSIX timers, futex, memfd_create (MEMFD_CREATE), madvise (ADVISE_SYSCALLS),
#   process_vm_readv/writev (CROSS_MEMORY_ATTACH: libkevent's pointer checks), seccomp.
# * IO_URING: kevent-bench measures io_uring (multishot POLL_ADD, completions reaped from the
#   CQ ring) beside epoll and kevent in the guest (issue 21); tinyconfig turns it off.
#
# Adapted from ../shared/reference/kernel-lane/kconfig.sh (measured there: tinyconfig plus this
# is about 10 s, a full `make -j2 bzImage` about 160 s).
set -eu
cd "$1"
c=./scripts/config
$c --enable 64BIT
make -s olddefconfig
$c \
  --enable PRINTK --enable EARLY_PRINTK --enable PRINTK_TIME --enable BUG --enable KALLSYMS \
  --enable TTY --enable SERIAL_8250 --enable SERIAL_8250_CONSOLE \
  --disable SERIAL_8250_PCI --disable SERIAL_8250_EXAR --disable SERIAL_8250_LPSS \
  --disable SERIAL_8250_MID \
  --enable BLK_DEV_INITRD --enable RD_GZIP --disable RD_BZIP2 --disable RD_LZMA \
  --disable RD_XZ --disable RD_LZO --disable RD_LZ4 --disable RD_ZSTD \
  --enable BINFMT_ELF --enable BINFMT_SCRIPT \
  --enable PROC_FS --enable PROC_SYSCTL --enable SYSFS --enable TMPFS \
  --enable DEVTMPFS --enable DEVTMPFS_MOUNT \
  --enable EPOLL --enable TIMERFD --enable SIGNALFD --enable EVENTFD \
  --enable FSNOTIFY --enable INOTIFY_USER \
  --enable POSIX_TIMERS --enable HIGH_RES_TIMERS --enable FUTEX --enable SHMEM \
  --enable MEMFD_CREATE --enable ADVISE_SYSCALLS --enable CROSS_MEMORY_ATTACH \
  --enable SECCOMP --enable SECCOMP_FILTER --enable IO_URING \
  --enable MULTIUSER --enable AIO --enable FILE_LOCKING \
  --enable NET --enable UNIX --enable INET --disable IPV6 \
  --disable INET_DIAG --disable WIRELESS --disable WLAN --disable ETHERNET \
  --enable SMP --set-val NR_CPUS 4 \
  --enable PCI --enable ACPI --disable ACPI_AC --disable ACPI_BATTERY --disable ACPI_FAN \
  --disable ACPI_THERMAL --disable ACPI_VIDEO --disable ACPI_BUTTON \
  --disable ACPI_TABLE_UPGRADE \
  --disable VGA_ARB --disable PCIEPORTBUS --disable HOTPLUG_PCI \
  --enable X86_MPPARSE --enable HPET_TIMER \
  --enable HYPERVISOR_GUEST --enable PARAVIRT --enable KVM_GUEST \
  --enable RSEQ --enable MEMBARRIER \
  --enable DEVMEM --enable DEVPORT \
  --disable MODULES --disable DEBUG_INFO --disable DEBUG_KERNEL
make -s olddefconfig
