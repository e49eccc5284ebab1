/* F1: a short-interval TIMER is delivered more than once by one kevent_get_events. */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    int q = kevent_init(NULL, 0, 0);
    struct ukevent t;
    memset(&t, 0, sizeof t);
    t.type = KEVENT_TIMER; t.event = KEVENT_TIMER_FIRED;
    t.id.raw[0] = 0; t.id.raw[1] = 1000;            /* every 1 us */
    if (kevent_ctl(q, KEVENT_CTL_ADD, 1, &t) != 0) return 2;
    struct ukevent buf[16];
    struct timespec ts = {0, 2000000};               /* 2 ms */
    int n = kevent_get_events(q, 4, 16, ts, buf, 0); /* wait for 4 events */
    printf("get_events returned %d:", n);
    for (int i = 0; i < n; i++) printf(" [type %u id %u.%u data %u,%u]", buf[i].type,
        buf[i].id.raw[0], buf[i].id.raw[1], buf[i].ret_data[0], buf[i].ret_data[1]);
    printf("\n");
    return n > 1 ? 1 : 0;   /* one TIMER kevent: at most one event per wait (spec 4, D8) */
}
