// glibc's allocator controls (malloc_trim), which Swift's Glibc module does not include. Plain C
// functions of libc, callable from Swift as they are; nothing to link.
#ifndef RELAIS_CMALLOC_SHIM_H
#define RELAIS_CMALLOC_SHIM_H

#include <malloc.h>

#endif
