#include "interrupt.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../core/doomed.h"
#include "../mpi/comm.h"
#include "../mpi/session_dir.h"

/* What people and batch systems send to end a run: Ctrl-C, kill and scancel, a closed terminal,
 * a CPU-time limit (ulimit -t, a batch system's h_cpu: SIGXCPU, then SIGKILL), a file grown past
 * the file size limit (ulimit -f, h_fsize: SIGXFSZ; ignored instead, the write's EFBIG left
 * HDF5 crashing in its own clean-up: SIGSEGV inside H5Ocopy or MPI_Finalize).
 * (Not USR1/USR2: some MPI stacks handle them themselves without ending the process, as on the
 * GPU machine's Open MPI, where a run then went on; a line saying it was interrupted would lie.) */
static const int SIGS[] = {SIGINT, SIGTERM, SIGHUP, SIGXCPU, SIGXFSZ};
static const char *const NAMES[] = {"SIGINT", "SIGTERM", "SIGHUP", "SIGXCPU", "SIGXFSZ"};
#define NSIGS (sizeof SIGS / sizeof SIGS[0])

static struct sigaction old_action[NSIGS];
static int announce;
static int via_mpirun; /* launched by Open MPI's mpirun, which sends SIGTERM for SIGINT */
static pid_t owner; /* a forked child (io/scan_isolated.c) inherits the handler, not the job */
static int entered;
static int cleaned; /* the first handler's clean-up is done */

/* The line's text before "interrupted by SIG..." and after it. Two copies: set_output fills the
 * one the handler is not reading, then publishes it; -1: the plain line. */
#define TEXT (2 * PATH_MAX + 160)
static char head[2][TEXT], tail[2][TEXT];
static int current = -1;

void hq_interrupt_set_output(const char *output, int journal)
{
    if (!output) {
        __atomic_store_n(&current, -1, __ATOMIC_RELEASE);
        return;
    }
    const int next = __atomic_load_n(&current, __ATOMIC_ACQUIRE) == 0 ? 1 : 0;
    snprintf(head[next], TEXT, "histeq_dist: %s: ", output);
    if (journal)
        snprintf(tail[next], TEXT, "; the work done is kept (%s.journal): run again with --resume to finish\n",
                 output);
    else
        snprintf(tail[next], TEXT, "; it was not written\n"); /* a single PNG, written whole at the end */
    __atomic_store_n(&current, next, __ATOMIC_RELEASE);
}

void hq_interrupt_run_ended(void)
{
    __atomic_store_n(&announce, 0, __ATOMIC_RELEASE);
}

/* dst's room for src (NUL not counted), as an async-signal-safe strlcat. */
static size_t put(char *dst, size_t at, size_t cap, const char *src)
{
    while (*src && at + 1 < cap)
        dst[at++] = *src++;
    dst[at] = 0;
    return at;
}

static void on_signal(int sig)
{
    const int saved = errno;
    size_t k = 0;
    while (k < NSIGS && SIGS[k] != sig)
        k++;
    if (k == NSIGS)
        return;
    const int first = !__atomic_exchange_n(&entered, 1, __ATOMIC_ACQ_REL);
    /* SIGXFSZ comes to the thread whose write passed the limit: two writers past it at once made
     * two handlers, and the second, raising the signal at once, ended the process in the middle of
     * the first one's clean-up (a .NAME.part-PID left). It waits for that clean-up first. */
    if (getpid() == owner && !first) {
        const struct timespec tick = {0, 5 * 1000 * 1000};
        while (!__atomic_load_n(&cleaned, __ATOMIC_ACQUIRE))
            nanosleep(&tick, NULL);
    }
    if (getpid() == owner && first) {
        if (__atomic_load_n(&announce, __ATOMIC_ACQUIRE)) {
            char line[2 * TEXT];
            const int c = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
            size_t n = put(line, 0, sizeof line, c >= 0 ? head[c] : "histeq_dist: ");
            n = put(line, n, sizeof line, "interrupted by ");
            n = put(line, n, sizeof line, NAMES[k]);
            if (sig == SIGTERM && via_mpirun) /* the user pressed Ctrl-C, and reads SIGTERM */
                n = put(line, n, sizeof line, " (mpirun passes Ctrl-C and kill on as SIGTERM)");
            n = put(line, n, sizeof line, c >= 0 ? tail[c] : "\n");
            ssize_t w = write(STDERR_FILENO, line, n);
            (void)w;
        }
        hq_doomed_unlink_all();
        /* The other threads run on while this one handles the signal: one between registering a
         * temporary file and creating it (or registering it in a slot the first pass had to skip)
         * makes it after that pass. A second pass a moment later removes it (helper's repro: a
         * zero-byte .NAME.part-PID left in 5 of 30 SIGTERMs). */
        const struct timespec settle = {0, 20 * 1000 * 1000};
        nanosleep(&settle, NULL);
        hq_doomed_unlink_all();
        hq_session_dir_remove();
        __atomic_store_n(&cleaned, 1, __ATOMIC_RELEASE);
    }
    /* What the signal did before (by default: end the process) happens once this handler returns:
     * the signal is blocked until then. SIGXCPU's and SIGXFSZ's defaults also dump core: this is
     * an ending, not a crash, and leaves none. */
    if (sig == SIGXCPU || sig == SIGXFSZ) {
        /* Their ending is the run's own, whatever a library set before: the GPU machine's MPI
         * stack catches both in every process and returns, and the run then went on. */
        const struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
    } else {
        sigaction(sig, &old_action[k], NULL);
    }
    raise(sig);
    errno = saved;
}

void hq_interrupt_install(int announce_it)
{
    announce = announce_it;
    via_mpirun = hq_comm_env_mpirun();
    owner = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < NSIGS; k++)
        sigaddset(&sa.sa_mask, SIGS[k]);
    /* Not where the signal is ignored (nohup). Where a library already handles it (the GPU
     * machine's MPI stack catches all three in every process), its handler runs after this one,
     * as the handler restores it: there it ended the run with the signal's status. */
    for (size_t k = 0; k < NSIGS; k++)
        if (sigaction(SIGS[k], NULL, &old_action[k]) == 0 &&
            ((old_action[k].sa_flags & SA_SIGINFO) || old_action[k].sa_handler != SIG_IGN))
            sigaction(SIGS[k], &sa, NULL);
    /* A write into a pipe whose reader left (`| head -1`, --summary /dev/stdout) killed the
     * process with no word (exit 141), leaving its lock, even after the output was committed;
     * ignored, the write fails with EPIPE and the run says so as for any failed write. */
    struct sigaction cur;
    if (sigaction(SIGPIPE, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
}
