/* crash: a report on the log when memoryd dies of a fatal signal.
 *
 * A process that dies of SIGSEGV says nothing: its clients see their
 * connections reset and the log just ends. crash_install() makes the
 * fatal signals (SEGV, BUS, ILL, FPE, ABRT) write one JSON log line
 * naming the signal, the faulting address and the thread, then the stack
 * as backtrace_symbols_fd prints it, and then die of the same signal (so
 * a core is still dumped and a supervisor sees the real cause). The
 * line has the log's usual "time" and "level" ("fatal").
 *
 * Under AddressSanitizer it does nothing: ASan's own report is better. */
#ifndef MEMORYD_CORE_CRASH_H
#define MEMORYD_CORE_CRASH_H

/* Installs the handlers, and an alternate signal stack for the calling
 * thread (other threads have none: a stack overflow there dies unreported).
 * Call once, early in main. Returns 0, or -1 if a sigaction failed
 * (memoryd runs on without the report). */
int crash_install(void);

#endif
