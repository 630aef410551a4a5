/* mask.h — the mask plane that travels with a block: one byte per pixel, non-zero = counted.
 *
 * --mask SRC is opened as a second input through the io layer and read block by block with the
 * image, the same rows and columns (so it works beyond memory and across ranks, and needs no
 * whole-image copy). SRC is one image that applies to every input image of its height x width (an
 * HDF5 dataset FILE.h5:/path of H x W, or a PNG file), an N x H x W dataset whose slice s masks
 * slice s of every N-slice stack, or (PNG input) a directory or list of PNGs matched to the input
 * files by base name, byte for byte (case counts), in O(n log n) for n PNGs. Masks are read as
 * stored: uint8/uint16 samples, the first channel of a PNG.
 *
 * --ignore with --mask-apply inside on RGB luma is folded in here too: a pixel whose luma Y is
 * ignored gets 0, so the remap leaves it as it is (an identity LUT entry would not: luma ties move).
 * Gray, value and channels pixels need no plane for that (the identity LUT entries of
 * app/run/groups.c). */
#ifndef HQ_MASK_H
#define HQ_MASK_H

#include <stdint.h>

#include "../core/error.h"
#include "../io/inventory.h"
#include "../jobs/plan.h"
#include "../mpi/comm.h"
#include "options.h"

typedef struct hq_mask hq_mask;

/* Collective. *out is NULL when no block needs a plane. Rank 0 scans SRC and checks it against
 * the input's usable items; a shape or name mismatch is HQ_EINPUT, one line naming the mask. The
 * mask is opened for reading by every rank of c. inv must outlive the mask. */
int hq_mask_open(const hq_options *o, const hq_inventory *inv, const hq_comm *c, hq_mask **out, hq_err *err);

/* 1 when SRC is a file read with the image: the input must then be read in row-major order. */
int hq_mask_has_file(const hq_mask *m);

/* Bytes of the plane of block b (its pixel count), or 0 when b has none (m NULL: none at all). */
uint64_t hq_mask_plane_bytes(const hq_mask *m, const hq_block *b);

/* Fills plane (hq_mask_plane_bytes bytes) for block b, whose pixels (as read) are at `pixels`.
 * Independent I/O: any rank, any time, no other rank involved. */
int hq_mask_read(hq_mask *m, const hq_block *b, const void *pixels, uint8_t *plane, hq_err *err);

/* Collective (every rank that opened it). NULL is fine. */
int hq_mask_close(hq_mask *m, hq_err *err);

#endif
