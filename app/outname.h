/* outname.h — where the output goes when --output is not given: beside the input, with a suffix
 * that names the method before the extension.
 *
 *   dataset.h5 (or dataset.h5:/ct/volume) -> dataset_eq.h5     a.png -> a_eq.png
 *   photos/ -> photos_eq                                      list.txt -> list_eq (a directory)
 *
 * The suffix is keyed on the method's NAME (core/mode.h's hq_method_name), so a new method only
 * needs a line in hq_output_suffix. Pure string functions, except hq_default_output's stat. */
#ifndef HQ_OUTNAME_H
#define HQ_OUTNAME_H

#include "../core/error.h"
#include "../io/inventory.h"

/* "_eq" for equalize and stretch (and anything unknown), "_clahe", "_match". */
const char *hq_output_suffix(const char *method_name);

typedef enum {
    HQ_OUTNAME_FILE, /* suffix before the last extension of the base name: a.png -> a_eq.png */
    HQ_OUTNAME_DIR,  /* suffix after the name, trailing slashes dropped: photos/ -> photos_eq */
    HQ_OUTNAME_LIST  /* a list file becomes a directory: extension dropped, suffix added */
} hq_outname_kind;

/* The name for `path` (no dataset part) of the given kind; malloc'ed into *out. Fails (HQ_EUSAGE)
 * when no name can be made: an empty path, or a directory named "/", "." or "..". */
int hq_output_name(const char *path, hq_outname_kind kind, const char *suffix, char **out, hq_err *err);

/* From a scanned inventory (rank 0): the HDF5 file or the single PNG as FILE, a PNG directory as
 * DIR (through realpath when it is "." or ".."), a list file as LIST. */
int hq_default_output(const hq_inventory *inv, const char *suffix, char **out, hq_err *err);

/* An output file named for the other format (HDF5 input to "x.png", one PNG to "x.h5"): each
 * format writes its own bytes whatever the name says, and such a file would mislead every reader
 * after it. HQ_EUSAGE naming it; 0 otherwise (directories and other names). Same on every rank. */
int hq_outname_check_kind(const hq_inventory *inv, const char *out, hq_err *err);

/* An output whose name leaves no room for the names made after it (OUT.journal beside it, and for
 * HDF5 MPI-IO's file after OUT.part in its session directory): a legal name of 250 bytes failed the
 * run at its first journal write. HQ_EUSAGE naming it, with the longest name that works; 0
 * otherwise. Same on every rank. */
int hq_outname_check_length(const hq_inventory *inv, const char *out, hq_err *err);

/* Whether path lies directly in directory dir (the same directory, however spelled). */
int hq_in_dir(const char *path, const char *dir);
/* Whether path is NAME directly in directory dir for the name of one of the items: a file that a
 * PNG collection's output (or mask) directory dir holds or will hold. */
int hq_item_file_in(const char *path, const char *dir, const hq_inventory *inv);
/* Whether path is a file PNG output directory dir holds or will hold: an item's image, or the
 * completion mark (io.h's HQ_PNG_DIR_MARK). */
int hq_output_file_in(const char *path, const char *dir, const hq_inventory *inv);

#endif
