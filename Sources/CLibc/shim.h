// glibc functions Swift's Glibc module does not include: the allocator's controls (malloc_trim)
// and the kernel's random generator (getrandom). Plain C functions of libc, callable from Swift
// as they are; nothing to link.
#ifndef RELAIS_CLIBC_SHIM_H
#define RELAIS_CLIBC_SHIM_H

#include <malloc.h>
#include <sys/random.h>

#endif
