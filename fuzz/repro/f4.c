/* F4: after close(queue) + free(ring), a plain epoll that reuses the fd number makes
 * kevent_get_events write the freed ring (and succeed instead of EINVAL). */
#define _GNU_SOURCE
#include <kevent/kevent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    size_t len = sizeof(struct kevent_ring) + 8 * sizeof(struct ukevent);
    void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int q = kevent_init(ring, 8, 0);
    close(q);                                   /* C contract: close the fd first ... */
    munmap(ring, len);                          /* ... then the ring may go */
    int ep = epoll_create1(EPOLL_CLOEXEC);      /* the program's own epoll: same number */
    printf("queue fd %d, new epoll fd %d\n", q, ep);
    struct ukevent buf[1];
    struct timespec ts = {0, 0};
    fflush(stdout);
    int r = kevent_get_events(ep, 0, 1, ts, buf, 0); /* expected -1/EINVAL: not a queue */
    printf("kevent_get_events on a plain epoll: %d (%s)\n", r, r < 0 ? strerror(errno) : "success");
    return r < 0 && errno == EINVAL ? 0 : 1;
}
