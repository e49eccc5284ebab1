/*
 * backend.c - print the kevent backend this process gets (spec section 6), for
 * scripts/vm-lane's guest: "backend: native", or "backend: fallback: <why native is not
 * used>", or "backend: none: <why>" when there is none (KEVENT_BACKEND invalid, or native
 * forced and unavailable). Exit status 0 for native, 1 otherwise.
 *
 * Build: musl-gcc -static -I<profile>/include backend.c <profile>/libkevent_c.a <libunwind.a>
 */
#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
	const char *backend = kevent_backend();
	const char *why = kevent_backend_unavailable();

	if (backend == NULL)
		backend = "none";
	if (strcmp(backend, "native") == 0) {
		printf("backend: native\n");
		return 0;
	}
	printf("backend: %s: %s\n", backend, why ? why : "(no reason given)");
	return 1;
}
