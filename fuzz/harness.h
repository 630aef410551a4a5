/* harness.h — what the PNG and HDF5 fuzz harnesses share: one input file taken through the same
 * calls histeq_dist makes on one rank (hq_io_scan, the plan, open_input, create_output, every
 * block read and written back, close), with the house rules checked after each call.
 *
 * A broken rule is a bug in our code even where nothing crashed, so it aborts (and libFuzzer or the
 * replay keeps the input): a failure must come back as a known HQ_E* code with one non-empty line
 * naming a file; a scanned item must have a shape we can hold; a read that succeeds fills its
 * block; a PNG that decodes can be written back; after close no HDF5 object may stay open and no
 * file but the input may remain in the work directory (a failed run leaves no output).
 *
 * Limits of the harness, not of histeq_dist: items larger than HQF_ITEM_CAP bytes (as histeq_dist
 * computes their size) are scanned and opened but not read, and no output is made for an input
 * holding one, so that a header claiming terabytes costs neither memory nor disk here. */
#ifndef HQ_FUZZ_HARNESS_H
#define HQ_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#define HQF_ITEM_CAP ((uint64_t)64 << 20)
/* Small blocks, so that HDF5 items are cut into row bands and multi-slice blocks as big ones are. */
#define HQF_BLOCK_BYTES ((uint64_t)4096)

/* MPI (a singleton: no mpirun needed) and a private work directory, once per process. */
void hqf_init(void);

/* libFuzzer's start-up hook, the same for every target: hqf_init (replay.c calls it too). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Writes data to WORKDIR/input.SUFFIX and runs histeq_dist's calls on it. */
void hqf_run(const uint8_t *data, size_t size, const char *suffix);

#endif
