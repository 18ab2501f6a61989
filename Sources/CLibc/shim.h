// glibc functions Swift's Glibc module does not include: the allocator's controls (malloc_trim),
// the kernel's random generator (getrandom), accept4 with the peer's credentials, and timerfd and
// epoll (relais-bench's open-loop load). Plain C functions of libc; nothing to link.
#ifndef RELAIS_CLIBC_SHIM_H
#define RELAIS_CLIBC_SHIM_H

#include <errno.h>
#include <malloc.h>
#include <sys/random.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

// accept4 is declared only under _GNU_SOURCE, which would change glibc's structures for this
// module alone (clang then refuses to merge them with other modules' copies): declared here
// under a name of ours, bound to the same symbol. SO_PEERCRED's struct ucred likewise.
extern int relais_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) __asm__("accept4");
struct relais_peer_credentials { int pid; unsigned int uid; unsigned int gid; };

// Accepts a connection on a local listening socket, non-blocking and close-on-exec, from this
// very process: another process's connections are closed and passed over. -1 with errno EAGAIN
// when no connection of this process is waiting.
static inline int relais_accept_from_self(int listener) {
    for (;;) {
        int accepted = relais_accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (accepted < 0) return -1;
        struct relais_peer_credentials credentials;
        socklen_t size = sizeof(credentials);
        if (getsockopt(accepted, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0 && credentials.pid == getpid()) return accepted;
        close(accepted);
    }
}

#endif
