#include "fdio.h"

#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

int hq_write_all(int fd, const void *p, size_t n)
{
    const unsigned char *s = p;
    while (n) {
        const ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int hq_pread_full(int fd, void *p, uint64_t n, uint64_t off)
{
    unsigned char *d = p;
    while (n) {
        const ssize_t r = pread(fd, d, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        d += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int hq_pwrite_full(int fd, const void *p, uint64_t n, uint64_t off)
{
    const unsigned char *s = p;
    while (n) {
        const ssize_t w = pwrite(fd, s, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (uint64_t)w;
        off += (uint64_t)w;
    }
    return 0;
}
