// glibc functions Swift's Glibc module does not include: the allocator's controls (malloc_trim),
// the kernel's random generator (getrandom), and accept4 with the peer's credentials (struct
// ucred), which need _GNU_SOURCE. Plain C functions of libc; nothing to link.
#ifndef RELAIS_CLIBC_SHIM_H
#define RELAIS_CLIBC_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

// Accepts a connection on a local listening socket, non-blocking and close-on-exec, from this
// very process: another process's connections are closed and passed over. -1 with errno EAGAIN
// when no connection of this process is waiting.
static inline int relais_accept_from_self(int listener) {
    for (;;) {
        int accepted = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (accepted < 0) return -1;
        struct ucred credentials;
        socklen_t size = sizeof(credentials);
        if (getsockopt(accepted, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0 && credentials.pid == getpid()) return accepted;
        close(accepted);
    }
}

#endif
