/*
 * hpml_comm_create when its own allocation fails on one rank: that rank still meets the
 * others in the creation's collectives, so every rank returns HPML_ERR_NOMEM with a
 * message naming the rank ("rank R: hpml_comm_create: out of memory") instead of the
 * others waiting forever in MPI_Comm_dup; and the next hpml_comm_create works.
 *
 * The allocation fails through this program's own calloc, which takes the place of the C
 * library's for the whole process (the library is linked in statically) and fails once,
 * when armed, for the size of the communicator's struct. Under AddressSanitizer, whose
 * runtime owns calloc, the test says so and checks only the creation that follows.
 *
 * hpml-test: ranks=1 2 3
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=60
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "harness.h"
#include "hpml/comm.h"

#if defined(__SANITIZE_ADDRESS__)
#define OOM_SHIM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOM_SHIM 0
#endif
#endif
#ifndef OOM_SHIM
#define OOM_SHIM 1
#endif

#if OOM_SHIM
/* glibc's own calloc, under its other name. */
extern void *__libc_calloc(size_t n, size_t size);

static size_t fail_size; /* armed: the next calloc(1, fail_size) returns NULL */

void *calloc(size_t n, size_t size)
{
    if (fail_size != 0 && n == 1 && size == fail_size) {
        fail_size = 0;
        errno = ENOMEM;
        return NULL;
    }
    return __libc_calloc(n, size);
}
#endif

int main(int argc, char **argv)
{
    hpml_comm_t *c = NULL;
    int P, me, victim, rc;
    char want[64];

    hpmlt_init(&argc, &argv, "comm_oom");
    P = hpmlt_size();
    me = hpmlt_rank();
#if OOM_SHIM
    /* The last rank's allocation fails; the others' succeed. */
    victim = P - 1;
    if (me == victim)
        fail_size = sizeof(hpml_comm_t);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &c);
    HPMLT_CHECK(fail_size == 0 || me != victim, "rank %d: the allocation was not attempted", me);
    fail_size = 0;
    HPMLT_CHECK(rc == HPML_ERR_NOMEM && c == NULL, "rank %d: returned %d (%s), comm %p", me, rc,
                hpml_last_error(), (void *)c);
    /* The others name the rank that failed. */
    if (me == victim)
        snprintf(want, sizeof(want), "hpml_comm_create: out of memory");
    else
        snprintf(want, sizeof(want), "rank %d: hpml_comm_create: out of memory", victim);
    HPMLT_CHECK(strstr(hpml_last_error(), want) != NULL, "rank %d: message '%s' lacks '%s'", me,
                hpml_last_error(), want);
    hpml_comm_destroy(c);
#else
    (void)victim, (void)rc, (void)want;
    if (me == 0)
        printf("comm_oom: AddressSanitizer owns calloc here; only the creation that follows "
               "is checked\n");
#endif

    /* Nothing is left half made: the next one works and reduces. */
    c = NULL;
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    if (c != NULL) {
        int v = me + 1, sum = 0;
        HPMLT_CALL(hpml_allreduce(&v, &sum, 1, HPML_I32, HPML_SUM, c));
        HPMLT_CHECK(sum == P * (P + 1) / 2, "sum %d", sum);
    }
    hpml_comm_destroy(c);
    return hpmlt_finish();
}
