/* F5: ADD naming the queue's own internal eventfd breaks the queue for good. */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    int q = kevent_init(NULL, 0, 0);
    int internal = q + 1;                       /* the library's wake eventfd, made right after */
    struct ukevent e;
    memset(&e, 0, sizeof e);
    e.type = KEVENT_POLL; e.event = KEVENT_POLL_POLLIN; e.id.raw[0] = internal;
    int r = kevent_ctl(q, KEVENT_CTL_ADD, 1, &e);
    printf("ADD POLL on fd %d: returned %d, ret_flags %#x, ret_data[1] %d\n", internal, r,
           e.ret_flags, (int)e.ret_data[1]);
    struct ukevent buf[1];
    struct timespec ts = {0, 0};
    r = kevent_get_events(q, 0, 1, ts, buf, 0);
    printf("then get_events on the queue: %d (%s)\n", r, r < 0 ? strerror(errno) : "ok");
    struct ukevent u;
    memset(&u, 0, sizeof u);
    u.type = KEVENT_UNOTIFY;
    r = kevent_ctl(q, KEVENT_CTL_ADD, 1, &u);
    printf("then ADD UNOTIFY: %d (%s)\n", r, r < 0 ? strerror(errno) : "ok");
    return r < 0 ? 1 : 0;
}
