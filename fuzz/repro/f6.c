/* F6: kevent_ctl(fd, ADD, huge num, NULL) gives ENOMEM instead of EFAULT. */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    int q = kevent_init(NULL, 0, 0);
    int r = kevent_ctl(q, KEVENT_CTL_ADD, 0xffffffffu, NULL);
    printf("kevent_ctl(ADD, 0xffffffff, NULL): %d (%s)\n", r, strerror(errno));
    return (r == -1 && errno == EFAULT) ? 0 : 1;
}
