/* F1, SIGNAL variant: a SIGNAL kevent added with REQ_READY whose signal then arrives is
 * delivered twice by one kevent_get_events (spec section 4: at most once per wait; D8). */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    int q = kevent_init(NULL, 0, 0);
    struct ukevent s;
    memset(&s, 0, sizeof s);
    s.type = KEVENT_SIGNAL; s.event = KEVENT_SIGNAL_DELIVERY;
    s.id.raw_u64 = (uint64_t)SIGUSR1 | KEVENT_SIGNAL_NOMASK;   /* reported only */
    s.req_flags = KEVENT_REQ_READY;                            /* queued at once */
    if (kevent_ctl(q, KEVENT_CTL_ADD, 1, &s) != 0) return 2;
    raise(SIGUSR1);
    struct ukevent buf[4];
    struct timespec ts = {0, 0};
    int n = kevent_get_events(q, 0, 4, ts, buf, 0);
    printf("get_events returned %d:", n);
    for (int i = 0; i < n; i++) printf(" [type %u signo %u data %u]", buf[i].type,
        buf[i].id.raw[0], buf[i].ret_data[0]);
    printf("\n");
    return n > 1 ? 1 : 0;
}
