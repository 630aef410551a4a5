/* png_internal.h — what the files of the PNG backend (io/png/) share; nothing outside io/png/
 * includes it: io/io.h (hq_png_ops) stays the one interface.
 *
 * The backend of io.h for a PNG file, a directory of PNGs, or a list file of PNG paths:
 *   scan.c           the inventory: a file, a directory's PNGs or a list's, one item each, headers read
 *   read.c           the input opened; an item decoded whole (its header and palette indices kept
 *                    for its write)
 *   create_output.c  the output prepared on rank 0: a directory (made, checked empty or resumable)
 *                    or a file, never one of the inputs
 *   write.c          an item encoded under a temporary name and renamed into place; the run closed
 *                    (completion record) or undone
 *   paths.c          path pieces the others share
 *   backend.c        hq_png_ops
 * under them the codec: codec.h (libpng), fast.h (libdeflate), format.h (what they share).
 *
 * A PNG item is never split: every block is the whole image, and each rank reads and writes only
 * its own items, independently (`collective` is ignored; a NULL block returns 0 at once).
 *
 * Output: a directory for a directory or list input (one PNG per item, named item.name), a file
 * for a single PNG input. Each PNG is written to ".NAME.part-<pid>" in its final directory; in a
 * directory output it takes its final name (rename) as soon as it is complete and a failed write
 * removes its temporary at once, so a failed run leaves only whole PNGs (a killed one may leave a
 * hidden .part file); a single-file output keeps the temporary name until close(commit = 1).
 * A directory is finished by its completion record, written by rank 0 in close(commit = 1) after
 * every rank's files are in place; a record that cannot be written (a full disk) fails the close,
 * and every rank takes its files back as with commit = 0 (an interrupted run's files, resumed,
 * stay, and app/run/close.c keeps the journal that claims them).
 * Outputs keep the input's color type, bit depth, palette (remapped) and palette tRNS (a gray or
 * RGB image's transparent colour becomes an alpha channel: codec.h); they are written without
 * interlacing.
 *
 * Threads: read_block and write_block of different items may run at the same time on different
 * threads (io.h `concurrent`): libpng and zlib keep their state per call, and what the calls share
 * here (the headers kept for writing, the list of files written) is under one mutex.
 *
 * read_block keeps each item's header (and, for palette images, its index array) until its
 * write_block takes it, so that write_block can write the same indices with a remapped palette.
 * At most HELD_MAX items are kept; past that the oldest is dropped, and its write_block decodes
 * the header (and indices) from the input again. The inventory passed to open_input must outlive
 * the hq_io. */
#ifndef HQ_PNG_INTERNAL_H
#define HQ_PNG_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../io.h"
#include "codec.h"

#define STDIO_BUF_BYTES (1u << 20)
#define COMPLETE_NAME HQ_PNG_DIR_MARK
#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

/* Items read whose write has not come yet: more than the blocks in flight of any sane pipeline. */
#define HELD_MAX 256

/* An item's header (and palette indices) from read_block, for its write_block. */
typedef struct held_item {
    int used;
    uint64_t item;
    hq_png_info info;
    uint8_t *indices;
} held_item;

/* One file written under a temporary name, waiting to take its final name. */
typedef struct pending_out {
    char *tmp, *final;
    int slot; /* tmp's in core/doomed.h, or -1 */
} pending_out;

struct hq_io {
    const hq_inventory *inv;
    MPI_Comm comm;
    int rank;
    pthread_mutex_t mu; /* guards held, pending, written: read/write run on several threads */
    held_item *held;    /* HELD_MAX slots, filled round robin: the oldest is dropped first */
    size_t next_held;
    /* output */
    int have_output;
    char *out_path;
    int out_is_dir;
    int created_dir; /* rank 0 made the output directory: removed again if the run fails and it is empty */
    int per_pixel;   /* hq_out_opts.per_pixel: palette images go out as RGB(A) */
    hq_png_zopts zopts;
    pending_out pending; /* single-file output waiting for close(commit = 1) */
    char **written;      /* directory outputs this rank finished in this run: removed if the run fails */
    size_t nwritten, cap_written;
};

/* paths.c: new strings (NULL when out of memory) or pointers into the path */
char *png_join_path(const char *dir, const char *name);
const char *png_base_name(const char *path);
/* An input PNG opened for reading; anything but a regular file (a FIFO, a device) is refused
 * without blocking on it. NULL with HQ_EINPUT in err naming the path. */
FILE *png_open_file(const char *path, hq_err *err);
char *png_dir_name(const char *path);
int png_has_suffix(const char *name);
int png_same_file(const struct stat *a, const struct stat *b);
/* The temporary name's stem (png_temp_path: `.STEM.part-PID`): NAME itself, or, for a name so
 * long (a legal 240 bytes, say) that the temporary name would pass NAME_MAX (255), its first bytes
 * and a hash of the whole name, so that every output still has a temporary name of its own. */
#define PNG_STEM_MAX (255 - 17) /* 255 - "." - ".part-" - 10 digits of a PID */
void png_temp_stem(const char *name, char stem[PNG_STEM_MAX + 1]);
char *png_temp_path(const char *final);

/* scan.c */
int png_scan(const char *path, const char *dset, unsigned flags, hq_inventory *inv, hq_err *err);

/* read.c */
int png_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err);
int png_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err);
void png_drop_held(hq_io *io);
int png_usable_item(const hq_io *io, uint64_t item, const hq_block *b, const hq_item **out, hq_err *err);
/* The header (and palette indices) write_block needs for item: kept by its read, or decoded again. */
int png_item_for_write(hq_io *io, uint64_t item, const hq_item *it, hq_png_info *info, uint8_t **indices,
                       hq_err *err);

/* create_output.c */
int png_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err);

/* write.c */
int png_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src, hq_err *err);
int png_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err);
int png_flush(hq_io *io, int collective, hq_err *err);
int png_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished, char **run_id);
int png_item_present(const hq_inventory *inv, const char *out, uint64_t item);
const char *png_sync_path(const hq_io *io);

#endif
