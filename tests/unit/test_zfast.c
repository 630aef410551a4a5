/* The igzip path (io/zfast.h) gives the same bytes whoever calls it. ISA-L's level 2 hashes the
 * address of its stream struct into one early hash-table bucket (io/zfast.c says where); this test
 * builds an input whose stream changes with that bucket, shows the change with structs placed by
 * hand, and checks that hq_zfast_compress always gives the bytes of the one bucket every state
 * uses — from fresh states, reused states and several threads at once. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "../../io/zfast.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* igzip's compute_hash is the crc32 instruction on a 32-bit word from 0; where the CPU has it,
 * the window hash must be exactly that. */
#if defined(HQ_HAVE_ISAL) && defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t hw_crc32c(uint32_t v)
{
    return __builtin_ia32_crc32si(0, v);
}

static void window_hash_is_the_crc32_instruction(void **state)
{
    (void)state;
    if (!__builtin_cpu_supports("sse4.2"))
        skip();
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const uintptr_t addr = (uintptr_t)(x & 0x7fffffffffffull);
        assert_int_equal(hq_zfast_window_hash(addr), hw_crc32c((uint32_t)(addr >> 16)) & 0xffff);
    }
}
#endif

#ifdef HQ_HAVE_ISAL
#include <isa-l/igzip_lib.h>

enum { N = 400, MASK = 511 }; /* igzip's table for 256..511 input bytes has 512 buckets */

/* crc32c of a 4-byte little-endian word, through the window hash (which hashes addr >> 16). */
static uint32_t word_hash(const unsigned char *p)
{
    const uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return hq_zfast_window_hash((uintptr_t)v << 16);
}

/* Its first four bytes hash to the bucket igzip puts byte 2 in when the struct's window hashes
 * to want, and recur at byte 8; the rest is noise of 16 values (so the block is Huffman-coded,
 * not stored). Where that
 * bucket is bucket 0's, byte 0's entry is overwritten before byte 8 looks for it. */
static void make_input(unsigned char *in, uint32_t want)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        in[i] = (unsigned char)((x >> 24) & 15);
    }
    for (uint32_t v = 1;; v++) {
        in[0] = (unsigned char)v, in[1] = (unsigned char)(v >> 8), in[2] = (unsigned char)(v >> 16);
        in[3] = (unsigned char)(v >> 24);
        if ((word_hash(in) & MASK) == (want & MASK) && memcmp(in, in + 2, 4) != 0)
            break;
    }
    memcpy(in + 8, in, 4);
}

/* An isal_zstream in a mapping of its own at a 64 KiB window whose hash, masked, is want. */
static struct isal_zstream *struct_at(uint32_t want, size_t *len)
{
    *len = (sizeof(struct isal_zstream) + 4095) & ~(size_t)4095;
    void *probe = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(probe != MAP_FAILED);
    munmap(probe, *len);
    for (uintptr_t w = (uintptr_t)probe >> 16; w > 256; w--) {
        if ((hq_zfast_window_hash(w << 16) & MASK) != (want & MASK))
            continue;
        void *at = (void *)(w << 16);
        void *got = mmap(at, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (got == at)
            return got;
        if (got != MAP_FAILED)
            munmap(got, *len);
    }
    fail_msg("no free window hashes to %#x", want & MASK);
    return NULL;
}

static size_t igzip_at(uint32_t want, const unsigned char *in, unsigned char *out, size_t cap)
{
    size_t len;
    struct isal_zstream *s = struct_at(want, &len);
    unsigned char *lb = calloc(1, ISAL_DEF_LVL2_DEFAULT);
    assert_non_null(lb);
    isal_deflate_stateless_init(s);
    s->level = 2, s->level_buf = lb, s->level_buf_size = ISAL_DEF_LVL2_DEFAULT;
    s->gzip_flag = IGZIP_ZLIB, s->end_of_stream = 1, s->flush = NO_FLUSH;
    s->next_in = (uint8_t *)in, s->avail_in = N, s->next_out = out, s->avail_out = (uint32_t)cap;
    assert_int_equal(isal_deflate_stateless(s), COMP_OK);
    const size_t got = s->total_out;
    free(lb);
    munmap(s, len);
    return got;
}

typedef struct job {
    const unsigned char *in;
    unsigned char out[2 * N + 1024];
    size_t n;
} job;

static void *compress_fresh(void *arg)
{
    job *j = arg;
    hq_zfast *z = NULL;
    j->n = hq_zfast_compress(&z, j->in, N, j->out, sizeof j->out);
    hq_zfast_free(z);
    return NULL;
}

static void same_bytes_from_every_caller(void **state)
{
    (void)state;
    if (!hq_zfast_on())
        skip();
    unsigned char in[N], ours[2 * N + 1024], other[2 * N + 1024];
    make_input(in, HQ_ZFAST_WINDOW_HASH);
    const size_t n_ours = igzip_at(HQ_ZFAST_WINDOW_HASH, in, ours, sizeof ours);
    const size_t n_other = igzip_at(HQ_ZFAST_WINDOW_HASH ^ 0x155, in, other, sizeof other);
    if (n_ours == n_other && memcmp(ours, other, n_ours) == 0) {
        print_message("this ISA-L no longer hashes its stream struct's address; nothing to check\n");
        skip();
    }

    /* A fresh state, the same state again, one handed back and taken over, and four threads. */
    hq_zfast *z = NULL;
    unsigned char out[2 * N + 1024];
    for (int round = 0; round < 3; round++) {
        const size_t got = hq_zfast_compress(&z, in, N, out, sizeof out);
        assert_int_equal(got, n_ours);
        assert_memory_equal(out, ours, got);
        if (round == 1) {
            hq_zfast_free(z);
            z = NULL;
        }
    }
    hq_zfast_free(z);
    job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        jobs[t].in = in;
        assert_int_equal(pthread_create(&th[t], NULL, compress_fresh, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].n, n_ours);
        assert_memory_equal(jobs[t].out, ours, n_ours);
    }
}
#endif

#ifndef HQ_HAVE_ISAL
/* Without ISA-L every call declines, and the callers deflate their own way. */
static void declined_without_isal(void **state)
{
    (void)state;
    unsigned char in[64] = {0}, out[2048];
    hq_zfast *z = NULL;
    assert_false(hq_zfast_on());
    assert_int_equal(hq_zfast_compress(&z, in, sizeof in, out, sizeof out), 0);
    hq_zfast_free(z);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#if defined(HQ_HAVE_ISAL) && defined(__x86_64__) && defined(__GNUC__)
        cmocka_unit_test(window_hash_is_the_crc32_instruction),
#endif
#ifdef HQ_HAVE_ISAL
        cmocka_unit_test(same_bytes_from_every_caller),
#else
        cmocka_unit_test(declined_without_isal),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
