/* Instruction-time cost of candidate "is this number still my epoll" proofs (hfb2). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
#define N 20000
#define MEASURE(name, expr) do { uint64_t best = ~0ull; for (int r = 0; r < 7; r++) { uint64_t t0 = now(); for (int i = 0; i < N; i++) { expr; } uint64_t d = now() - t0; if (d < best) best = d; } printf("%-40s %8.1f per call\n", name, (double)best / N); } while (0)

int main(void) {
	int ep = epoll_create1(EPOLL_CLOEXEC), wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int xfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 };
	epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
	struct epoll_event xe = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = 2 };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, xfd, &xe)) perror("exclusive add");
	fcntl(ep, F_SETSIG, 40);
	struct epoll_event out[8];
	volatile long sink = 0;
	MEASURE("empty loop", sink++);
	MEASURE("syscall(getppid)", sink += syscall(SYS_getppid));
	MEASURE("epoll_ctl MOD wake (P54 today)", sink += syscall(SYS_epoll_ctl, ep, EPOLL_CTL_MOD, wake, &ev));
	MEASURE("epoll_ctl ADD wake (EEXIST)", sink += syscall(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, wake, &ev));
	MEASURE("epoll_ctl MOD exclusive item (EINVAL)", sink += syscall(SYS_epoll_ctl, ep, EPOLL_CTL_MOD, xfd, &ev));
	MEASURE("fcntl F_GETFD", sink += syscall(SYS_fcntl, ep, F_GETFD));
	MEASURE("fcntl F_GETSIG", sink += syscall(SYS_fcntl, ep, F_GETSIG));
	MEASURE("epoll_pwait 0 (nothing ready)", sink += syscall(SYS_epoll_pwait, ep, out, 8, 0, NULL, 0));
	return 0;
}
