/* fdio.h — whole transfers on a file descriptor: short reads and writes continued, EINTR retried.
 *
 * Each returns 0 when all n bytes moved, -1 otherwise (errno from the failing call; a read or
 * write that moved nothing before the end counts as a failure). */
#ifndef HQ_FDIO_H
#define HQ_FDIO_H

#include <stddef.h>
#include <stdint.h>

int hq_write_all(int fd, const void *p, size_t n);
int hq_pread_full(int fd, void *p, uint64_t n, uint64_t off);
int hq_pwrite_full(int fd, const void *p, uint64_t n, uint64_t off);

#endif
