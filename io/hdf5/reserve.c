/* reserve.c — the output's disk space reserved ahead of every write (fallocate on rank 0), so that
 * a full disk is found before a write rather than in the middle of one: a write failing on some
 * ranks only leaves parallel HDF5 1.10 waiting in different collectives.
 *
 * Contract:
 *  - hdf5_reserve_space (collective, at create): uncompressed datasets whole, compressed ones at
 *    least their input's size, plus room for metadata; hdf5_reserve_for_write (collective, before a
 *    compressed collective write): what this round can add; hdf5_reserve_more: rank 0 only, the
 *    caller agrees on the result; hdf5_release_reserve (rank 0, at the end) gives back the rest.
 *  - Filesystems without fallocate are left alone: nothing reserved, nothing refused.
 *  - In the background (reserve_bg.c): on tmpfs fallocate zeroes every page under the file's lock,
 *    which the create phase used to wait for. Create checks the free space on rank 0 (statvfs: a
 *    disk already too small is refused there, as before), then every rank reserves a slice of the
 *    same extent on a thread while pass 1 reads and computes. Nothing is written where the
 *    reservation has not reached: every write of pixels first waits for its bytes
 *    (hdf5_reserve_wait: the direct path's pwrites with their exact extent, anything else, stores
 *    through the mapping, compressed writes and the metadata written at close, for all of it). If
 *    the disk fills meanwhile, the waiting write fails before writing a byte, with the same error
 *    as a reservation failing at create, and the ranks agree on it as on any failed write. Off
 *    where a rank's share of the cores is one (the thread would only take it from the workers) or
 *    the ranks span nodes;
 *    HQ_RESERVE=background|sync overrides the core count. */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hdf5_internal.h"
#define RESERVE_MARGIN_MAX (4 * MiB)

/* Room for metadata: allocated in the file before it is written (at close, mostly), so the end
 * of allocated space runs ahead of the file's size by up to this much. */
static uint64_t metadata_margin(uint64_t file_bytes)
{
    const uint64_t m = 64 * 1024 + file_bytes / 64;
    return m > RESERVE_MARGIN_MAX ? RESERVE_MARGIN_MAX : m;
}

/* Rank 0: makes sure OUT.part has disk blocks up to `end`. 0, or the errno of a full disk. */
static int reserve_to(hq_io *io, uint64_t end)
{
    if (io->bg) { /* the background reservation first: io->reserved is its result */
        if (hdf5_reserve_wait(io, 0, UINT64_MAX, NULL))
            return ENOSPC;
        hdf5_reserve_stop(io);
    }
    if (io->no_fallocate || end <= io->reserved)
        return 0;
    int fd = open(io->part_path, O_WRONLY);
    if (fd < 0)
        return 0;
    /* [0, reserved) is reserved already: only the rest costs anything. */
    int e = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)io->reserved, (off_t)(end - io->reserved)) == 0 ? 0 : errno;
    close(fd);
    if (e == 0)
        io->reserved = end;
    else if (e != ENOSPC && e != EDQUOT && e != EFBIG)
        io->no_fallocate = 1; /* not supported here: nothing is reserved, nothing is refused */
    return e == ENOSPC || e == EDQUOT || e == EFBIG ? e : 0;
}

/* The raw bytes of the chunks a block touches: the most a collective write of it can add to a
 * compressed dataset (a chunk partly written is rewritten whole; deflate barely grows data). */
static uint64_t touched_chunk_bytes(hq_io *io, uint64_t item, const hq_block *b)
{
    const hsize_t *cd = io->in_chunk[item];
    const hq_item *it = &io->inv.items[item];
    if (!b || cd[0] == 0)
        return 0;
    hsize_t start[MAX_RANK], count[MAX_RANK];
    const int k = hdf5_block_extent(it, io->frank[item], b, start, count);
    uint64_t chunks = 1, chunk_bytes = it->sample_bytes;
    for (int d = 0; d < k; d++) {
        chunks *= (start[d] + count[d] - 1) / cd[d] - start[d] / cd[d] + 1;
        chunk_bytes *= cd[d];
    }
    return chunks * (chunk_bytes + chunk_bytes / 512 + 64);
}

/* Rank 0 extends the reservation past the file's current end by `more` bytes, the most the
 * next step can add. Every rank passes the same `more`; the ranks must then agree on the result. */
int hdf5_reserve_more(hq_io *io, uint64_t more, const char *what, hq_err *err)
{
    struct stat st;
    if (io->rank != 0 || io->no_fallocate || stat(io->part_path, &st) != 0)
        return 0;
    const int e = reserve_to(io, (uint64_t)st.st_size + metadata_margin((uint64_t)st.st_size) + more);
    return e ? hq_fail(err, HQ_EIO, "%s:%s: write failed: not enough disk space (%s)", io->out_path, what,
                       strerror(e))
             : 0;
}

/* Before a collective write of a compressed dataset: room for what this round can add, all
 * ranks' blocks together. Collective. */
int hdf5_reserve_for_write(hq_io *io, uint64_t item, const hq_block *b, hq_err *err)
{
    uint64_t mine = touched_chunk_bytes(io, item, b), round = 0;
    MPI_Allreduce(&mine, &round, 1, MPI_UINT64_T, MPI_SUM, io->comm);
    return hdf5_reserve_more(io, round, io->inv.items[item].name, err);
}

/* The end of the space allocated in the output so far. H5Fget_eoa needs a SWMR driver and
 * H5Fget_filesize fails under MPI-IO once the EOF is unknown; then the datasets' sizes make an
 * estimate. Only storage of 1 MiB or more is aligned to 1 MiB (H5Pset_alignment's threshold,
 * create_output.c): a MiB for each small dataset too reserved 2.6 GB for 2,500 datasets of
 * 64 bytes, and failed the run on a disk that held its 3 MB. Each dataset's object header and
 * chunk index count DSET_METADATA (1.3 KB a dataset in that output). */
#define DSET_METADATA (8 * 1024)

uint64_t hdf5_aligned_bytes(uint64_t storage)
{
    return storage + (storage >= MiB ? MiB : 0);
}

uint64_t hdf5_allocated_bytes(hq_io *io)
{
    hsize_t size = 0;
    if (H5Fget_filesize(io->out_file, &size) >= 0)
        return size;
    H5Eclear2(H5E_DEFAULT);
    uint64_t sum = MiB;
    for (size_t i = 0; i < io->inv.n; i++)
        if (io->flags[i] & OUT_MADE) {
            sum += hdf5_aligned_bytes(io->out_storage[i]) + DSET_METADATA;
        }
    return sum;
}

/* What the compressed datasets take at least: as much as the input's compressed chunks. */
static uint64_t compressed_lower_bound(hq_io *io)
{
    uint64_t lo = 0;
    for (size_t i = 0; i < io->inv.n; i++)
        if (io->flags[i] & OUT_FILTERED)
            lo += H5Dget_storage_size(hdf5_in_dset(io, i));
    H5Eclear2(H5E_DEFAULT);
    return lo;
}

/* Whether the free space, as statvfs sees it, holds `need` more bytes. HQ_TEST_RESERVE_LIE=1 (tests)
 * says yes, so that the disk fills under the background reservation instead. */
int hdf5_free_space_holds(const char *path, uint64_t need)
{
    const char *lie = getenv("HQ_TEST_RESERVE_LIE");
    if (lie && strcmp(lie, "1") == 0)
        return 1;
    struct statvfs v;
    return statvfs(path, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize >= need;
}

/* Disk blocks are reserved ahead of every write, so that a full disk is found before a write
 * rather than in the middle of one: a write failing on some ranks only leaves parallel HDF5 1.10
 * (compressed collective writes above all) waiting in different collectives. Uncompressed
 * datasets are allocated at creation (up to `allocated`, placed first in the file) and reserved
 * here whole (in the background where the ranks can, see the contract above), with room for the
 * metadata written at close; compressed ones grow as written and are reserved round by round
 * (hdf5_reserve_for_write), after a first check that at least their input's size fits.
 * Filesystems without fallocate are left alone. Collective. */
int hdf5_reserve_space(hq_io *io, uint64_t allocated, hq_err *err)
{
    uint64_t end = 0, lo = 0, carry = 0;
    int can = 0;
    if (io->rank == 0) {
        lo = compressed_lower_bound(io);
        carry = hdf5_carry_bytes(io); /* the input's other datasets, copied at close (carry.c) */
        end = allocated + metadata_margin(allocated + lo + carry) + lo + carry;
        struct stat st;
        const uint64_t held = stat(io->part_path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : UINT64_MAX;
        can = !io->no_fallocate && end > io->reserved && held != UINT64_MAX &&
              hdf5_free_space_holds(io->part_path, end > held ? end - held : 0);
    }
    if (hdf5_bg_reserve_start(io, io->reserved, end, can) == 0)
        return 0;
    int rc = 0;
    if (io->rank == 0) {
        const int e = reserve_to(io, end);
        if (e)
            rc = hq_fail(err, HQ_EIO, "%s: not enough disk space for the output (%llu bytes%s: %s)", io->out_path,
                         (unsigned long long)(allocated + lo + carry), lo ? " or more, as compressed" : "", strerror(e));
    }
    return hdf5_share_from_root(io->comm, rc, err);
}

/* Rank 0, once the output is complete: gives back the blocks reserved past its end, this run's or
 * an interrupted one's (a resumed run reserves nothing, yet the file holds the first run's). The
 * hole is punched (tmpfs) and the file truncated to its own size: ext4 ignores a hole punched
 * past the end of a file (2.6 GB stayed held under a 3 MB output), a truncate gives them back. */
void hdf5_release_reserve(hq_io *io)
{
    struct stat st;
    if (stat(io->part_path, &st) != 0 || (uint64_t)st.st_blocks * 512 <= (uint64_t)st.st_size)
        return;
    int fd = open(io->part_path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    uint64_t held = (uint64_t)st.st_blocks * 512;
    held = held > io->reserved ? held : io->reserved;
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size, (off_t)(held - (uint64_t)st.st_size)) !=
            0 ||
        ftruncate(fd, st.st_size) != 0) {
        /* what stays allocated past the end is harmless but for the space */
    }
    close(fd);
}
