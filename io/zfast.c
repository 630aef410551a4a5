/* zfast.c — see zfast.h. Why igzip's level 2: on 4096^2 uint8 slices of noisy and of smooth images,
 * one core of the 2-core build VM, it deflated 194 and 224 MB/s against libdeflate's level 1 at 96
 * and 102 MB/s and zlib's at 41, with streams 5% larger than zlib's level 1 (0.620 and 0.658 of the
 * data against 0.590 and 0.624; libdeflate 0.603 and 0.635); its level 1 was 2% slower and 15%
 * faster on the two, and 7-13% larger (bench/results/e2e_2core_isal.txt). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "zfast.h"
#include "io.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef HQ_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#include <pthread.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take the address as a hint */
#endif

/* Where a state lives, and why it matters. ISA-L's level-2 body (igzip_icf_body_h1_gr_bt.asm,
 * .write_first_byte, 2.30 and upstream as of 2026) hashes rcx where it means the input's third
 * byte, and rcx still holds the address of the isal_zstream. So one early hash-table entry goes
 * to the bucket of bits 16-47 of that address: the stream's bytes (never what they inflate to)
 * depended on which thread's stack the struct sat on, and PNGs written by different threads or
 * ranks differed by one match now and then. Each state is therefore a mapping whose 64 KiB
 * window hashes to HQ_ZFAST_WINDOW_HASH, with the stream struct first: every caller then hashes
 * the same bucket, and the output is a function of the input alone. */
struct hq_zfast {
    struct isal_zstream s; /* first: its address is what igzip hashes */
    unsigned char level_buf[ISAL_DEF_LVL2_DEFAULT];
};

#define STATE_BYTES ((sizeof(hq_zfast) + 4095) & ~(size_t)4095)

static uint32_t crc32c_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static pthread_key_t spare_key; /* one unmapped-on-exit state per thread, reused across calls */

static void unmap_state(void *st)
{
    if (st)
        munmap(st, STATE_BYTES);
}

static void init_once(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc32c_table[i] = c;
    }
    if (pthread_key_create(&spare_key, unmap_state) != 0)
        spare_key = (pthread_key_t)-1;
}

/* igzip's compute_hash is the SSE4.2 crc32 of a 32-bit word from 0, which is CRC-32C without the
 * final inversion. The table must be made (init_once). */
static uint32_t window_hash(uintptr_t addr)
{
    uint32_t c = 0, w = (uint32_t)(addr >> 16);
    for (int b = 0; b < 4; b++, w >>= 8)
        c = (c >> 8) ^ crc32c_table[(c ^ w) & 0xff];
    return c & 0xffff;
}

uint32_t hq_zfast_window_hash(uintptr_t addr)
{
    pthread_once(&crc_once, init_once);
    return window_hash(addr);
}

/* A fresh state at a window of the right hash: one in 65,536 windows qualifies, so the search
 * walks down from where the kernel would place the mapping (mmap's free space grows downward)
 * and takes the first qualifying window that is free. After init_once. */
static hq_zfast *map_state(void)
{
    void *probe = mmap(NULL, STATE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED)
        return NULL;
    munmap(probe, STATE_BYTES);
    int tries = 0;
    for (uintptr_t w = (uintptr_t)probe >> 16; w > 256 && tries < 256; w--) {
        if (window_hash(w << 16) != HQ_ZFAST_WINDOW_HASH)
            continue;
        tries++;
        void *want = (void *)(w << 16);
        void *got = mmap(want, STATE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                         -1, 0);
        if (got == want)
            return got;
        if (got != MAP_FAILED)
            munmap(got, STATE_BYTES);
    }
    return NULL;
}

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
    if (!hq_zfast_on() || n > UINT32_MAX)
        return 0;
    /* A process where no window could be mapped declines from then on, rather than search again
     * for every call (the callers then deflate their own way). */
    static int unmappable;
    if (!*state) {
        pthread_once(&crc_once, init_once);
        if (spare_key != (pthread_key_t)-1 && (*state = pthread_getspecific(spare_key)) != NULL) {
            pthread_setspecific(spare_key, NULL);
        } else if (__atomic_load_n(&unmappable, __ATOMIC_RELAXED) || !(*state = map_state())) {
            __atomic_store_n(&unmappable, 1, __ATOMIC_RELAXED);
            return 0;
        }
    }
    struct isal_zstream *s = &(*state)->s;
    isal_deflate_stateless_init(s);
    s->hist_bits = 0; /* the default window; stateless_init leaves this field as it was */
    s->level = 2;
    s->level_buf = (*state)->level_buf;
    s->level_buf_size = sizeof (*state)->level_buf;
    s->gzip_flag = IGZIP_ZLIB;
    s->end_of_stream = 1;
    s->flush = NO_FLUSH;
    s->next_in = (uint8_t *)in;
    s->avail_in = (uint32_t)n;
    s->next_out = out;
    s->avail_out = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    return isal_deflate_stateless(s) == COMP_OK ? (size_t)s->total_out : 0;
}

void hq_zfast_free(hq_zfast *state)
{
    if (!state)
        return;
    pthread_once(&crc_once, init_once);
    if (spare_key != (pthread_key_t)-1 && !pthread_getspecific(spare_key) &&
        pthread_setspecific(spare_key, state) == 0)
        return;
    unmap_state(state);
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

uint32_t hq_zfast_window_hash(uintptr_t addr)
{
    (void)addr;
    return 0;
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
