/* zfast.h — zlib streams (RFC 1950) deflated by ISA-L's igzip at its level 2, for the callers'
 * fastest setting: HDF5 chunks of deflate level 1 (hdf5/codec.c) and PNG's default encoding
 * (png/fast.c). Any inflater reads them; their bytes differ from zlib's, never what they decode to.
 *
 * Contract:
 *  - hq_zfast_on: built with ISA-L (HQ_HAVE_ISAL) and not turned off by HQ_ISAL=0.
 *  - hq_zfast_compress writes one whole stream of in into out and returns its length, or 0 (off,
 *    cap too small: hq_zfast_bound is always enough, or no state could be mapped, after which the
 *    process declines every call): the caller then deflates its own way. *state is the caller's
 *    igzip state, made on first use (or taken over from one its thread freed before); one per
 *    thread at a time, handed back with hq_zfast_free. Inputs past 4 GiB are declined.
 *  - The output is a function of the input alone: no thread, rank, address or earlier call
 *    changes a byte (zfast.c says what in igzip would, and how every state avoids it).
 *  - hq_zfast_window_hash: the bucket igzip's level 2 derives from a stream struct's address;
 *    every state's struct has HQ_ZFAST_WINDOW_HASH (for the unit test). */
#ifndef HQ_ZFAST_H
#define HQ_ZFAST_H

#include <stddef.h>
#include <stdint.h>

#define HQ_ZFAST_WINDOW_HASH 0x5a17u

typedef struct hq_zfast hq_zfast;

int hq_zfast_on(void);
size_t hq_zfast_bound(size_t n);
size_t hq_zfast_compress(hq_zfast **state, const void *in, size_t n, void *out, size_t cap);
void hq_zfast_free(hq_zfast *state);
uint32_t hq_zfast_window_hash(uintptr_t addr);

#endif
