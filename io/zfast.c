/* zfast.c — see zfast.h. Why igzip's level 2: on 4096^2 uint8 slices of noisy and of smooth images,
 * one core of the 2-core build VM, it deflated 194 and 224 MB/s against libdeflate's level 1 at 96
 * and 102 MB/s and zlib's at 41, with streams 5% larger than zlib's level 1 (0.620 and 0.658 of the
 * data against 0.590 and 0.624; libdeflate 0.603 and 0.635); its level 1 was 2% slower and 15%
 * faster on the two, and 7-13% larger (bench/results/e2e_2core_isal.txt). */
#include "zfast.h"
#include "io.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef HQ_HAVE_ISAL
#include <isa-l/igzip_lib.h>

struct hq_zfast {
    unsigned char level_buf[ISAL_DEF_LVL2_DEFAULT];
};

int hq_zfast_on(void)
{
    static int off = -1;
    int o = __atomic_load_n(&off, __ATOMIC_RELAXED);
    if (o < 0) {
        const char *s = getenv("HQ_ISAL");
        o = s && strcmp(s, "0") == 0;
        __atomic_store_n(&off, o, __ATOMIC_RELAXED);
    }
    return !o;
}

size_t hq_zfast_bound(size_t n)
{
    /* Stored blocks at worst (5 bytes each of up to 64 KiB), the zlib header and trailer; generous. */
    return n + n / 1024 * 5 + 1024;
}

size_t hq_zfast_compress(hq_zfast **state, const void *in, size_t n, void *out, size_t cap)
{
    if (!hq_zfast_on() || n > UINT32_MAX || (!*state && !(*state = malloc(sizeof **state))))
        return 0;
    struct isal_zstream s;
    isal_deflate_stateless_init(&s);
    s.level = 2;
    s.level_buf = (*state)->level_buf;
    s.level_buf_size = sizeof (*state)->level_buf;
    s.gzip_flag = IGZIP_ZLIB;
    s.end_of_stream = 1;
    s.flush = NO_FLUSH;
    s.next_in = (uint8_t *)in;
    s.avail_in = (uint32_t)n;
    s.next_out = out;
    s.avail_out = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    return isal_deflate_stateless(&s) == COMP_OK ? (size_t)s.total_out : 0;
}

void hq_zfast_free(hq_zfast *state)
{
    free(state);
}

#else /* without ISA-L: always declined */

int hq_zfast_on(void)
{
    return 0;
}

size_t hq_zfast_bound(size_t n)
{
    return n + n / 1024 * 5 + 1024;
}

size_t hq_zfast_compress(hq_zfast **state, const void *in, size_t n, void *out, size_t cap)
{
    (void)state, (void)in, (void)n, (void)out, (void)cap;
    return 0;
}

void hq_zfast_free(hq_zfast *state)
{
    (void)state;
}

#endif

/* io.h: what deflates in this build, HDF5 chunks and PNG output alike (for --version). */
const char *hq_io_deflate_info(void)
{
#if defined HQ_HAVE_ISAL && defined HQ_HAVE_LIBDEFLATE
    return "ISA-L igzip for HDF5 level 1 and default PNG output (HQ_ISAL=0: off), libdeflate for the rest";
#elif defined HQ_HAVE_ISAL
    return "ISA-L igzip for HDF5 level 1 (HQ_ISAL=0: off), zlib for the rest";
#elif defined HQ_HAVE_LIBDEFLATE
    return "libdeflate";
#else
    return "zlib";
#endif
}
