/* mapped_write.h — store bytes into a file through a shared memory mapping instead of write(2).
 *
 * Why: tmpfs, ext4, XFS and btrfs take a file's inode lock for every buffered write, so the ranks
 * of one host that write one shared output queue behind each other, and queue worse the more of
 * them there are. Stores into a MAP_SHARED mapping take page locks only. Measured on the lent H200
 * host, /dev/shm, 4 processes writing 4 GiB each into one file (bench/results/write_paths.txt):
 * pwrite 4.6 GB/s together, mappings 10.6 GB/s; one process alone: pwrite 4.2, mapping 2.4. So
 * the mapping pays only when several writers share a file on a local file system.
 *
 * Only for space already reserved (fallocate): a store into a hole that the disk cannot fill
 * raises SIGBUS instead of returning an error. Not for network or parallel file systems, where
 * page-cache coherence between hosts is not what a mapping assumes (hq_mw_local_fs).
 *
 * One window is mapped at a time; the file's size is raised to cover it (never lowered), as a
 * store past the end of the file faults. Dirty pages reach the disk with the file's next fsync
 * or fdatasync, from any descriptor. Nothing here prints. */
#ifndef HQ_MAPPED_WRITE_H
#define HQ_MAPPED_WRITE_H

#include <stdint.h>

typedef struct hq_mw hq_mw;

/* 1 when path lies on a local, page-cache file system (tmpfs, ext2/3/4, XFS, btrfs, overlayfs,
 * ZFS, F2FS), 0 otherwise or when it cannot be told. */
int hq_mw_local_fs(const char *path);

/* Opens path for mapped writes; NULL with errno set on failure. */
hq_mw *hq_mw_open(const char *path);

/* Maps bytes [off, off + len) of the file, writable, raising the file's size to off + len if it
 * is smaller, and returns the address of byte off; the previous window is unmapped first. NULL
 * with errno set on failure (then nothing is mapped). */
unsigned char *hq_mw_map(hq_mw *w, uint64_t off, uint64_t len);

/* Unmaps the current window, if any. */
void hq_mw_unmap(hq_mw *w);

void hq_mw_close(hq_mw *w);

#endif
