/* hdf5_internal.h — what the files of the HDF5 backend (io/hdf5/) share; nothing outside io/hdf5/
 * includes it: io/io.h (hq_hdf5_ops) stays the one interface.
 *
 * One file per job: backend.c (the ops table and the backend's contract), plumbing.c (HDF5 error
 * capture), dataset.c (what a dataset holds), scan_file.c (scan), agree.c (agreement between
 * ranks), open_input.c, block_shape.c (where a block lies, chunk walks), blocks.c (read/write of a
 * block), collective_report.c (collective transfers HDF5 made independent), reserve.c (disk space
 * reserved ahead), output_layout.c (an output dataset laid out like its input), create_output.c,
 * provenance.c (the run recorded in the output), close.c.
 *
 * struct hq_io is the state of one opened input and its output; every function here takes it from
 * the one thread that calls the backend (HDF5 1.10 is not thread-safe). */
#ifndef HQ_HDF5_INTERNAL_H
#define HQ_HDF5_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "../io.h"

#define OWN_GROUP "/histeq_dist"
#define OWN_HIST OWN_GROUP "/global_histogram"
#define OWN_GLOBAL_LUT OWN_GROUP "/global_lut"
#define OWN_LUTS OWN_GROUP "/lut" /* + each dataset's path: that dataset's per-image LUTs */
#define OWN_RANGES OWN_GROUP "/range" /* + each float dataset's path: each slice's binning [min, max] */
#define OWN_VERSION_ATTR "histeq_dist_version"
#define OWN_COMPLETE_ATTR "histeq_dist_complete" /* written last: a file without it is unfinished */
#define MAX_RANK 4
#define CHANNELS_MAX 4
#define MiB ((hsize_t)1 << 20)

/* Per item flags: whether the output dataset is filtered (then parallel HDF5 1.10 writes it only
 * collectively); whether the item's blocks travel in chunk order (see chunk_order_ok). */
enum { OUT_FILTERED = 4, CHUNK_ORDER = 8 };

struct hq_io {
    MPI_Comm comm; /* our own duplicate, so our collectives never mix with the caller's */
    int rank, nranks;
    int verbose;
    int any_order; /* open_input's any_order: the caller never looks at where a pixel lies */
    hq_inventory inv; /* a private copy: the io does not depend on the caller's inventory */
    hid_t in_file;
    hid_t *in_dset;    /* per item; H5I_INVALID_HID for bad items */
    int *frank;        /* per item, the rank of the dataset in the file */
    hsize_t (*in_chunk)[MAX_RANK]; /* per item, the input's chunk shape; all 0 when not chunked */
    uint64_t in_eoa;   /* the input's end of allocated space (0: unknown); HDF5 reads nothing past it */
    unsigned char *flags;
    hid_t dxpl_coll, dxpl_ind;
    /* Output: present between create_output and close. */
    hid_t out_file;
    hid_t *out_dset;
    char *out_path, *part_path;
    int part_ours; /* OUT.part passed the checks (it is not the input): ours to create and remove */
    uint64_t reserved; /* rank 0: bytes of OUT.part reserved with fallocate */
    int no_fallocate;  /* rank 0: the filesystem cannot reserve */
    /* Collective transfers, and those HDF5 made independent: how many, the first (item * 2 + writing),
     * and the union of the causes; reported once, at close, in verbose mode. */
    uint64_t coll_transfers, fell_back, fell_first;
    uint32_t fell_causes;
    unsigned char *stage; /* one chunk, for by_chunk's row-order writes */
    size_t stage_bytes;
};

/* The chunks a block touches, walked in odometer order: each step gives the box where the block
 * and the chunk meet, in dataset coordinates. */
typedef struct chunk_walk {
    int k;
    uint64_t cd[MAX_RANK], start[MAX_RANK], count[MAX_RANK], first[MAX_RANK], last[MAX_RANK], idx[MAX_RANK];
    uint64_t s[MAX_RANK], n[MAX_RANK]; /* this step's meeting box */
    uint64_t in_block[MAX_RANK];        /* the box's offset in the block */
    uint64_t chunks, chunk_bytes;
} chunk_walk;

typedef struct attr_ctx {
    hid_t dst;
    const char *out, *name;
    hq_err *err;
    int rc;
} attr_ctx;


/* plumbing.c */
void hdf5_quiet(void);
void hdf5_close_id(hid_t *id, herr_t (*closer)(hid_t));
void hdf5_detail(char *buf, size_t len);
int hdf5_verbose_from_env(void);
int hdf5_filter_failed(void);

/* dataset.c */
void hdf5_item_roles(int frank, const hq_item *it, int *has_n, int *has_c);
int hdf5_describe_dataset(hid_t d, const char *file, const char *name, hq_item *it, int *frank, hq_err *err);
const char *hdf5_filter_label(H5Z_filter_t f);
int hdf5_check_storage(hid_t d, const char *file, const char *name, hq_err *err);
int hdf5_input_compressed(hid_t in);
void hdf5_note_chunk_shape(hid_t d, int frank, hq_item *it);
int hdf5_ends_past(uint64_t addr, uint64_t size, uint64_t end);
int hdf5_check_contiguous_extent(hid_t file_id, hid_t d, const char *file, const char *name, hq_err *err);

/* scan_file.c */
int hdf5_under_own_group(const char *name);
int hdf5_scan(const char *path, const char *dset, int skip_bad, hq_inventory *inv, hq_err *err);

/* agree.c */
int hdf5_agree(MPI_Comm comm, int rc, hq_err *err);
int hdf5_share_from_root(MPI_Comm comm, int rc, hq_err *err);

/* open_input.c */
void hdf5_free_io(hq_io *io);
int hdf5_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err);

/* block_shape.c */
int hdf5_block_fits(const hq_item *it, int frank, const hq_block *b);
const char *hdf5_block_text(const hq_item *it, const hq_block *b, char *buf, size_t len);
int hdf5_block_extent(const hq_item *it, int frank, const hq_block *b, hsize_t *start, hsize_t *count);
int hdf5_walk_begin(chunk_walk *w, const hq_io *io, uint64_t item, const hq_block *b);
int hdf5_walk_next(chunk_walk *w);

/* reserve.c */
int hdf5_reserve_more(hq_io *io, uint64_t more, const char *what, hq_err *err);
int hdf5_reserve_for_write(hq_io *io, uint64_t item, const hq_block *b, hq_err *err);
uint64_t hdf5_allocated_bytes(hq_io *io);
int hdf5_reserve_space(hq_io *io, uint64_t allocated, hq_err *err);
void hdf5_release_reserve(hq_io *io);

/* collective_report.c */
void hdf5_note_fallback(hq_io *io, uint64_t item, int writing);
void hdf5_report_fallbacks(hq_io *io);

/* blocks.c */
int hdf5_needs_collective(const hq_io *io, uint64_t item, int writing);
int hdf5_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err);
int hdf5_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src,
                     hq_err *err);

/* output_layout.c */
int hdf5_output_dcpl(hid_t in, int frank, const char *out, const char *name, hid_t *dcpl_out, hq_err *err);
/* Copies one attribute to data's attr_ctx.dst; with dst = H5I_INVALID_HID only reads it, as the copy
 * would (hdf5_check_metadata). */
herr_t hdf5_attr_cb(hid_t obj, const char *aname, const H5A_info_t *info, void *data);
/* io.h's check_metadata: every attribute create_output copies, read once (output_layout.c). */
int hdf5_check_metadata(const hq_inventory *inv);

/* create_output.c */
void hdf5_empty_output(hq_io *io);
char *hdf5_part_name(const char *out);
int hdf5_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err);

/* provenance.c */
int hdf5_record_meta(hq_io *io, const hq_run_meta *m, hq_err *err);
int hdf5_mark_complete(hq_io *io, hq_err *err);

/* close.c */
int hdf5_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err);
int hdf5_flush(hq_io *io, int collective, hq_err *err);
int hdf5_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished);
const char *hdf5_sync_path(const hq_io *io);

#endif
