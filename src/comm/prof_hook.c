/*
 * The hook through which libhpml-prof.so (docs/prof.md) attributes the MPI calls made
 * inside an hpml collective to that collective and the algorithm it chose. The profiler,
 * when preloaded, exports hpml_prof_coll_enter/leave; they are looked up once by name,
 * so that a program without the profiler pays one pointer test per collective.
 */
#include <dlfcn.h>
#include <pthread.h>

#include "comm/comm_internal.h"

static void (*enter_fn)(const char *coll, const char *algo, size_t bytes);
static void (*leave_fn)(void);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void find(void)
{
    /* POSIX: a function pointer from dlsym through a void * of the same size. */
    *(void **)&enter_fn = dlsym(RTLD_DEFAULT, "hpml_prof_coll_enter");
    *(void **)&leave_fn = dlsym(RTLD_DEFAULT, "hpml_prof_coll_leave");
    if (enter_fn == NULL || leave_fn == NULL)
        enter_fn = NULL, leave_fn = NULL;
}

void hpml__prof_enter(hpml_coll_t coll, hpml_algo_t algo, size_t bytes)
{
    pthread_once(&once, find);
    if (enter_fn != NULL)
        enter_fn(hpml_coll_name(coll), hpml_algo_name(algo), bytes);
}

void hpml__prof_leave(void)
{
    if (leave_fn != NULL)
        leave_fn();
}
