// make bench: counts the heap allocations of the process it is preloaded into (LD_PRELOAD) and
// writes the running total to $MALLOC_COUNT_FILE every 50 ms, so that the benchmark can divide
// the allocations a relay made during a wrk run by the requests wrk sent. glibc's own entry points
// do the work; nothing else changes.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static atomic_ulong allocations;

static inline void counted(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

void *malloc(size_t size) { counted(); return __libc_malloc(size); }
void *calloc(size_t count, size_t size) { counted(); return __libc_calloc(count, size); }
void *realloc(void *pointer, size_t size) { counted(); return __libc_realloc(pointer, size); }
void *memalign(size_t alignment, size_t size) { counted(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { counted(); return __libc_memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
    counted();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *out = pointer;
    return 0;
}

static void *report(void *path) {
    int descriptor = open((const char *)path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (descriptor < 0) return NULL;
    char line[32];
    for (;;) {
        // Fixed width, written at offset 0 in one call: a reader never sees a half-written number.
        int length = snprintf(line, sizeof line, "%020lu\n", atomic_load_explicit(&allocations, memory_order_relaxed));
        if (pwrite(descriptor, line, (size_t)length, 0) != length) return NULL;
        usleep(50000);
    }
}

__attribute__((constructor)) static void start(void) {
    char *path = getenv("MALLOC_COUNT_FILE");
    if (path == NULL) return;
    pthread_t thread;
    if (pthread_create(&thread, NULL, report, path) == 0) pthread_detach(thread);
}
