/* scan_isolated.c — the scan of untrusted input in a child process (io.h, hq_io_scan_isolated).
 *
 * libhdf5 1.10 can crash or hang on damaged metadata (fuzz/README.md: a local heap, a global heap
 * behind a variable-length attribute) before our code has any say. Everything that reads metadata
 * before the pixels — the scan, and the attributes create_output will copy (check_metadata) — runs
 * here in a forked child; the parent only waits, with a deadline, for the packed inventory.
 *
 * Pipe protocol, child -> parent: int32 rc, uint32 message length, uint64 inventory length, the
 * message (rc != 0), the packed inventory (rc == 0). Anything short of that, a signal, or the
 * deadline makes the one-line error "INPUT: ...". */
#define _DEFAULT_SOURCE /* kill, strsignal */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "../core/fdio.h"

#define DEFAULT_TIMEOUT_S 300.0

typedef struct reply_head {
    int32_t rc;
    uint32_t msg_len;
    uint64_t inv_len;
} reply_head;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The child: no MPI, no atexit handlers (Open MPI's, HDF5's), default fatal signals (Open MPI's
 * handler would print a backtrace of the child), nothing on the terminal. It ends with the process
 * that forked it: a scan hung on damaged metadata is the parent's to kill at the deadline, and a
 * parent gone first (killed, or a rank whose launcher died during MPI_Init, mpi/comm.c) would
 * have left it hanging for good. */
static void child(int fd, const char *input, unsigned flags, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(1);
    static const int FATAL[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t k = 0; k < sizeof FATAL / sizeof *FATAL; k++)
        signal(FATAL[k], SIG_DFL);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    hq_inventory inv;
    hq_err err = {{0}};
    unsigned char *buf = NULL;
    uint64_t len = 0;
    int rc = hq_io_scan(input, flags, &inv, &err);
    if (!rc) {
        const hq_io_ops *ops = hq_io_ops_for(inv.format);
        if (ops->check_metadata)
            rc = ops->check_metadata(&inv, &err);
        if (!rc)
            rc = hq_inventory_pack(&inv, &buf, &len, &err);
    }
    reply_head h = {rc, rc ? (uint32_t)strlen(err.msg) : 0, rc ? 0 : len};
    int bad = hq_write_all(fd, &h, sizeof h) || (h.msg_len && hq_write_all(fd, err.msg, h.msg_len)) ||
              (h.inv_len && hq_write_all(fd, buf, (size_t)h.inv_len));
    _exit(bad ? 1 : 0);
}

/* Reads n bytes before the deadline; 0, or -1 on end of file / error, -2 past the deadline. */
static int read_until(int fd, void *p, size_t n, double deadline)
{
    unsigned char *b = p;
    while (n) {
        const double left = deadline - now_s();
        if (left <= 0)
            return -2;
        struct pollfd pf = {fd, POLLIN, 0};
        int k = poll(&pf, 1, left > 3600 ? 3600 * 1000 : (int)(left * 1000) + 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            continue;
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static double timeout_from_env(void)
{
    const char *s = getenv("HQ_METADATA_TIMEOUT_S");
    double t = s ? atof(s) : 0;
    return t > 0 ? t : DEFAULT_TIMEOUT_S;
}

int hq_io_scan_start(const char *input, unsigned flags, double timeout_s, hq_scan_job *job, hq_err *err)
{
    memset(job, 0, sizeof *job);
    if (timeout_s <= 0)
        timeout_s = timeout_from_env();
    int fds[2];
    if (pipe(fds) != 0)
        return hq_fail(err, HQ_EIO, "%s: cannot scan: no pipe (%s)", input, strerror(errno));
    fflush(NULL); /* nothing buffered twice */
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return hq_fail(err, HQ_EIO, "%s: cannot scan: fork failed (%s)", input, strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], input, flags, parent);
    }
    close(fds[1]);
    *job = (hq_scan_job){.pid = pid, .fd = fds[0], .flags = flags, .deadline = now_s() + timeout_s,
                         .timeout_s = timeout_s, .input = input};
    return 0;
}

int hq_io_scan_matches(const hq_scan_job *job, const char *input, unsigned flags)
{
    return job && job->pid > 0 && job->flags == flags && !strcmp(job->input, input);
}

void hq_io_scan_drop(hq_scan_job *job)
{
    if (!job || job->pid <= 0)
        return;
    close(job->fd);
    kill((pid_t)job->pid, SIGKILL);
    while (waitpid((pid_t)job->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    job->pid = 0;
}

int hq_io_scan_finish(hq_scan_job *job, hq_inventory *inv, hq_err *err)
{
    memset(inv, 0, sizeof *inv);
    const char *input = job->input;
    const pid_t pid = (pid_t)job->pid;
    const double deadline = job->deadline, timeout_s = job->timeout_s;
    reply_head h;
    char *msg = NULL;
    unsigned char *buf = NULL;
    int got = read_until(job->fd, &h, sizeof h, deadline);
    if (!got && h.msg_len && !(msg = calloc(h.msg_len + 1, 1)))
        got = -3;
    if (!got && h.msg_len)
        got = read_until(job->fd, msg, h.msg_len, deadline);
    if (!got && h.inv_len && !(buf = malloc((size_t)h.inv_len)))
        got = -3;
    if (!got && h.inv_len)
        got = read_until(job->fd, buf, (size_t)h.inv_len, deadline);
    close(job->fd);
    job->pid = 0;
    if (got == -2)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int rc;
    if (got == -2)
        rc = hq_fail(err, HQ_EINPUT, "%s: reading its metadata took over %.0f s (damaged? HQ_METADATA_TIMEOUT_S "
                     "sets the limit)", input, timeout_s);
    else if (WIFSIGNALED(status))
        rc = hq_fail(err, HQ_EINPUT, "%s: damaged: reading its metadata crashed the format library (%s)", input,
                     strsignal(WTERMSIG(status)));
    else if (got == -3)
        rc = hq_fail(err, HQ_EMEM, "%s: out of memory for the scan's inventory", input);
    else if (got || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        rc = hq_fail(err, HQ_EINPUT, "%s: damaged: reading its metadata ended abnormally (exit status %d)", input,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1); /* a sanitizer's exit, under test */
    else if (h.rc)
        rc = hq_fail(err, h.rc, "%s", msg ? msg : "the scan failed");
    else
        rc = hq_inventory_unpack(buf, h.inv_len, inv, err);
    free(msg);
    free(buf);
    return rc;
}

int hq_io_scan_isolated(const char *input, unsigned flags, double timeout_s, hq_inventory *inv, hq_err *err)
{
    hq_scan_job job;
    memset(inv, 0, sizeof *inv);
    const int rc = hq_io_scan_start(input, flags, timeout_s, &job, err);
    return rc ? rc : hq_io_scan_finish(&job, inv, err);
}
