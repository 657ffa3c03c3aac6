/*
 * Multi-rank test harness. A test program calls hpmlt_init, runs checks with
 * HPMLT_CHECK (each rank counts its own failures and prints them on stderr), and returns
 * hpmlt_finish(): the failures are summed across ranks and rank 0 reports the total.
 * The exit status is non-zero on every rank when any rank failed.
 */
#ifndef HPML_TESTS_HARNESS_H
#define HPML_TESTS_HARNESS_H

#include <mpi.h>

/* MPI_Init_thread(MPI_THREAD_MULTIPLE if available); sets the test name. */
void hpmlt_init(int *argc, char ***argv, const char *test_name);
/* Sum failures across ranks, rank 0 prints "<name>: N checks, M failures on P ranks",
 * MPI_Finalize, and return the exit status (0 or 1). */
int hpmlt_finish(void);

/* Record a check; on failure print file:line, rank and the formatted message. */
int hpmlt_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define HPMLT_CHECK(cond, ...) hpmlt_check(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

/* Checks with no message. */
#define HPMLT_OK(cond) hpmlt_check(!!(cond), __FILE__, __LINE__, #cond, "%s", "")

/* An hpml call that must return 0. */
#define HPMLT_CALL(call)                                                                           \
    do {                                                                                           \
        int hpmlt_rc_ = (call);                                                                    \
        hpmlt_check(hpmlt_rc_ == 0, __FILE__, __LINE__, #call, "returned %d (%s) %s", hpmlt_rc_,   \
                    hpml_strerror(hpmlt_rc_), hpml_last_error());                                  \
    } while (0)

int hpmlt_rank(void);
int hpmlt_size(void);
/* Failures recorded so far on this rank. */
long hpmlt_failures(void);

#endif
