/* in_view.c — a block read without a copy: where the block's bytes lie in the input file exactly as
 * read_block would lay them out, the caller works on them in a read-only mapping of the file.
 *
 * Why: a pread copies every byte from the page cache into the block, and the CPU engine then reads
 * the block twice more (histogram, remap); with a view the copy is gone and the remap writes into
 * the block that is then written out (engine.h, hq_block_data.out). On a 2-core VM, 1 GiB raw, the
 * read copy was 8% of a run's CPU samples (perf).
 *
 * Contract:
 *  - hdf5_view_block (from the thread that calls read_block, as it may ask HDF5 for the chunk
 *    index): a pointer to the block's first byte in the mapping, its pages populated (the reading
 *    happens here, as in a pread, not in the engine's loops), or NULL where the block is not one run
 *    of unfiltered native-order bytes (hdf5_direct_span), its first byte is not aligned for its
 *    samples, the direct path is off for the item, the file cannot be mapped or the pages cannot be
 *    populated (the read then reports why). The input is mapped whole on the first call; a file
 *    is never opened for writing, and PROT_READ makes a stray store fault rather than change it.
 *  - hdf5_view_release (any thread): the view's whole pages leave this process's page tables
 *    (MADV_DONTNEED; the page cache keeps them), so a run's resident memory stays its buffers.
 *  - hdf5_view_unmap (close): the mapping removed. HQ_INPUT_VIEW=0 turns views off. */
#define _GNU_SOURCE /* MADV_POPULATE_READ */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hdf5_internal.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels answer EINVAL */
#endif

static int map_input(hq_io *io)
{
    if (io->imap_tried)
        return io->imap != NULL;
    io->imap_tried = 1;
    const char *s = getenv("HQ_INPUT_VIEW");
    struct stat st;
    if ((s && strcmp(s, "0") == 0) || io->in_fd < 0 || fstat(io->in_fd, &st) != 0 || st.st_size <= 0)
        return 0;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, io->in_fd, 0);
    if (m == MAP_FAILED)
        return 0;
    io->imap = m;
    io->imap_len = (uint64_t)st.st_size;
    return 1;
}

static uint64_t page_size(void)
{
    return (uint64_t)sysconf(_SC_PAGESIZE);
}

const void *hdf5_view_block(hq_io *io, uint64_t item, const hq_block *b)
{
    uint64_t off = 0, bytes = 0;
    if (!b || !io->dir || !hdf5_direct_wanted(io, item, 0, 0) || hdf5_direct_span(io, item, b, &off, &bytes) ||
        !map_input(io))
        return NULL;
    if (off > io->imap_len || bytes > io->imap_len - off)
        return NULL; /* the file is shorter than HDF5 says: the library path reports it */
    /* HDF5 places raw data at any byte: a 16-bit or float image at an odd address would be read
     * through misaligned pointers by the engines (undefined behaviour in C, caught by UBSan). The
     * mapping starts on a page, so the offset decides. */
    if (off % io->inv.items[item].sample_bytes)
        return NULL;
    /* Populated here, or not used: a page that cannot be read (a disk error, a file cut short under
     * us) then fails this call, and the read path reports it, rather than faulting in the engine.
     * A kernel without MADV_POPULATE_READ (before 5.14) keeps the read path too. */
    const uint64_t page = page_size(), a = off / page * page;
    if (madvise((void *)(io->imap + a), off + bytes - a, MADV_POPULATE_READ) != 0)
        return NULL;
    io->blocks[0]++;
    io->direct_blocks[0]++;
    io->viewed_blocks++;
    return io->imap + off;
}

void hdf5_view_release(hq_io *io, const void *p, uint64_t bytes)
{
    const uint64_t page = page_size(), off = (uint64_t)((const unsigned char *)p - io->imap);
    const uint64_t a = (off + page - 1) / page * page, e = (off + bytes) / page * page;
    if (e > a) /* only pages wholly the view's: a neighbour block may be using the edges */
        madvise((void *)(io->imap + a), e - a, MADV_DONTNEED);
}

void hdf5_view_unmap(hq_io *io)
{
    if (io->imap)
        munmap((void *)io->imap, io->imap_len);
    io->imap = NULL;
    io->imap_len = 0;
}
