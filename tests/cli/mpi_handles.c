/*
 * MPI communicators for tests/python/handles_check.py, from a library built with this
 * build's MPI (mpicc.openmpi or mpicc.mpich): the script loads it and libhpml through
 * cffi without mpi4py, so that the package's handle conversion (python/hpml/_abi.py) is
 * checked against MPICH too, which Debian's mpi4py is not built for. Handles are given
 * as mpi4py's MPI._handleof gives them: the MPI_Comm converted to uintptr_t (an int
 * handle widened with its sign, a pointer's address).
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

int handles_init(void);
int handles_finalize(void);
int handles_max_library_version_string(void);
int handles_world_rank(void);
uintptr_t handles_world(void);
uintptr_t handles_reversed(void);

static MPI_Comm reversed = MPI_COMM_NULL;

/* MPI with the thread level mpi4py asks for; 0 or an MPI error code. */
int handles_init(void)
{
    int provided;

    return MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
}

int handles_finalize(void)
{
    if (reversed != MPI_COMM_NULL)
        MPI_Comm_free(&reversed);
    return MPI_Finalize();
}

int handles_max_library_version_string(void)
{
    return MPI_MAX_LIBRARY_VERSION_STRING;
}

int handles_world_rank(void)
{
    int rank = -1;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

uintptr_t handles_world(void)
{
    return (uintptr_t)MPI_COMM_WORLD;
}

/* A communicator of every rank in reverse order (a handle made at run time, which
 * under MPICH is a negative int). */
uintptr_t handles_reversed(void)
{
    if (reversed == MPI_COMM_NULL)
        MPI_Comm_split(MPI_COMM_WORLD, 0, -handles_world_rank(), &reversed);
    return (uintptr_t)reversed;
}
