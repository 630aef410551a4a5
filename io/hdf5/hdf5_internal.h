/* hdf5_internal.h — what the files of the HDF5 backend (io/hdf5/) share; nothing outside io/hdf5/
 * includes it: io/io.h (hq_hdf5_ops) stays the one interface.
 *
 * One file per job: backend.c (the ops table and the backend's contract), plumbing.c (HDF5 error
 * capture), dataset.c (what a dataset holds), scan_file.c (scan), agree.c (agreement between
 * ranks), open_input.c, handles.c (datasets opened as reached, a bounded number kept open),
 * block_shape.c (where a block lies, chunk walks), blocks.c (read/write of a
 * block), collective_report.c (collective transfers HDF5 made independent), reserve.c (disk space
 * reserved ahead), out_map.c (the output's pixels written through a shared mapping),
 * output_layout.c (an output dataset laid out like its input), create_output.c, links.c (the
 * input's further hard links and its soft links, made again in the output), group_attrs.c (the
 * groups' and the root's attributes), lut_store.c (every image's LUT, written into the output as
 * it is built), szip_masks.c (chunks szip could not shrink, recorded as such), carry.c (the
 * datasets that are not images, and groups of only such, copied as they are), provenance.c (the
 * run recorded in the output), close.c; and the direct path, which moves pixel bytes outside HDF5:
 * direct.c (which datasets, their file offsets), chunk_index.c (every chunk's address, read in one
 * pass over the chunk index), direct_io.c (one block cut into tasks), pool.c (the workers), codec.c
 * (deflate, shuffle, byte swap), in_view.c (blocks read in place from a mapping of the input).
 *
 * struct hq_io is the state of one opened input and its output; every function here takes it from
 * the one thread that calls the backend (HDF5 1.10 is not thread-safe), except the direct path's
 * tasks, which run on pool.c's workers, and hdf5_write_lut, which runs on the caller's thread:
 * neither makes an HDF5 call. */
#ifndef HQ_HDF5_INTERNAL_H
#define HQ_HDF5_INTERNAL_H

#include <pthread.h>
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
#define OWN_RUN_ID_ATTR "histeq_dist_run_id"     /* hq_run_meta.run_id: what --resume compares */
/* On the root of an output that kept the input's own /histeq_dist (hdf5_collides_with_own_group):
 * that group is the user's data, which a run over this output must keep too, not our record. */
#define OWN_FOREIGN_ATTR "histeq_dist_group_foreign"
#define MAX_RANK 4
#define CHANNELS_MAX 4
#define MiB ((hsize_t)1 << 20)

/* Per item flags: whether the output dataset is filtered (then parallel HDF5 1.10 writes it only
 * collectively); whether the item's blocks travel in chunk order (see chunk_order_ok). */
/* FILL_NEVER: the input's fill time is H5D_FILL_TIME_NEVER, so HDF5 leaves the buffer as it was
 * where the dataset was never written; such blocks are read into zeros (what h5py shows). */
/* IN_OPENED: open_input opened and checked the item's input (handles.c may open it again);
 * OUT_MADE: the item has an output dataset; OUT_PINNED: its handle stays open until close. */
enum { OUT_FILTERED = 4, CHUNK_ORDER = 8, FILL_NEVER = 16, IN_OPENED = 32, OUT_MADE = 64, OUT_PINNED = 128 };

typedef struct hdf5_pool hdf5_pool;
typedef struct hdf5_codec hdf5_codec;

/* How the direct path sees one side (input or output dataset) of an item. */
enum { DIRECT_NONE = 0, DIRECT_CONTIG, DIRECT_CHUNKED, DIRECT_FILTERED };
enum { FILT_SHUFFLE = 1, FILT_DEFLATE = 2 };
#define PIPE_MAX 4
typedef struct hdf5_side {
    int kind;               /* DIRECT_NONE: every block of this side goes through HDF5 */
    int swap;               /* 16-bit samples stored big-endian */
    uint64_t addr;          /* DIRECT_CONTIG: where the data starts in the file */
    int nfilt;              /* DIRECT_FILTERED: the pipeline, in HDF5's order (encoding order) */
    unsigned char filt[PIPE_MAX];
    int level;              /* deflate level */
    size_t shuffle_elem;    /* shuffle's element size */
    uint64_t *chunk_addr;   /* unfiltered chunked output: every chunk's address, row-major over the grid */
    uint64_t chunk_end;     /* with chunk_addr: the end of the last chunk in the file */
} hdf5_side;

typedef struct hdf5_chunk_table hdf5_chunk_table;

/* Chunk grids up to this many chunks keep HDF5's per-chunk lookups where the one-pass reader
 * (chunk_index.c) does not apply: 1.10.8 walks the index at every call, n^2/2 steps in all. */
#define PER_CHUNK_MAX 4096

typedef struct hdf5_direct {
    hdf5_side in, out;
    hdf5_chunk_table *in_table; /* the input's chunks (chunk_index.c), read on first use */
    int in_table_tried;
} hdf5_direct;

/* A worker's own buffers and codec, kept from block to block. */
typedef struct hdf5_scratch {
    unsigned char *buf[3];
    size_t len[3];
    hdf5_codec *codec;
} hdf5_scratch;

struct hq_io {
    MPI_Comm comm; /* our own duplicate, so our collectives never mix with the caller's */
    int rank, nranks;
    int verbose;
    int any_order; /* open_input's any_order: the caller never looks at where a pixel lies */
    hq_inventory inv; /* a private copy: the io does not depend on the caller's inventory */
    hid_t in_file;
    /* Per item, its open handle or H5I_INVALID_HID: only through hdf5_in_dset / hdf5_out_dset
     * (handles.c), which open them again as needed and keep a bounded number open. */
    hid_t *in_dset;
    struct hdf5_kept *kept[2]; /* handles.c: [0] input, [1] output */
    /* Per item, the input's chunk cache (open_input.c, hdf5_input_dapl): slots 0 = HDF5's default */
    size_t *in_cache_slots, *in_cache_bytes;
    int *frank;        /* per item, the rank of the dataset in the file */
    hsize_t (*in_chunk)[MAX_RANK]; /* per item, the input's chunk shape; all 0 when not chunked */
    uint64_t in_eoa;   /* the input's end of allocated space (0: unknown); HDF5 reads nothing past it */
    unsigned char *flags;
    hid_t dxpl_coll, dxpl_ind;
    /* Output: present between create_output and close. */
    hid_t out_file;
    hid_t *out_dset;
    uint64_t *out_storage; /* per item: its output's storage size when made (H5Dget_storage_size) */
    char *out_path, *part_path;
    int part_ours; /* OUT.part passed the checks (it is not the input): ours to create and remove */
    int quiet;     /* -q: no notes from create and close */
    int replace;   /* OUT may be replaced at close (--force, or a link to nothing the check let
                      stand): otherwise the rename never goes over a file that appeared at OUT
                      while the run went */
    uint64_t reserved; /* rank 0: bytes of OUT.part reserved with fallocate */
    int no_fallocate;  /* rank 0: the filesystem cannot reserve */
    struct hdf5_bg_reserve *bg; /* the reservation going on in the background (reserve_bg.c) */
    int bg_started;             /* it was started (on every rank alike), stopped or not */
    /* Collective transfers, and those HDF5 made independent: how many, the first (item * 2 + writing),
     * and the union of the causes; reported once, at close, in verbose mode. */
    uint64_t coll_transfers, fell_back, fell_first;
    uint32_t fell_causes;
    unsigned char *stage; /* one chunk, for by_chunk's row-order writes */
    size_t stage_bytes;
    /* The direct path (direct*.c): pixel bytes moved by the backend's workers, HDF5 giving only
     * the addresses. Off with HQ_HDF5_DIRECT=0. */
    int direct;
    hdf5_direct *dir;      /* per item */
    int in_fd, out_fd;     /* the input and OUT.part (read-write: out_map.c maps it), opened again; -1: none */
    const unsigned char *imap; /* in_view.c: the input file mapped read-only, on first use; NULL: none */
    uint64_t imap_len;
    int imap_tried;
    int view_cal;          /* in_view.c, views_pay: 0 not measured yet, 1 views used, -1 reads instead */
    double view_ns[2];     /* what views_pay measured: a page's first touch in the mapping, its pread */
    unsigned char *omap;   /* out_map.c: [0, omap_len) of OUT.part mapped shared; NULL: pwrite */
    uint64_t omap_len;
    /* pwrites of OUT.part, one at a time, and the background reservation's fallocates on this rank
     * (reserve_bg.c): both take the file's lock (tmpfs, ext4, XFS), where a second caller only
     * spins, taking the core from the other workers. */
    pthread_mutex_t put_lock;
    hdf5_pool *pool;       /* set_threads; NULL: the calling thread alone */
    int threads;           /* set_threads: the rank's share of the node's cores; 0: not told */
    hdf5_scratch *scratch; /* per thread of the pool */
    int nscratch;
    uint64_t blocks[2], direct_blocks[2]; /* [writing]: blocks moved, and how many the direct way */
    uint64_t viewed_blocks;               /* of the direct reads, those read in place (in_view.c) */
    uint64_t one_pass[2], one_pass_chunks[2]; /* [writing]: chunk indexes read in one pass, their chunks */
    /* Where the input's and the output's HDF5 addresses start in the file (hdf5_base_addr): chunk
     * addresses are relative to it, the direct path's pread/pwrite need them absolute. */
    uint64_t in_base, out_base;
    /* lut_store.c: per item, where its LUT dataset starts in OUT.part (0: none) and one slice's
     * bytes there; NULL: no LUTs recorded. Small LUTs wait in lut_stage (one run of the file from
     * lut_stage_off) until it fills or the output is flushed; lut_lock guards it. */
    uint64_t *lut_addr, *lut_bytes;
    unsigned char *lut_stage;
    uint64_t lut_stage_off, lut_stage_len;
    pthread_mutex_t lut_lock;
    int lut_lock_ready;
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
void hdf5_small_metadata_cache(hid_t fapl);

/* dataset.c */
void hdf5_item_roles(int frank, const hq_item *it, int *has_n, int *has_c);
int hdf5_describe_dataset(hid_t d, const char *file, const char *name, int planes, hq_item *it, int *frank,
                          hq_err *err);
const char *hdf5_filter_label(H5Z_filter_t f);
/* The next four take the dataset's creation properties (dcpl, from H5Dget_create_plist: a copy
 * costs ~5 us, and a file of 20,000 small datasets paid it four times a dataset). */
int hdf5_check_storage(hid_t d, hid_t dcpl, const char *file, const char *name, hq_err *err);
int hdf5_check_storage_size(hid_t d, hid_t dcpl, const char *file, const char *name, hq_err *err);
int hdf5_input_compressed(hid_t dcpl);
void hdf5_note_chunk_shape(hid_t dcpl, int frank, hq_item *it);
int hdf5_ends_past(uint64_t addr, uint64_t size, uint64_t end);
int hdf5_check_contiguous_extent(hid_t file_id, hid_t d, const char *file, const char *name, hq_err *err);

/* scan_file.c */
int hdf5_under_own_group(const char *name);
/* Name order as a depth-first walk of the groups meets the names: component by component, so
 * "/a/x" (inside group a) comes before "/a-b", as '/' ends a component. Items and links alike. */
int hdf5_path_cmp(const char *a, const char *b);
int hdf5_scan(const char *path, const char *dset, unsigned flags, hq_inventory *inv, hq_err *err);

/* agree.c */
int hdf5_agree(MPI_Comm comm, int rc, hq_err *err);
int hdf5_share_from_root(MPI_Comm comm, int rc, hq_err *err);

/* open_input.c */
void hdf5_free_io(hq_io *io);
/* Item i's dataset access list for reading (its chunk cache), or H5I_INVALID_HID for the default. */
hid_t hdf5_input_dapl(const hq_io *io, uint64_t i);

/* handles.c */
int hdf5_handles_alloc(hq_io *io);
void hdf5_handles_free(hq_io *io);
hid_t hdf5_in_dset(hq_io *io, uint64_t i);
hid_t hdf5_out_dset(hq_io *io, uint64_t i);
void hdf5_keep_in(hq_io *io, uint64_t i, hid_t d);
void hdf5_keep_out(hq_io *io, uint64_t i, hid_t d, int pinned);
/* Closes every open handle of a side (0 input, 1 output; the output's items lose OUT_MADE); -1 if
 * a close failed (*failed: its item's name), else 0. */
int hdf5_close_side(hq_io *io, int side, const char **failed);
int hdf5_open_input(const hq_inventory *inv, MPI_Comm comm, int any_order, hq_io **out, hq_err *err);

/* block_shape.c */
int hdf5_block_fits(const hq_item *it, int frank, const hq_block *b);
const char *hdf5_block_text(const hq_item *it, const hq_block *b, char *buf, size_t len);
int hdf5_block_extent(const hq_item *it, int frank, const hq_block *b, hsize_t *start, hsize_t *count);
int hdf5_walk_begin(chunk_walk *w, const hq_io *io, uint64_t item, const hq_block *b);
int hdf5_walk_next(chunk_walk *w);
int hdf5_item_dims(const hq_io *io, uint64_t item, uint64_t *dims);

/* reserve.c */
int hdf5_reserve_more(hq_io *io, uint64_t more, const char *what, hq_err *err);
int hdf5_reserve_for_write(hq_io *io, uint64_t item, const hq_block *b, hq_err *err);
/* What storage of that many bytes takes in the output at most: H5Pset_alignment (create_output.c)
 * puts each piece of a MiB or more at a MiB boundary. */
uint64_t hdf5_aligned_bytes(uint64_t storage);
uint64_t hdf5_allocated_bytes(hq_io *io);
int hdf5_reserve_space(hq_io *io, uint64_t allocated, hq_err *err);
void hdf5_release_reserve(hq_io *io);
/* reserve_bg.c */
int hdf5_bg_reserve_start(hq_io *io, uint64_t from, uint64_t end, int can);
int hdf5_spare_cores(const hq_io *io, int need); /* the rank's share of the cores is `need` or more */
int hdf5_reserve_wait(hq_io *io, uint64_t lo, uint64_t hi, hq_err *err);
void hdf5_reserve_stop(hq_io *io);
uint64_t hdf5_reserve_target(const hq_io *io);

/* collective_report.c */
void hdf5_note_fallback(hq_io *io, uint64_t item, int writing);
void hdf5_report_fallbacks(hq_io *io);
void hdf5_report_direct(hq_io *io);

/* blocks.c */
int hdf5_needs_collective(const hq_io *io, uint64_t item, int writing);
int hdf5_independent(hq_io *io, uint64_t item);
int hdf5_read_block(hq_io *io, uint64_t item, const hq_block *b, int collective, void *dst, hq_err *err);
int hdf5_write_block(hq_io *io, uint64_t item, const hq_block *b, int collective, const void *src,
                     hq_err *err);

/* output_layout.c */
int hdf5_output_dcpl(hid_t in, int frank, const char *out, const char *name, hid_t *dcpl_out, hq_err *err);
/* Whether type t holds variable-length data anywhere: a vlen sequence, or a variable-length
 * string at the top, in a compound's member or an array's elements (what H5Dvlen_reclaim must
 * give back after a read; H5Tdetect_class does not see a string inside an array). */
int hdf5_holds_vlen(hid_t t);
/* Copies one attribute to data's attr_ctx.dst; with dst = H5I_INVALID_HID only reads it, as the copy
 * would (hdf5_check_metadata). */
herr_t hdf5_attr_cb(hid_t obj, const char *aname, const H5A_info_t *info, void *data);
/* Every attribute of src onto dst through cb (NULL: hdf5_attr_cb; a filter may stand in front of it);
 * 0, or the failure in err under out:name (an attribute that cannot be copied, or the list). */
int hdf5_copy_attrs(hid_t src, hid_t dst, const char *out, const char *name, H5A_operator2_t cb, hq_err *err);
/* How many attributes this process's copies left out: holding references into the input (or of
 * an odd dataspace), and over 32 KiB (the output's object headers hold no more). */
void hdf5_attrs_left_out(uint64_t *refs, uint64_t *big);
/* On: the copies above only count what they would leave out, and write nothing (--resume, whose
 * OUT.part holds the interrupted run's copies, counts them again for the note). */
void hdf5_attrs_count_only(int on);
/* Every attribute of dataset d read, as hdf5_copy_attrs would read it, the outcome dropped (the
 * scan's child: what would crash HDF5 crashes there). */
void hdf5_read_attrs(hid_t d, const char *file, const char *name);
/* io.h's check_metadata: the groups' attributes read, and what carry.c will copy, copied into
 * memory (output_layout.c); the items' own attributes are read by the scan. */
int hdf5_check_metadata(const hq_inventory *inv, hq_err *err);

/* group_attrs.c: collective, whole-file outputs; the same code on every rank. */
int hdf5_copy_group_attrs(hq_io *io, hq_err *err);
/* hdf5_check_metadata's share: every group's attributes of the input file, read. */
void hdf5_check_group_attrs(hid_t file);

/* create_output.c */
void hdf5_empty_output(hq_io *io);
char *hdf5_part_name(const char *out);
int hdf5_create_output(hq_io *io, const hq_out_opts *o, MPI_Comm comm, hq_err *err);

/* links.c */
/* Collective, in create_output after every dataset (not on --resume): where the output mirrors a
 * whole file, the input's other hard links to what the output holds and its soft links, made. */
int hdf5_copy_links(hq_io *io, hq_err *err);

/* lut_store.c */
int hdf5_luts_create(hq_io *io, const hq_run_meta *m, hq_err *err);
int hdf5_luts_reopen(hq_io *io, const hq_run_meta *m, hq_err *err);
void hdf5_luts_note_size(const hq_io *io, const hq_run_meta *m);
/* What the LUT datasets hdf5_luts_create makes will take (0: none recorded). */
uint64_t hdf5_luts_bytes(const hq_io *io, const hq_run_meta *m);
int hdf5_write_lut(hq_io *io, uint64_t item, uint64_t slice, const uint16_t *lut, hq_err *err);
int hdf5_luts_drain(hq_io *io, hq_err *err);
void hdf5_luts_forget(hq_io *io);

/* provenance.c */
/* An attribute of n values (n == 1: a scalar), replaced if it exists: stored as ftype, given as mtype. */
int hdf5_num_attr(hid_t obj, const char *aname, hid_t ftype, hid_t mtype, hsize_t n, const void *v);
int hdf5_u64_pair_attr(hid_t obj, const char *aname, uint64_t a0, uint64_t a1);
/* An input dataset lies under /histeq_dist, or someone else's file links that name: the output
 * records no datasets of its own there. */
int hdf5_collides_with_own_group(const hq_io *io);
int hdf5_inv_collides_with_own_group(const hq_inventory *inv);
/* The root attributes the run records (NULL-terminated; histeq_dist_* besides). */
extern const char *const hdf5_own_root_attrs[];
int hdf5_record_meta(hq_io *io, const hq_run_meta *m, hq_err *err);
int hdf5_mark_complete(hq_io *io, hq_err *err);

/* close.c */
int hdf5_close(hq_io *io, int commit, const hq_run_meta *meta, hq_err *err);
int hdf5_flush(hq_io *io, int collective, hq_err *err);
int hdf5_output_state(const hq_inventory *inv, const char *out, int *partial, int *finished, char **run_id);
const char *hdf5_sync_path(const hq_io *io);

/* pool.c */
hdf5_pool *hdf5_pool_new(int threads);
int hdf5_pool_threads(const hdf5_pool *p);
void hdf5_pool_free(hdf5_pool *p);
int hdf5_pool_run(hdf5_pool *p, uint64_t n, int (*fn)(void *, uint64_t, int), int (*consume)(void *, uint64_t),
                  void *ctx, uint64_t window);

/* codec.c */
hdf5_codec *hdf5_codec_new(void);
void hdf5_codec_free(hdf5_codec *c);
int hdf5_inflate(hdf5_codec *c, const void *in, size_t n, void *out, size_t want);
size_t hdf5_deflate_bound(hdf5_codec *c, int level, size_t n);
size_t hdf5_deflate(hdf5_codec *c, int level, const void *in, size_t n, void *out, size_t cap);
void hdf5_shuffle(unsigned char *dst, const unsigned char *src, size_t n, size_t elem);
void hdf5_unshuffle(unsigned char *dst, const unsigned char *src, size_t n, size_t elem);

/* direct.c */
void hdf5_direct_init(hq_io *io);
int hdf5_direct_alloc(hq_io *io);
void hdf5_direct_note_input(hq_io *io, uint64_t i, hid_t d);
/* One output dataset just made (o: its handle), described for the direct path; the same calls on
 * every rank. hdf5_direct_note_output then does what needs them all (chunk tables). */
void hdf5_direct_note_out_item(hq_io *io, uint64_t i, hid_t o);
void hdf5_direct_note_output(hq_io *io);
void hdf5_direct_close_output(hq_io *io);
void hdf5_direct_free(hq_io *io);
void hdf5_set_threads(hq_io *io, int threads);
int hdf5_scratch_ready(hq_io *io);
unsigned char *hdf5_scratch_buf(hq_io *io, int worker, int which, size_t bytes);
int hdf5_direct_wanted(const hq_io *io, uint64_t item, int writing, int coll_io);

/* out_map.c */
void hdf5_out_map(hq_io *io);
/* The end of the storage of every output dataset the direct path writes unfiltered (0: none),
 * from hdf5_direct_note_output's tables: the same on every rank. */
uint64_t hdf5_direct_data_end(hq_io *io);
int hdf5_out_put(hq_io *io, const void *p, uint64_t n, uint64_t off);
void hdf5_out_unmap(hq_io *io);

/* szip_masks.c: rank 0, on OUT.part once every rank has closed it. */
int hdf5_fix_szip_masks(hq_io *io, hq_err *err);

/* carry.c: what could be an image (the scan's rule); the rest of a whole-file input copied into
 * OUT.part by rank 0 once every rank has closed it, and tried beforehand in the scan's child. */
int hdf5_image_kind(hid_t d);
typedef struct hdf5_carry_counts {
    uint64_t copied;     /* datasets copied */
    uint64_t refs;       /* left out: they hold references into the input */
    uint64_t unfiltered; /* left out: variable-length data behind a filter this HDF5 lacks */
    uint64_t unreadable; /* left out: values in external raw files that cannot be read */
} hdf5_carry_counts;
int hdf5_carry(hq_io *io, hdf5_carry_counts *n, hq_err *err);
int hdf5_carry_check(hid_t in, const hq_inventory *inv, hq_err *err);
uint64_t hdf5_carry_bytes(hq_io *io);
/* Rank 0: whether file is one the values of a carried dataset lie in (an external raw file, a
 * virtual dataset's source), which an output put there would destroy before the copy reads it. */
int hdf5_carry_reads_file(const hq_inventory *inv, const char *file);
/* reserve.c: whether the free space where path lies, as statvfs sees it, holds need more bytes
 * (HQ_TEST_RESERVE_LIE=1, in tests: yes, so that the disk fills under the reservation instead). */
int hdf5_free_space_holds(const char *path, uint64_t need);

/* chunk_index.c */
hdf5_chunk_table *hdf5_chunk_table_read(hid_t d, int fd);
void hdf5_chunk_table_free(hdf5_chunk_table *t);
uint64_t hdf5_chunk_table_chunks(const hdf5_chunk_table *t);
/* The offset (in elements) of chunk c of a chunk grid, counted in row-major order. */
void hdf5_chunk_offset(uint64_t c, int rank, const uint64_t *grid, const hsize_t *cd, hsize_t *off);
int hdf5_chunk_table_get(const hdf5_chunk_table *t, const hsize_t *coord, unsigned *mask, haddr_t *addr,
                         hsize_t *size);
uint64_t hdf5_base_addr(hid_t obj);
herr_t hdf5_chunk_lookup(hq_io *io, uint64_t item, const hsize_t *coord, unsigned *mask, haddr_t *addr,
                         hsize_t *size);
int hdf5_chunk_lookup_slow(hq_io *io, uint64_t item);

/* direct_io.c */
int hdf5_direct_transfer(hq_io *io, uint64_t item, const hq_block *b, void *buf, int writing);
/* 0 when the block's bytes, as a read lays them out, are one run of the input file (unfiltered,
 * native byte order): *len bytes from *off; else 1. Makes no transfer. */
int hdf5_direct_span(hq_io *io, uint64_t item, const hq_block *b, uint64_t *off, uint64_t *len);

/* in_view.c */
const void *hdf5_view_block(hq_io *io, uint64_t item, const hq_block *b);
void hdf5_view_release(hq_io *io, const void *p, uint64_t bytes);
void hdf5_view_unmap(hq_io *io);

#endif
