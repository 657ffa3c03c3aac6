/*
 * POSIX and stdio I/O interposition of libhpml-prof.so: open/read/write/pread/pwrite/
 * fsync/close and fopen/fread/fwrite/fclose (and their 64-bit twins), counted per file
 * (calls, time, bytes, log2 size histogram of reads and writes). Only descriptors opened
 * through these wrappers after MPI_Init are followed, so sockets, pipes and the
 * terminal, and the profiler's own file, are not counted. The real functions come from
 * dlsym(RTLD_NEXT), resolved when the library is loaded or at their first use.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "prof/prof.h"

#define FD_MAX 65536

/* fd -> file index + 1 (0: not followed). */
static int fd_file[FD_MAX];

typedef int (*open_fn)(const char *, int, ...);
typedef ssize_t (*rw_fn)(int, void *, size_t);
typedef ssize_t (*wr_fn)(int, const void *, size_t);
typedef ssize_t (*prw_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwr_fn)(int, const void *, size_t, off_t);
typedef int (*fd_fn)(int);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef size_t (*fread_fn)(void *, size_t, size_t, FILE *);
typedef size_t (*fwrite_fn)(const void *, size_t, size_t, FILE *);
typedef int (*fclose_fn)(FILE *);

static open_fn real_open, real_open64;
static rw_fn real_read;
static wr_fn real_write;
static prw_fn real_pread, real_pread64;
static pwr_fn real_pwrite, real_pwrite64;
static fd_fn real_fsync, real_close;
static fopen_fn real_fopen, real_fopen64;
static fread_fn real_fread;
static fwrite_fn real_fwrite;
static fclose_fn real_fclose;

/* Function pointers from dlsym: the conversion from void * is what POSIX promises. */
#define RESOLVE(var, name) *(void **)(&var) = dlsym(RTLD_NEXT, name)

/* Called from the library's constructor and again by any wrapper that finds its function
 * unresolved: the MPI library's dependencies (UCX) run their constructors, which open and
 * read files, before this library's. */
__attribute__((constructor)) static void resolve(void)
{
    RESOLVE(real_open, "open");
    RESOLVE(real_open64, "open64");
    RESOLVE(real_read, "read");
    RESOLVE(real_write, "write");
    RESOLVE(real_pread, "pread");
    RESOLVE(real_pread64, "pread64");
    RESOLVE(real_pwrite, "pwrite");
    RESOLVE(real_pwrite64, "pwrite64");
    RESOLVE(real_fsync, "fsync");
    RESOLVE(real_close, "close");
    RESOLVE(real_fopen, "fopen");
    RESOLVE(real_fopen64, "fopen64");
    RESOLVE(real_fread, "fread");
    RESOLVE(real_fwrite, "fwrite");
    RESOLVE(real_fclose, "fclose");
}

#define REAL(fn) (fn != NULL ? fn : (resolve(), fn))

/* The file index of fd when it is followed and counting is on, else -1. */
static inline int followed(int fd)
{
    if (!hpml__prof_on || hpml__prof_in_io || fd < 0 || fd >= FD_MAX)
        return -1;
    return fd_file[fd] - 1;
}

static void follow(int fd, const char *path, int op, uint64_t t0)
{
    int fi;

    if (fd < 0 || fd >= FD_MAX || path == NULL)
        return;
    hpml__prof_in_io++;
    fi = hpml__prof_file_index(path);
    hpml__prof_in_io--;
    fd_file[fd] = fi + 1;
    hpml__prof_io_record(fi, op, t0, hpml__prof_now(), 0);
}

static int open_common(open_fn fn, int kind, const char *path, int flags, mode_t mode)
{
    uint64_t t0;
    int fd;

    if (fn == NULL && (resolve(), fn = kind ? real_open64 : real_open) == NULL)
        return -1;
    if (!hpml__prof_on || hpml__prof_in_io)
        return fn(path, flags, mode);
    t0 = hpml__prof_now();
    fd = fn(path, flags, mode);
    if (fd >= 0)
        follow(fd, path, PROF_IO_open, t0);
    return fd;
}

/* The mode argument is read only when the flags say it is there, as open(2) does. */
#define OPEN_MODE(flags, mode)                                                                     \
    do {                                                                                           \
        if ((flags) & (O_CREAT | O_TMPFILE)) {                                                     \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            mode = (mode_t)va_arg(ap, int);                                                        \
            va_end(ap);                                                                            \
        }                                                                                          \
    } while (0)

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    return open_common(real_open, 0, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    return open_common(real_open64, 1, path, flags, mode);
}

/* A read or write: its result is the bytes moved. */
#define IO_RW(ret, fi, op, call)                                                                   \
    do {                                                                                           \
        uint64_t t0_;                                                                              \
        if ((fi) < 0)                                                                              \
            return call;                                                                           \
        t0_ = hpml__prof_now();                                                                    \
        ret = call;                                                                                \
        hpml__prof_io_record(fi, op, t0_, hpml__prof_now(), ret > 0 ? (uint64_t)ret : 0);          \
        return ret;                                                                                \
    } while (0)

ssize_t read(int fd, void *buf, size_t n)
{
    int fi = followed(fd);
    ssize_t r;

    IO_RW(r, fi, PROF_IO_read, REAL(real_read)(fd, buf, n));
}

ssize_t write(int fd, const void *buf, size_t n)
{
    int fi = followed(fd);
    ssize_t r;

    IO_RW(r, fi, PROF_IO_write, REAL(real_write)(fd, buf, n));
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    int fi = followed(fd);
    ssize_t r;

    IO_RW(r, fi, PROF_IO_pread, REAL(real_pread)(fd, buf, n, off));
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    int fi = followed(fd);
    ssize_t r;

    IO_RW(r, fi, PROF_IO_pread, REAL(real_pread64)(fd, buf, n, off));
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    int fi = followed(fd);
    ssize_t r;

    IO_RW(r, fi, PROF_IO_pwrite, REAL(real_pwrite)(fd, buf, n, off));
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    int fi = followed(fd);
    ssize_t r;

    IO_RW(r, fi, PROF_IO_pwrite, REAL(real_pwrite64)(fd, buf, n, off));
}

int fsync(int fd)
{
    int fi = followed(fd), r;
    uint64_t t0;

    if (fi < 0)
        return REAL(real_fsync)(fd);
    t0 = hpml__prof_now();
    r = REAL(real_fsync)(fd);
    hpml__prof_io_record(fi, PROF_IO_fsync, t0, hpml__prof_now(), 0);
    return r;
}

int close(int fd)
{
    int fi = followed(fd), r;
    uint64_t t0;

    if (fd >= 0 && fd < FD_MAX)
        fd_file[fd] = 0; /* a descriptor number reused later is another file */
    if (fi < 0)
        return REAL(real_close)(fd);
    t0 = hpml__prof_now();
    r = REAL(real_close)(fd);
    hpml__prof_io_record(fi, PROF_IO_close, t0, hpml__prof_now(), 0);
    return r;
}

static FILE *fopen_common(fopen_fn fn, int kind, const char *path, const char *mode)
{
    uint64_t t0;
    FILE *f;

    if (fn == NULL && (resolve(), fn = kind ? real_fopen64 : real_fopen) == NULL)
        return NULL;
    if (!hpml__prof_on || hpml__prof_in_io)
        return fn(path, mode);
    t0 = hpml__prof_now();
    f = fn(path, mode);
    if (f != NULL)
        follow(fileno(f), path, PROF_IO_fopen, t0);
    return f;
}

FILE *fopen(const char *path, const char *mode)
{
    return fopen_common(real_fopen, 0, path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
    return fopen_common(real_fopen64, 1, path, mode);
}

/* stdio: bytes are the items moved times their size. */
#define IO_STDIO(fi, op, call, size)                                                               \
    do {                                                                                           \
        uint64_t t0_;                                                                              \
        size_t r_;                                                                                 \
        if ((fi) < 0)                                                                              \
            return call;                                                                           \
        t0_ = hpml__prof_now();                                                                    \
        r_ = call;                                                                                 \
        hpml__prof_io_record(fi, op, t0_, hpml__prof_now(), (uint64_t)r_ *(size));                 \
        return r_;                                                                                 \
    } while (0)

size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
    int fi = followed(fileno(f));

    IO_STDIO(fi, PROF_IO_fread, REAL(real_fread)(buf, size, n, f), size);
}

size_t fwrite(const void *buf, size_t size, size_t n, FILE *f)
{
    int fi = followed(fileno(f));

    IO_STDIO(fi, PROF_IO_fwrite, REAL(real_fwrite)(buf, size, n, f), size);
}

int fclose(FILE *f)
{
    int fd = fileno(f), fi = followed(fd), r;
    uint64_t t0;

    if (fd >= 0 && fd < FD_MAX)
        fd_file[fd] = 0;
    if (fi < 0)
        return REAL(real_fclose)(f);
    t0 = hpml__prof_now();
    r = REAL(real_fclose)(f);
    hpml__prof_io_record(fi, PROF_IO_fclose, t0, hpml__prof_now(), 0);
    return r;
}
