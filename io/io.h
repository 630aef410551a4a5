/* io.h — one small interface for every file format; one file per format implements it
 * (hdf5/, png/). The driver never knows which one it holds.
 *
 * Scanning (hq_io_scan) runs on rank 0 alone, without MPI. Everything else is called by every
 * rank of the communicator in the same order. read/write take a block that this rank owns, or
 * NULL: a rank with nothing to do for an item still calls when `collective` is set, so that
 * collective HDF5 transfers never hang; formats without collective I/O return at once on NULL.
 *
 * Block memory layout: [slice][row][col][channel], native-endian samples of item.sample_bytes,
 * unless open_input was given any_order = 1 (the caller never looks at where a pixel lies): then a
 * format may lay a block out in its storage order, the same for read and write, as long as each
 * slice of the block stays one whole run, in order, and each pixel's channels stay together
 * (HDF5: unfiltered chunked datasets go chunk by chunk, each chunk's part dense).
 * Outputs are written under a temporary name and only take the final name in close with
 * commit = 1, after all ranks agreed that all went well (an HDF5 file, a single PNG); a PNG
 * directory output renames each file as it is finished, and close with commit = 0 takes those
 * back. Either way a failed run leaves no output that looks complete. The input is never opened
 * for writing. */
#ifndef HQ_IO_H
#define HQ_IO_H

#include <mpi.h>
#include <stdint.h>

#include "../core/clahe.h"
#include "../core/error.h"
#include "../core/fbin.h"
#include "../core/mode.h"
#include "../jobs/plan.h"
#include "inventory.h"

/* What the output records about the run (HDF5 attributes and datasets; PNGs ignore it). */
typedef struct hq_run_meta {
    const char *version;
    hq_method method;
    hq_scope scope;
    hq_color color;
    uint32_t bits;        /* 0: the data's own depth */
    const uint64_t *global_hist; /* global scope: the reduced histogram(s), else NULL */
    uint32_t global_nhist, global_bins;
    /* Provenance (report/report.h fills these): */
    const uint16_t *global_lut;  /* global scope: the LUT(s) applied, (global_nhist, global_bins) */
    const char *options, *command_line;
    /* The run's identity (jobs/journal.h's id: the options that shape the output and the input's
     * fingerprint), recorded in a finished output so that --resume can tell one made from another
     * input or with other options; NULL: none (a format without resume). */
    const char *run_id;
    /* Recorded as root attributes of the same names when not NULL: --reference (method match),
     * --ignore as "LO:HI", --mask, and --mask-apply ("all" or "inside"). */
    const char *reference, *ignore, *mask, *mask_apply;
    const hq_clahe_cfg *clahe;   /* --method clahe: its settings (each item's tiles follow), else NULL */
    /* Float data (core/fbin.h); fbin NULL when no item is float: */
    uint32_t fbins;              /* bins (--bins) */
    int frange_given;            /* 1: --range set every binning; 0: each group's own extremes */
    const hq_fbin *fbin;         /* each group's binning (lo, hi): scope image by image index, global [0],
                                    the same on every rank */
    const uint64_t *item_image0; /* the image index of each item's first slice (jobs/plan.h) */
    int no_luts;                 /* --luts none: no per-image LUT is recorded (settings only) */
} hq_run_meta;

typedef struct hq_out_opts {
    const char *path; /* --output */
    int force;        /* --force: replace an existing output */
    int png_level;    /* zlib level for PNG output, -1 = our fast default */
    int verbose;
    int resume;       /* continue an interrupted run's output (HDF5: OUT.part; PNG directory: OUT) */
    int per_pixel;    /* the remap may give two pixels of one colour different colours (CLAHE, a
                         --mask with --mask-apply inside): a palette PNG is then written as RGB(A),
                         its colour type cannot hold them */
    /* The run's settings that shape each image's LUT (method, scope, color, bits, clahe, fbins; the
     * rest unread), or NULL. Scope image or dataset: a format that records LUTs (write_lut) makes
     * room for every image's with the output, so that none is held in memory until close. */
    const hq_run_meta *settings;
    int quiet;        /* -q: no notes */
} hq_out_opts;

typedef struct hq_io hq_io; /* one open input and (after create_output) its output */

typedef struct hq_io_ops {
    const char *name;
    /* 1 when read_block and write_block of different blocks (collective = 0) may run at the same
     * time on different threads, and flush(collective = 0) beside them; such calls then make no
     * MPI call either (the driver's threads share MPI, initialized SERIALIZED). 0: one thread
     * makes every call, one at a time (HDF5, whose library is not thread-safe). */
    int concurrent;
    /* Rank 0 only: appends the items found at `path` (dset: HDF5 dataset path or NULL for all
     * image datasets). flags: HQ_SCAN_*, below. */
    int (*scan)(const char *path, const char *dset, unsigned flags, hq_inventory *inv, hq_err *err);
    int (*open_input)(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **io, hq_err *err);
    int (*read_block)(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err);
    /* Optional (NULL: never). A read without a copy, for this rank's own block (collective = 0),
     * called where read_block would be: where the block's bytes lie in the input exactly as
     * read_block would lay them out (HDF5: unfiltered, native byte order, one run in the file), a
     * read-only pointer to them in a mapping of the input, the reading done; else NULL, and the
     * caller reads the block. Valid until view_release (any thread) or close. */
    const void *(*view_block)(hq_io *io, uint64_t item, const hq_block *b);
    void (*view_release)(hq_io *io, const void *p, uint64_t bytes);
    /* Checks the output path (exists without --force, equals the input, unwritable) and creates
     * the output under a temporary name, with every non-bad item laid out like its input. */
    int (*create_output)(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err);
    int (*write_block)(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src, hq_err *err);
    /* Optional (NULL: the format records no LUTs). After create_output with settings of scope image
     * or dataset: records the LUT of one image (slice `slice` of `item`) in the output, as it is
     * made: nhist * bins entries of the item's mode (bins = 2^(bits or the item's depth)), under
     * CLAHE tiles_y * tiles_x of those, tile-major. It may wait in memory until the next flush
     * (or close), which makes it durable like a block; a LUT given again replaces the first. Any
     * thread, beside read_block and write_block; makes no MPI call. Each image's LUT is given by
     * one rank (the report's: report/report.h). */
    int (*write_lut)(hq_io *io, uint64_t item, uint64_t slice, const uint16_t *lut, hq_err *err);
    /* Makes what was written so far survive a kill (HDF5: the LUTs write_lut was given, and its
     * metadata, such as the chunk indexes of compressed datasets, flushed to the file); the journal
     * calls it before claiming blocks done. collective = 1: every rank calls it; 0: one rank alone,
     * and then the part that would need every rank is skipped (HDF5's metadata with several ranks). */
    int (*flush)(hq_io *io, int collective, hq_err *err);
    /* Rank 0, before any output is made: what is on disk at OUT. Returns 2 when outputs of this
     * kind are not written piece by piece (a single PNG) and so keep no journal, with *finished
     * and *run_id as below when OUT records the run that made it; otherwise 1, with
     * *partial set when an unfinished output is there (HDF5: OUT.part; PNG directory: OUT without
     * its completion record) and *finished when a finished one is (HDF5: OUT, marked complete;
     * PNG directory: its completion record), *run_id then what it records of the run that made
     * it (hq_run_meta.run_id, malloc'd; NULL where it records none, as an older version's). For
     * --resume (app/resume.h). */
    int (*output_state)(const hq_inventory *inv, const char *out, int *partial, int *finished, char **run_id);
    /* Rank 0, on --resume of an unfinished output: whether item's output is still there, so that
     * the journal's claim on it holds (a PNG directory: its file, whole to its IEND chunk, which a
     * user may have removed or cut short).
     * NULL where the output is one file, checked whole (HDF5: OUT.part). */
    int (*item_present)(const hq_inventory *inv, const char *out, uint64_t item);
    /* The file whose data a flush must fdatasync (HDF5: OUT.part), or NULL. */
    const char *(*sync_path)(const hq_io *io);
    /* Rank 0, without MPI, in the scan's child process (hq_io_scan_isolated): reads from the
     * scanned input everything that create_output will later read of it besides the pixels
     * (HDF5: the attributes it copies; the images' own the scan reads, in the same child), so
     * that a library fault on damaged metadata ends that child, not the run. Problems it meets
     * cleanly are left to create_output to report, except what the output could not carry
     * (HDF5: a dataset that is not an image and that HDF5 cannot copy), which fails here:
     * HQ_EINPUT in err. NULL: nothing to read. */
    int (*check_metadata)(const hq_inventory *inv, hq_err *err);
    /* Collective. commit = 1: record meta, mark the output complete (HDF5: the root attribute
     * histeq_dist_complete, written last; PNG directory: the file histeq_dist.complete) and move
     * it to its final name. commit = 0: remove the temporary output (PNG directory: the files this
     * run wrote; an interrupted run's, resumed, stay). A commit whose mark cannot be written (a
     * full disk) fails and undoes the output as commit = 0 does: nothing is left under the final
     * name. Also closes the input. */
    int (*close)(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err);
    /* Optional (NULL: the format has no workers). After open_input: how many threads the backend
     * may keep busy moving and (de)compressing a block's bytes, the calling thread included (the
     * rank's share of the node's cores); 1, the default, keeps everything on the calling thread. */
    void (*set_threads)(hq_io *io, int threads);
    /* Optional (NULL: never). After create_output: 1 when no transfer of the item ever needs to be
     * collective (HDF5: an unfiltered output, and HQ_HDF5_COLLECTIVE not set), so that the ranks
     * sharing it may read and write their blocks of it independently, each at its own pace. */
    int (*independent)(hq_io *io, uint64_t item);
} hq_io_ops;

/* What deflates and inflates compressed HDF5 chunks and PNG output in this build (for --version;
 * zfast.c). */
const char *hq_io_deflate_info(void);

extern const hq_io_ops hq_hdf5_ops;
extern const hq_io_ops hq_png_ops;

/* What a scan is for. SKIP_BAD: unusable items are recorded as bad instead of failing the scan.
 * PLANES: every dataset is gray planes, a rank-3 one N x H x W whatever its last dimension (a
 * --mask: an image of 3 or 4 pixels across is not a colour image there); kept in the inventory
 * (hq_inventory.planes), so that the backend reads the items as scanned. */
enum { HQ_SCAN_SKIP_BAD = 1, HQ_SCAN_PLANES = 2 };

/* Rank 0: decides the format of --input ("file.h5", "file.h5:/dataset", a PNG file, a directory of
 * PNGs, or a text file listing PNG paths) and scans it into inv. Errors name the path. */
int hq_io_scan(const char *input, unsigned flags, hq_inventory *inv, hq_err *err);

/* "FILE:DATASET" (FILE.h5:/group/dset): split at the rightmost ':' whose prefix is an existing
 * regular file, so that dataset names and file names may hold colons. 1 with *file and *dset
 * malloc'd, else 0. */
int hq_io_split_dataset(const char *spec, char **file, char **dset);

/* In a finished PNG output directory: written last, so a directory without it is unfinished. */
#define HQ_PNG_DIR_MARK "histeq_dist.complete"

/* The file a spec names (a --mask or --reference): FILE of an existing FILE:DATASET, else the spec
 * itself; malloc'd (NULL when out of memory). */
char *hq_io_spec_file(const char *spec);

/* hq_io_scan and the format's check_metadata run in a child process, which sends the inventory
 * back over a pipe (its hq_inventory_pack form): a libpng or libhdf5 crash on damaged metadata,
 * or a hang past timeout_s seconds, becomes one HQ_EINPUT error naming the input instead of
 * taking the process down. The child never calls MPI and leaves by _exit. Rank 0 calls it
 * before the inventory is broadcast. timeout_s <= 0: the default, HQ_METADATA_TIMEOUT_S from the
 * environment or 300 s. */
int hq_io_scan_isolated(const char *input, unsigned flags, double timeout_s, hq_inventory *inv, hq_err *err);

/* The same scan in two steps, so that the child works while the caller does something else (rank
 * 0 starts it before MPI_Init, app/main.c): hq_io_scan_start forks the child and returns at once;
 * hq_io_scan_finish collects it exactly as hq_io_scan_isolated would (the deadline counts from
 * the start); hq_io_scan_drop ends and reaps a started scan nobody collected (nothing otherwise).
 * hq_io_scan_matches says whether a started scan is of that input with those flags. A job that
 * failed to start is left empty, and its failure is hq_io_scan_isolated's. */
typedef struct hq_scan_job {
    long pid; /* 0: none */
    int fd;
    unsigned flags;
    double deadline, timeout_s;
    const char *input; /* the caller's string, which must outlive the job */
} hq_scan_job;
int hq_io_scan_start(const char *input, unsigned flags, double timeout_s, hq_scan_job *job, hq_err *err);
int hq_io_scan_matches(const hq_scan_job *job, const char *input, unsigned flags);
int hq_io_scan_finish(hq_scan_job *job, hq_inventory *inv, hq_err *err);
void hq_io_scan_drop(hq_scan_job *job);

static inline const hq_io_ops *hq_io_ops_for(hq_format f)
{
    return f == HQ_FMT_HDF5 ? &hq_hdf5_ops : &hq_png_ops;
}

#endif
