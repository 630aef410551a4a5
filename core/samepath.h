/* samepath.h — whether two paths name the same file, for the guards that keep a run from writing
 * a side file (--summary, --report) over its own input or output. Where both exist: the same
 * device and inode (links and other spellings alike). Where either does not exist yet: the same
 * directory (by device and inode) and the same last component; a path whose directory cannot be
 * looked up is compared as text, trailing slashes aside. */
#ifndef HQ_SAMEPATH_H
#define HQ_SAMEPATH_H

int hq_same_path(const char *a, const char *b);

/* The directory part of path ("." for a bare name, "/" for one at the root) into buf; 0, or -1
 * when it does not fit. */
int hq_dir_of(const char *path, char *buf, unsigned long len);

/* The last component of path, trailing slashes aside (a pointer into path; its length in *n). */
const char *hq_base_of(const char *path, unsigned long *n);

/* 0 when a file may be made in directory dir (write and search permission), else why not as an
 * errno: ENOTDIR where dir is a file (access() says EACCES to root there, as if permissions were
 * the reason). */
int hq_dir_writable(const char *dir);

/* path's final symbolic links followed as text (a relative target against the link's directory),
 * whether or not what they name exists yet: malloc'd, or NULL when path is no link. *loop (may be
 * NULL) is set when the links go round (or past 40 of them): the result is NULL then. */
char *hq_follow_links(const char *path, int *loop);

/* Why an output may not be put at path, which it would replace by renaming its temporary over it
 * (--force or not): a device, FIFO or socket there, links followed (-o /dev/null --force replaced
 * the system's with a regular file). Words for the caller's message, or NULL where nothing, a file
 * or a directory is there. */
const char *hq_unreplaceable(const char *path);

#endif
