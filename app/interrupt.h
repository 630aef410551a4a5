/* interrupt.h — what a run says and leaves when SIGINT, SIGTERM, SIGHUP, SIGXCPU or SIGXFSZ ends
 * it.
 *
 * The run does not try to stop in good order: the signal may come at any point and on any thread,
 * and --resume's journal already keeps every block whose bytes are durable. The handler writes one
 * line on the announcing rank (the signal, and once the journal is open, that the same command
 * with --resume finishes the run), removes the files being written under temporary names
 * (core/doomed.h) and the process's private MPI session directory (mpi/session_dir.h), then lets
 * the signal act as it did before (by default, or by a library's handler: it ends the process), so
 * the exit status is the shell's 128 + N (130 for Ctrl-C, 143 for SIGTERM). A signal the process
 * started with ignored (nohup) stays ignored. SIGPIPE is ignored, so that a write into a closed
 * pipe fails as a write (EPIPE). Async-signal-safe calls only. */
#ifndef HQ_INTERRUPT_H
#define HQ_INTERRUPT_H

/* Installs the handlers; announce: this process prints the line (rank 0). */
void hq_interrupt_install(int announce);

/* From now on the line names output, and with journal set says that --resume finishes the run;
 * output NULL: the plain line again. Not to be called from two threads at once. */
void hq_interrupt_set_output(const char *output, int journal);

/* The run has ended (done or failed, its own line printed): a signal from now on, such as mpirun's
 * SIGTERM to the ranks still finalizing once another has exited non-zero, only cleans up. */
void hq_interrupt_run_ended(void);

#endif
