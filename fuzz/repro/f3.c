/* F3: kevent_wait on a closed queue fd gives EINVAL, not EBADF. */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    int q = kevent_init(NULL, 0, 0);            /* no ring */
    close(q);
    struct timespec ts = {0, 0};
    int r = kevent_wait(q, 1, 0, ts, 0);
    printf("kevent_wait on closed fd: %d (%s)\n", r, strerror(errno));
    return (r == -1 && errno == EBADF) ? 0 : 1;
}
