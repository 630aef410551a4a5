/* options.c — getopt_long over the documented options; usage goes to stdout on --help only. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HQ_VERSION
#define HQ_VERSION "dev"
#endif

static const char USAGE[] =
    "Usage: histeq_dist --input IN [--output OUT] [options]\n"
    "       mpirun -np N histeq_dist --input IN [--output OUT] [options]\n"
    "\n"
    "Histogram equalization of image collections and huge images, spread over MPI ranks and GPUs.\n"
    "Ranks histogram their share, reduce the histograms, build the LUT and remap their share.\n"
    "\n"
    "Input and output:\n"
    "  -i, --input IN        HDF5 file (every dataset), FILE.h5:/path/to/dataset (one dataset),\n"
    "                        a PNG file, a directory of PNG files, or a text file listing PNG paths\n"
    "  -o, --output OUT      HDF5 file for HDF5 input; PNG file for one PNG; directory for several PNGs\n"
    "                        (default: beside IN, named for the method: dataset.h5 -> dataset_eq.h5,\n"
    "                        FILE.h5:/dset -> FILE_eq.h5, a.png -> a_eq.png, photos/ -> photos_eq/,\n"
    "                        list.txt -> list_eq/; _clahe or _match for those methods)\n"
    "      --force           replace an existing output\n"
    "      --resume          finish an interrupted run (killed, timed out) from the journal kept\n"
    "                        next to OUT; refused if the options or the input changed\n"
    "      --png-level N     zlib level 0-9 for PNG output (default: a fast setting)\n"
    "      --on-error MODE   stop (default) or skip: leave out bad inputs of a collection, list them, exit 3\n"
    "      --luts W          HDF5 output: all (default) records every image's LUT under\n"
    "                        /histeq_dist/lut; none leaves them out (a 16-bit LUT is 128 KiB a\n"
    "                        slice, more than the pixels of images under 256 x 256)\n"
    "\n"
    "What is equalized:\n"
    "      --scope S         image: one CDF per image; dataset: one CDF per dataset (an N x H x W\n"
    "                        stack as one 3-D image; each PNG file is its own); global: one CDF over\n"
    "                        everything (default: image for a collection or stack, global for one image)\n"
    "      --method M        equalize (default), stretch (linear [min,max] to the full range),\n"
    "                        match (each image's histogram mapped onto --reference's) or\n"
    "                        clahe (contrast-limited adaptive, per tile: OpenCV's createCLAHE;\n"
    "                        scope image only, without --mask or --ignore)\n"
    "      --clahe-grid RxC  clahe: ROWS x COLS tiles (default 8x8; OpenCV's tileGridSize(COLS, ROWS))\n"
    "      --clahe-tile N    clahe: tiles of about N x N pixels (grid ceil(H/N) x ceil(W/N)) instead\n"
    "      --clip-limit F    clahe: OpenCV's clipLimit (default 40; 0 or below: no clipping)\n"
    "      --reference REF   with --method match: the target histogram, an image (a PNG, or\n"
    "                        FILE.h5:/dset: one image or a stack, summed) or 'global' (the histogram\n"
    "                        of the whole input); lut[v] = the smallest w with\n"
    "                        C_t(w) * N_s >= C_s(v) * N_t (C: cumulative counts, N: totals)\n"
    "      --ignore LO[:HI]  leave histogrammed values LO..HI (after --bits clamping; gray: the\n"
    "                        sample, luma: Y, value: V, channels: each channel) out of the histograms\n"
    "      --mask SRC        count only pixels whose mask is non-zero: FILE.h5:/dset (H x W, or\n"
    "                        N x H x W for N-slice stacks; 8- or 16-bit integers) for HDF5 input, a PNG\n"
    "                        file or a directory of PNGs with the input's file names for PNG input\n"
    "      --mask-apply A    all (default): every pixel goes through the LUT; inside: pixels with\n"
    "                        mask 0 or an ignored value are left unchanged\n"
    "      --color C         RGB: luma (default; BT.601 Y, chroma kept), channels (R, G, B\n"
    "                        independently) or value (V = max(R,G,B); hue and saturation kept)\n"
    "      --bits N          significant bits, 1-16 (default: 8 for uint8, 16 for uint16; e.g. 12 for CT)\n"
    "      --bins N          float data: N bins of equal width, 2-65536 (default 65536), between the\n"
    "                        minimum and maximum of each histogram's finite samples; b(x) =\n"
    "                        min(N-1, floor((x-min)*N/(max-min))); output lut[b]/(N-1), in [0, 1]\n"
    "      --range LO:HI     float data: bin over [LO, HI] instead of the data's minimum and maximum\n"
    "                        (no pass over the data to find them; values outside go to the end bins)\n"
    "\n"
    "Resources:\n"
    "      --device D        auto (default), gpu or cpu; auto takes the GPU when every rank on the\n"
    "                        node has one of its own, the images average 4 Mpixel or more and the\n"
    "                        rank's share is 4 GiB or more (any share for clahe), else the CPU\n"
    "                        engine (faster than a shared GPU, for smaller images and shares);\n"
    "                        copy reads and writes without equalizing (benchmarks' I/O baseline)\n"
    "      --threads N       CPU threads per rank, for the engine and the HDF5 workers\n"
    "                        (default: the node's cores / ranks on the node)\n"
    "      --io-threads N    threads reading and writing blocks at once, per rank, for PNG collections\n"
    "                        (default: the node's cores / ranks on the node); HDF5 uses one\n"
    "      --memory SIZE     per-rank budget for pixels in memory: blocks in flight (3, or up to\n"
    "                        --io-threads + 2 with several I/O threads) and those held between the\n"
    "                        passes (default: RAM/4/ranks, within ulimit -v; too small is refused)\n"
    "      --block SIZE      largest piece read at once (default 256M, less for shares under 4G: a\n"
    "                        sixteenth of the rank's share, at least 16M); SIZE takes K, M, G, T\n"
    "\n"
    "Progress, reports and messages:\n"
    "      --progress SEC    a progress line every SEC seconds on long runs (default 10; 0: none)\n"
    "      --summary FILE    write the end-of-run summary (counts, rate, time per phase) as JSON\n"
    "                        (- for standard output)\n"
    "      --report DIR      write DIR/index.html: histograms and CDF/LUT before and after, sample\n"
    "                        thumbnails, the run summary (self-contained, no network); with\n"
    "                        --method clahe the tile grid and corner and centre tiles' LUTs\n"
    "      --report-sample N images shown in the report for scope image (default 4)\n"
    "      --report-scale S  linear (default) or log: the count axis of the histogram plots\n"
    "  -v, --verbose         say what each rank does (plan, devices, timings)\n"
    "  -q, --quiet           only errors\n"
    "  -h, --help            this text\n"
    "      --version         print the version\n"
    "\n"
    "Exit status: 0 done; 1 I/O error; 2 usage; 3 done but inputs skipped; 4 bad input;\n"
    "5 device unavailable; 6 out of memory. Ended by SIGINT, SIGTERM or SIGHUP: 128 + N as\n"
    "shells show it (130 Ctrl-C, 143 SIGTERM); what was done is kept for --resume.\n";

const char *hq_options_usage(void)
{
    return USAGE;
}

enum { OPT_SCOPE = 256, OPT_COLOR, OPT_METHOD, OPT_BITS, OPT_DEVICE, OPT_THREADS, OPT_MEMORY, OPT_BLOCK,
       OPT_PNG_LEVEL, OPT_ON_ERROR, OPT_FORCE, OPT_VERSION, OPT_PROGRESS, OPT_SUMMARY,
       OPT_RESUME, OPT_REPORT, OPT_REPORT_SAMPLE, OPT_REPORT_SCALE, OPT_IO_THREADS, OPT_IGNORE, OPT_MASK,
       OPT_MASK_APPLY, OPT_REFERENCE, OPT_CLAHE_GRID, OPT_CLAHE_TILE, OPT_CLIP_LIMIT, OPT_BINS, OPT_RANGE, OPT_LUTS };

static const struct option LONG_OPTS[] = {
    {"input", required_argument, NULL, 'i'},      {"output", required_argument, NULL, 'o'},
    {"scope", required_argument, NULL, OPT_SCOPE}, {"color", required_argument, NULL, OPT_COLOR},
    {"method", required_argument, NULL, OPT_METHOD}, {"bits", required_argument, NULL, OPT_BITS},
    {"device", required_argument, NULL, OPT_DEVICE}, {"threads", required_argument, NULL, OPT_THREADS},
    {"io-threads", required_argument, NULL, OPT_IO_THREADS},
    {"memory", required_argument, NULL, OPT_MEMORY}, {"block", required_argument, NULL, OPT_BLOCK},
    {"png-level", required_argument, NULL, OPT_PNG_LEVEL}, {"on-error", required_argument, NULL, OPT_ON_ERROR},
    {"force", no_argument, NULL, OPT_FORCE},      {"progress", required_argument, NULL, OPT_PROGRESS},
    {"summary", required_argument, NULL, OPT_SUMMARY},      {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},            {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},  {"resume", no_argument, NULL, OPT_RESUME},
    {"report", required_argument, NULL, OPT_REPORT}, {"report-sample", required_argument, NULL, OPT_REPORT_SAMPLE},
    {"report-scale", required_argument, NULL, OPT_REPORT_SCALE}, {"ignore", required_argument, NULL, OPT_IGNORE},
    {"mask", required_argument, NULL, OPT_MASK},   {"mask-apply", required_argument, NULL, OPT_MASK_APPLY},
    {"reference", required_argument, NULL, OPT_REFERENCE}, {"clahe-grid", required_argument, NULL, OPT_CLAHE_GRID},
    {"clahe-tile", required_argument, NULL, OPT_CLAHE_TILE}, {"clip-limit", required_argument, NULL, OPT_CLIP_LIMIT},
    {"bins", required_argument, NULL, OPT_BINS}, {"range", required_argument, NULL, OPT_RANGE},
    {"luts", required_argument, NULL, OPT_LUTS},
    {NULL, 0, NULL, 0},
};

/* Picks s out of a NULL-terminated list of names; returns its index or -1. */
static int pick(const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* A decimal integer in [lo, hi], written plainly: a digit first (or '-' then one), as the help
 * shows them; strtol alone would also take " 2", "+2" and wrap nothing past LONG_MAX (ERANGE). */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (!isdigit((unsigned char)s[0]) && !(s[0] == '-' && isdigit((unsigned char)s[1])))
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Whether [s, end) is a decimal number as people write them (digits, sign, point, exponent):
 * strtod also takes " 2", "0x10" (hexadecimal: 16) and "inf". */
static int decimal_text(const char *s, const char *end)
{
    if (s == end)
        return 0;
    for (const char *p = s; p < end; p++)
        if (!strchr("0123456789+-.eE", *p))
            return 0;
    return 1;
}

/* "LO:HI", two finite decimal numbers with LO < HI (e.g. -1024:3071 or 0:1e-3). */
static int parse_frange(const char *s, double *lo, double *hi)
{
    char *end;
    *lo = strtod(s, &end);
    if (end == s || *end != ':' || !decimal_text(s, end))
        return -1;
    const char *t = end + 1;
    *hi = strtod(t, &end);
    if (end == t || *end || !decimal_text(t, end))
        return -1;
    return isfinite(*lo) && isfinite(*hi) && *lo < *hi ? 0 : -1;
}

/* "LO" or "LO:HI", 0 <= LO <= HI <= 65535. */
static int parse_range(const char *s, uint32_t *lo, uint32_t *hi)
{
    char *end;
    if (!isdigit((unsigned char)*s))
        return -1;
    unsigned long a = strtoul(s, &end, 10), b = a;
    if (*end == ':') {
        const char *t = end + 1;
        if (!isdigit((unsigned char)*t))
            return -1;
        b = strtoul(t, &end, 10);
    }
    if (*end || a > 65535 || b > 65535 || a > b)
        return -1;
    *lo = (uint32_t)a;
    *hi = (uint32_t)b;
    return 0;
}

/* "8x8", "3X5": ROWSxCOLS, each 1 .. 2^31 - 1. */
static int parse_grid(const char *s, uint64_t *rows, uint64_t *cols)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    unsigned long long r = strtoull(s, &end, 10);
    if (*end != 'x' && *end != 'X')
        return -1;
    const char *c = end + 1;
    if (!isdigit((unsigned char)c[0]))
        return -1;
    unsigned long long k = strtoull(c, &end, 10);
    if (*end || r == 0 || k == 0 || r > 0x7fffffffull || k > 0x7fffffffull)
        return -1;
    *rows = r;
    *cols = k;
    return 0;
}

/* A finite decimal number: 0, or -1 if it is none; -2 if it is one that a double rounds to 0
 * (1e-400), which would turn a small clip limit into no clipping at all. */
static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || !decimal_text(s, end))
        return -1;
    if (v == 0 && errno == ERANGE)
        return -2;
    *out = v;
    return 0;
}

/* "512M", "4G", "1048576": bytes, binary multiples. Digits first: strtoull would take " -5" as
 * 2^64 - 5, and a number past 2^64 as 2^64 - 1 (ERANGE). */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -1;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'T': shift += 10; /* fall through */
    case 'G': shift += 10; /* fall through */
    case 'M': shift += 10; /* fall through */
    case 'K': shift += 10; end++; break;
    default: break;
    }
    if ((*end == 'B' || *end == 'b') && end[1] == '\0')
        end++;
    if (*end || v == 0 || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int hq_options_parse(int argc, char **argv, int print, hq_options *o, hq_err *err)
{
    static const char *const SCOPES[] = {"auto", "image", "global", "dataset", NULL};
    static const char *const COLORS[] = {"luma", "channels", "value", NULL};
    /* In hq_method's order (core/mode.h). */
    static const char *const METHODS[] = {"equalize", "stretch", "match", "clahe", NULL};
    static const char *const APPLY[] = {"all", "inside", NULL};
    static const char *const DEVICES[] = {"auto", "cpu", "gpu", "copy", NULL};
    static const char *const ON_ERR[] = {"stop", "skip", NULL};
    static const char *const SCALES[] = {"linear", "log", NULL};
    static const char *const LUTS[] = {"all", "none", NULL};
    memset(o, 0, sizeof *o);
    o->png_level = -1;
    o->block_bytes = (uint64_t)256 << 20;
    o->progress = 10;
    o->report_sample = 4;
    o->clahe = (hq_clahe_cfg){8, 8, 0, 40.0};
    int clahe_set = 0, grid_set = 0;
    const char *clahe_opt = NULL, *report_opt = NULL;
    o->fbins = 65536;
    opterr = 0;
    /* 0, not 1: glibc's full reset. The options are read twice (quietly before MPI_Init, app/main.c),
     * and after a first read that stopped inside a cluster (-xq, at the unknown -x) optind = 1 left
     * getopt inside it: the second read took the q and lost the error. */
    optind = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":i:o:vqh", LONG_OPTS, NULL)) != -1) {
        int k = 0;
        switch (c) {
        case 'i':
            if (o->input)
                return hq_fail(err, HQ_EUSAGE, "--input given twice ('%s', then '%s'): give one file, directory or "
                               "list of PNG paths", o->input, optarg);
            if (!*optarg)
                return hq_fail(err, HQ_EUSAGE, "--input: empty name");
            o->input = optarg;
            break;
        case 'o':
            if (o->output)
                return hq_fail(err, HQ_EUSAGE, "--output given twice ('%s', then '%s')", o->output, optarg);
            o->output = optarg;
            break;
        case 'v': o->verbose++; break;
        case 'q': o->quiet = 1; break;
        case OPT_FORCE: o->force = 1; break;
        case 'h':
            if (print)
                fputs(USAGE, stdout);
            o->exit_now = 1;
            return 0;
        case OPT_VERSION:
            if (print)
                printf("histeq_dist %s\n", HQ_VERSION);
            o->version = 1;
            o->exit_now = 1;
            return 0;
        case OPT_SCOPE:
            if ((k = pick(optarg, SCOPES)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--scope: '%s' is not one of image, dataset, global", optarg);
            o->scope = (hq_scope)k;
            break;
        case OPT_COLOR:
            if ((k = pick(optarg, COLORS)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--color: '%s' is not one of luma, channels, value", optarg);
            o->color = (hq_color)k;
            break;
        case OPT_METHOD:
            if ((k = pick(optarg, METHODS)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--method: '%s' is not one of equalize, stretch, match, clahe", optarg);
            o->method = (hq_method)k;
            break;
        case OPT_DEVICE:
            if ((k = pick(optarg, DEVICES)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--device: '%s' is not one of auto, gpu, cpu, copy", optarg);
            o->device = (hq_device)k;
            break;
        case OPT_ON_ERROR:
            if ((k = pick(optarg, ON_ERR)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--on-error: '%s' is not one of stop, skip", optarg);
            o->on_error = (hq_on_error)k;
            break;
        case OPT_BITS:
            if (parse_int(optarg, 1, 16, &v))
                return hq_fail(err, HQ_EUSAGE, "--bits: '%s' is not a number from 1 to 16", optarg);
            o->bits = (uint32_t)v;
            break;
        case OPT_BINS:
            if (parse_int(optarg, 2, 65536, &v))
                return hq_fail(err, HQ_EUSAGE, "--bins: '%s' is not a number from 2 to 65536", optarg);
            o->fbins = (uint32_t)v;
            break;
        case OPT_RANGE:
            if (parse_frange(optarg, &o->range_lo, &o->range_hi))
                return hq_fail(err, HQ_EUSAGE, "--range: '%s' is not LO:HI with finite LO < HI", optarg);
            o->range_set = 1;
            break;
        case OPT_THREADS:
            if (parse_int(optarg, 1, 4096, &v))
                return hq_fail(err, HQ_EUSAGE, "--threads: '%s' is not a number from 1 to 4096", optarg);
            o->threads = (int)v;
            break;
        case OPT_IO_THREADS:
            if (parse_int(optarg, 1, 4096, &v))
                return hq_fail(err, HQ_EUSAGE, "--io-threads: '%s' is not a number from 1 to 4096", optarg);
            o->io_threads = (int)v;
            break;
        case OPT_PNG_LEVEL:
            if (parse_int(optarg, 0, 9, &v))
                return hq_fail(err, HQ_EUSAGE, "--png-level: '%s' is not a number from 0 to 9", optarg);
            o->png_level = (int)v;
            break;
        case OPT_SUMMARY: /* "-": standard output, as other tools read it */
            o->summary = strcmp(optarg, "-") == 0 ? "/dev/stdout" : optarg;
            break;
        case OPT_RESUME: o->resume = 1; break;
        case OPT_REPORT: o->report = optarg; break;
        case OPT_REPORT_SAMPLE:
            if (parse_int(optarg, 1, 1000, &v))
                return hq_fail(err, HQ_EUSAGE, "--report-sample: '%s' is not a number from 1 to 1000", optarg);
            o->report_sample = (int)v;
            report_opt = "--report-sample";
            break;
        case OPT_REPORT_SCALE:
            if ((k = pick(optarg, SCALES)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--report-scale: '%s' is not one of linear, log", optarg);
            o->report_log = k;
            report_opt = "--report-scale";
            break;
        case OPT_LUTS:
            if ((k = pick(optarg, LUTS)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--luts: '%s' is not one of all, none", optarg);
            o->no_luts = k;
            break;
        case OPT_IGNORE:
            if (parse_range(optarg, &o->ignore_lo, &o->ignore_hi))
                return hq_fail(err, HQ_EUSAGE, "--ignore: '%s' is not LO or LO:HI with 0 <= LO <= HI <= 65535", optarg);
            o->ignore = 1;
            break;
        case OPT_MASK:
            if (!*optarg)
                return hq_fail(err, HQ_EUSAGE, "--mask: empty name");
            o->mask = optarg;
            break;
        case OPT_MASK_APPLY:
            if ((k = pick(optarg, APPLY)) < 0)
                return hq_fail(err, HQ_EUSAGE, "--mask-apply: '%s' is not one of all, inside", optarg);
            o->mask_inside = k;
            break;
        case OPT_REFERENCE:
            if (!*optarg)
                return hq_fail(err, HQ_EUSAGE, "--reference: empty name");
            o->reference = optarg;
            break;
        case OPT_CLAHE_GRID:
            if (parse_grid(optarg, &o->clahe.grid_y, &o->clahe.grid_x))
                return hq_fail(err, HQ_EUSAGE, "--clahe-grid: '%s' is not ROWSxCOLS such as 8x8", optarg);
            clahe_set = grid_set = 1;
            clahe_opt = "--clahe-grid";
            break;
        case OPT_CLAHE_TILE:
            if (parse_size(optarg, &o->clahe.tile) || strpbrk(optarg, "KMGTkmgtBb"))
                return hq_fail(err, HQ_EUSAGE, "--clahe-tile: '%s' is not a number of pixels of at least 1", optarg);
            clahe_set = 1;
            clahe_opt = "--clahe-tile";
            break;
        case OPT_CLIP_LIMIT:
            if ((v = parse_double(optarg, &o->clahe.clip)) != 0)
                return hq_fail(err, HQ_EUSAGE, v == -2 ? "--clip-limit: '%s' is too small to tell from 0 (which means "
                               "no clipping)" : "--clip-limit: '%s' is not a finite number", optarg);
            clahe_set = 1;
            clahe_opt = "--clip-limit";
            break;
        case OPT_PROGRESS:
            if (parse_int(optarg, 0, 86400, &v))
                return hq_fail(err, HQ_EUSAGE, "--progress: '%s' is not a number of seconds (0 turns it off)", optarg);
            o->progress = (double)v;
            break;
        case OPT_MEMORY:
            if (parse_size(optarg, &o->memory))
                return hq_fail(err, HQ_EUSAGE, "--memory: '%s' is not a size such as 512M or 4G", optarg);
            break;
        case OPT_BLOCK:
            if (parse_size(optarg, &o->block_bytes))
                return hq_fail(err, HQ_EUSAGE, "--block: '%s' is not a size such as 64M or 1G", optarg);
            o->block_given = 1;
            break;
        case ':':
            return hq_fail(err, HQ_EUSAGE, "%s: needs a value (see --help)", argv[optind - 1]);
        default:
            /* Inside a cluster (-xq) getopt has not moved past the word yet: name the letter. */
            if (optopt)
                return hq_fail(err, HQ_EUSAGE, "-%c: unknown option (see --help)", optopt);
            return hq_fail(err, HQ_EUSAGE, "%s: unknown option, or an abbreviation of several (see --help)",
                           argv[optind - 1]);
        }
    }
    if (optind < argc)
        return hq_fail(err, HQ_EUSAGE, "%s: unexpected argument (see --help)", argv[optind]);
    if (!o->input)
        return hq_fail(err, HQ_EUSAGE, "--input is required (see --help)");
    /* "-" reads as standard input or output to a user of other tools, and HDF5 seeks in its files:
     * a file of that name is reached as ./- (HDF5 itself would not open "-", "truncated?"). */
    const char *streams[][3] = {{"--input", o->input, "input"}, {"--output", o->output, "output"},
                                {"--mask", o->mask, "input"}, {"--reference", o->reference, "input"}};
    for (size_t k = 0; k < sizeof streams / sizeof streams[0]; k++)
        if (streams[k][1] && strcmp(streams[k][1], "-") == 0)
            return hq_fail(err, HQ_EUSAGE, "%s -: standard %s is not read or written; give a file name (./- for a "
                           "file named -)", streams[k][0], streams[k][2]);
    if (o->method == HQ_METHOD_MATCH && !o->reference)
        return hq_fail(err, HQ_EUSAGE, "--method match needs --reference (an image, or global)");
    if (o->reference && o->method != HQ_METHOD_MATCH)
        return hq_fail(err, HQ_EUSAGE, "--reference is only used with --method match");
    if (o->mask_inside && !o->mask && !o->ignore)
        return hq_fail(err, HQ_EUSAGE, "--mask-apply inside needs --mask or --ignore");
    if (clahe_set && o->method != HQ_METHOD_CLAHE)
        return hq_fail(err, HQ_EUSAGE, "%s only applies to --method clahe", clahe_opt);
    if (report_opt && !o->report)
        return hq_fail(err, HQ_EUSAGE, "%s only applies with --report DIR", report_opt);
    if (grid_set && o->clahe.tile)
        return hq_fail(err, HQ_EUSAGE, "--clahe-grid and --clahe-tile contradict each other (give one)");
    /* CLAHE's tiles are 2-D and local: no histogram spans images, and its tile histograms count
     * every (padded) position, which a mask or ignored levels would leave with no defined area. */
    if (o->method == HQ_METHOD_CLAHE && o->scope == HQ_SCOPE_GLOBAL)
        return hq_fail(err, HQ_EUSAGE, "--method clahe is local to each image: it has no --scope global");
    if (o->method == HQ_METHOD_CLAHE && o->scope == HQ_SCOPE_DATASET)
        return hq_fail(err, HQ_EUSAGE, "--method clahe is local to each image: it has no --scope dataset");
    if (o->method == HQ_METHOD_CLAHE && (o->mask || o->ignore))
        return hq_fail(err, HQ_EUSAGE, "--method clahe does not take %s", o->mask ? "--mask" : "--ignore");
    if (o->verbose && o->quiet)
        return hq_fail(err, HQ_EUSAGE, "--verbose and --quiet contradict each other");
    return 0;
}

const char *const hq_side_option[HQ_SIDE_N] = {"--mask", "--reference"};

void hq_side_specs(const hq_options *o, const char *spec[HQ_SIDE_N])
{
    spec[0] = o->mask;
    spec[1] = o->reference && strcmp(o->reference, "global") ? o->reference : NULL;
}
