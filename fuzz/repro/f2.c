/* F2: kevent_timer_create on a closed queue fd succeeds. */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    int q = kevent_init(NULL, 0, 0);
    close(q);                                   /* closed; no kevent call since */
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_KEVENT;
    kevent_sigev_set_fd(&sev, q);
    timer_t t;
    int r = kevent_timer_create(CLOCK_MONOTONIC, &sev, &t);
    printf("kevent_timer_create on closed fd %d: %d (%s)\n", q, r, r ? strerror(errno) : "success");
    return r == 0 ? 1 : 0;                      /* expected -1/EBADF */
}
