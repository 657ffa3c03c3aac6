/*
 * POSIX and stdio I/O interposition of libhpml-prof.so: open/read/write/pread/pwrite/
 * fsync/close and fopen/fread/fwrite/fclose (and their 64-bit twins), counted per file
 * (calls, time, bytes, log2 size histogram of reads and writes). Only descriptors opened
 * through these wrappers after MPI_Init are followed, so sockets, pipes and the
 * terminal, and the profiler's own file, are not counted. A descriptor made from a
 * followed one (dup, dup2, dup3, fcntl F_DUPFD and F_DUPFD_CLOEXEC) is the same file:
 * zlib's gzdopen on a dup'd descriptor, for one, reads it through read(). Every call
 * that opens a file by name is wrapped (open, openat, creat, mkstemp, mkostemp, glibc's
 * fortified __open_2 and __openat_2, their 64-bit twins, fopen, freopen): fdopen needs
 * no wrapper, since the FILE's descriptor is followed already. The real functions come
 * from dlsym(RTLD_NEXT), resolved when the library is loaded or at their first use.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "prof/prof.h"

#define FD_MAX 65536

/* fd -> file index + 1 (0: not followed). */
static int fd_file[FD_MAX];

typedef int (*open_fn)(const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*openat2_fn)(int, const char *, int);
typedef int (*creat_fn)(const char *, mode_t);
typedef int (*mkstemp_fn)(char *);
typedef int (*mkostemp_fn)(char *, int);
typedef ssize_t (*rw_fn)(int, void *, size_t);
typedef ssize_t (*wr_fn)(int, const void *, size_t);
typedef ssize_t (*prw_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwr_fn)(int, const void *, size_t, off_t);
typedef int (*fd_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef int (*fcntl_fn)(int, int, ...);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef FILE *(*freopen_fn)(const char *, const char *, FILE *);
typedef size_t (*fread_fn)(void *, size_t, size_t, FILE *);
typedef size_t (*fwrite_fn)(const void *, size_t, size_t, FILE *);
typedef int (*fclose_fn)(FILE *);

static open_fn real_open, real_open64;
static open2_fn real_open_2, real_open64_2;
static openat_fn real_openat, real_openat64;
static openat2_fn real_openat_2, real_openat64_2;
static creat_fn real_creat, real_creat64;
static mkstemp_fn real_mkstemp, real_mkstemp64;
static mkostemp_fn real_mkostemp, real_mkostemp64;
static rw_fn real_read;
static wr_fn real_write;
static prw_fn real_pread, real_pread64;
static pwr_fn real_pwrite, real_pwrite64;
static fd_fn real_fsync, real_close, real_dup;
static dup2_fn real_dup2;
static dup3_fn real_dup3;
static fcntl_fn real_fcntl, real_fcntl64;
static fopen_fn real_fopen, real_fopen64;
static freopen_fn real_freopen, real_freopen64;
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
    RESOLVE(real_open_2, "__open_2");
    RESOLVE(real_open64_2, "__open64_2");
    RESOLVE(real_openat, "openat");
    RESOLVE(real_openat64, "openat64");
    RESOLVE(real_openat_2, "__openat_2");
    RESOLVE(real_openat64_2, "__openat64_2");
    RESOLVE(real_creat, "creat");
    RESOLVE(real_creat64, "creat64");
    RESOLVE(real_mkstemp, "mkstemp");
    RESOLVE(real_mkstemp64, "mkstemp64");
    RESOLVE(real_mkostemp, "mkostemp");
    RESOLVE(real_mkostemp64, "mkostemp64");
    RESOLVE(real_read, "read");
    RESOLVE(real_write, "write");
    RESOLVE(real_pread, "pread");
    RESOLVE(real_pread64, "pread64");
    RESOLVE(real_pwrite, "pwrite");
    RESOLVE(real_pwrite64, "pwrite64");
    RESOLVE(real_fsync, "fsync");
    RESOLVE(real_close, "close");
    RESOLVE(real_dup, "dup");
    RESOLVE(real_dup2, "dup2");
    RESOLVE(real_dup3, "dup3");
    RESOLVE(real_fcntl, "fcntl");
    RESOLVE(real_fcntl64, "fcntl64");
    RESOLVE(real_fopen, "fopen");
    RESOLVE(real_fopen64, "fopen64");
    RESOLVE(real_freopen, "freopen");
    RESOLVE(real_freopen64, "freopen64");
    RESOLVE(real_fread, "fread");
    RESOLVE(real_fwrite, "fwrite");
    RESOLVE(real_fclose, "fclose");
}

/* The real function fn, resolved now if it was not yet (NULL if libc lacks it: the
 * wrappers of functions older glibc versions lack check, and fail with ENOSYS). */
#define REAL(fn) (fn != NULL ? fn : (resolve(), fn))

/* The file index of fd when it is followed and counting is on, else -1. */
static inline int followed(int fd)
{
    if (!hpml__prof_on || hpml__prof_in_io || fd < 0 || fd >= FD_MAX)
        return -1;
    return fd_file[fd] - 1;
}

/* fd was opened at t0 by name: path, or, for a relative path opened in a directory
 * descriptor dirfd (not AT_FDCWD), path joined to that directory's /proc/self/fd link. */
static void follow(int fd, int dirfd, const char *path, int op, uint64_t t0)
{
    char full[8192];
    int fi;

    if (fd < 0 || fd >= FD_MAX || path == NULL)
        return;
    hpml__prof_in_io++;
    if (dirfd != AT_FDCWD && path[0] != '/') {
        char link[64];
        ssize_t n;

        snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
        n = readlink(link, full, sizeof(full) - 1);
        if (n > 0 && (size_t)n + 1 + strlen(path) < sizeof(full)) {
            full[n] = '/';
            strcpy(full + n + 1, path);
            path = full;
        }
    }
    fi = hpml__prof_file_index(path);
    hpml__prof_in_io--;
    fd_file[fd] = fi + 1;
    hpml__prof_io_record(fi, op, t0, hpml__prof_now(), 0);
}

/* A call that opens path (relative to dirfd) and returns a descriptor: the descriptor is
 * followed as that file when counting is on, and forgets any earlier file otherwise (its
 * number may have been closed by a call not wrapped). fn is checked: glibc may lack it. */
#define IO_OPEN(fn, dirfd, path, args)                                                             \
    do {                                                                                           \
        uint64_t t0_;                                                                              \
        int fd_;                                                                                   \
        if (REAL(fn) == NULL) {                                                                    \
            errno = ENOSYS;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
        t0_ = hpml__prof_on && !hpml__prof_in_io ? hpml__prof_now() : 0;                           \
        fd_ = fn args;                                                                             \
        if (fd_ >= 0 && fd_ < FD_MAX) {                                                            \
            fd_file[fd_] = 0;                                                                      \
            if (t0_)                                                                               \
                follow(fd_, dirfd, path, PROF_IO_open, t0_);                                       \
        }                                                                                          \
        return fd_;                                                                                \
    } while (0)

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
    IO_OPEN(real_open, AT_FDCWD, path, (path, flags, mode));
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    IO_OPEN(real_open64, AT_FDCWD, path, (path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    IO_OPEN(real_openat, dirfd, path, (dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;

    OPEN_MODE(flags, mode);
    IO_OPEN(real_openat64, dirfd, path, (dirfd, path, flags, mode));
}

/* What -D_FORTIFY_SOURCE makes of open(path, flags) without a mode. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
    IO_OPEN(real_open_2, AT_FDCWD, path, (path, flags));
}

int __open64_2(const char *path, int flags)
{
    IO_OPEN(real_open64_2, AT_FDCWD, path, (path, flags));
}

int __openat_2(int dirfd, const char *path, int flags)
{
    IO_OPEN(real_openat_2, dirfd, path, (dirfd, path, flags));
}

int __openat64_2(int dirfd, const char *path, int flags)
{
    IO_OPEN(real_openat64_2, dirfd, path, (dirfd, path, flags));
}

int creat(const char *path, mode_t mode)
{
    IO_OPEN(real_creat, AT_FDCWD, path, (path, mode));
}

int creat64(const char *path, mode_t mode)
{
    IO_OPEN(real_creat64, AT_FDCWD, path, (path, mode));
}

/* A file made from a name template (hpml writes its outputs so, then renames them): the
 * name it got. */
int mkstemp(char *tmpl)
{
    IO_OPEN(real_mkstemp, AT_FDCWD, tmpl, (tmpl));
}

int mkstemp64(char *tmpl)
{
    IO_OPEN(real_mkstemp64, AT_FDCWD, tmpl, (tmpl));
}

int mkostemp(char *tmpl, int flags)
{
    IO_OPEN(real_mkostemp, AT_FDCWD, tmpl, (tmpl, flags));
}

int mkostemp64(char *tmpl, int flags)
{
    IO_OPEN(real_mkostemp64, AT_FDCWD, tmpl, (tmpl, flags));
}

/* newfd, returned by a call (started at t0 when fi >= 0) that duplicated fd: the same
 * file as fd, whatever newfd was before. dup2 and dup3 close newfd first: when it was
 * another followed file (closed, its index), that file gets the close. */
static int dup_done(int fd, int newfd, int fi, uint64_t t0, int closed)
{
    if (newfd < 0 || newfd == fd)
        return newfd;
    if (newfd < FD_MAX)
        fd_file[newfd] = fd >= 0 && fd < FD_MAX ? fd_file[fd] : 0;
    if (closed >= 0)
        hpml__prof_io_record(closed, PROF_IO_close, t0 ? t0 : hpml__prof_now(), hpml__prof_now(),
                             0);
    if (fi >= 0)
        hpml__prof_io_record(fi, PROF_IO_dup, t0, hpml__prof_now(), 0);
    return newfd;
}

/* The file index of fd (followed) and the time now when it is a followed file, else 0. */
#define DUP_START(fd, fi, t0)                                                                      \
    do {                                                                                           \
        fi = followed(fd);                                                                         \
        t0 = fi >= 0 ? hpml__prof_now() : 0;                                                       \
    } while (0)

int dup(int fd)
{
    uint64_t t0;
    int fi;

    DUP_START(fd, fi, t0);
    return dup_done(fd, REAL(real_dup)(fd), fi, t0, -1);
}

int dup2(int fd, int newfd)
{
    uint64_t t0;
    int fi;

    DUP_START(fd, fi, t0);
    return dup_done(fd, REAL(real_dup2)(fd, newfd), fi, t0, newfd != fd ? followed(newfd) : -1);
}

int dup3(int fd, int newfd, int flags)
{
    uint64_t t0;
    int fi;

    DUP_START(fd, fi, t0);
    return dup_done(fd, REAL(real_dup3)(fd, newfd, flags), fi, t0,
                    newfd != fd ? followed(newfd) : -1);
}

/* fcntl's third argument, when there is one, is an int or a pointer: taken as a pointer
 * and passed on as one, as glibc's own fcntl does (an int's register or stack slot holds
 * it either way on the ABIs glibc supports). Only F_DUPFD and F_DUPFD_CLOEXEC are seen. */
static int fcntl_common(fcntl_fn fn, int fd, int cmd, void *arg)
{
    uint64_t t0;
    int fi;

    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
        return fn(fd, cmd, arg);
    DUP_START(fd, fi, t0);
    return dup_done(fd, fn(fd, cmd, arg), fi, t0, -1);
}

#define FCNTL_ARG(cmd, arg)                                                                        \
    do {                                                                                           \
        va_list ap;                                                                                \
        va_start(ap, cmd);                                                                         \
        arg = va_arg(ap, void *);                                                                  \
        va_end(ap);                                                                                \
    } while (0)

int fcntl(int fd, int cmd, ...)
{
    void *arg;

    FCNTL_ARG(cmd, arg);
    return fcntl_common(REAL(real_fcntl), fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...);
int fcntl64(int fd, int cmd, ...)
{
    void *arg;

    FCNTL_ARG(cmd, arg);
    return fcntl_common(REAL(real_fcntl64), fd, cmd, arg);
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
    t0 = hpml__prof_on && !hpml__prof_in_io ? hpml__prof_now() : 0;
    f = fn(path, mode);
    if (f != NULL && fileno(f) >= 0 && fileno(f) < FD_MAX) {
        fd_file[fileno(f)] = 0;
        if (t0)
            follow(fileno(f), AT_FDCWD, path, PROF_IO_fopen, t0);
    }
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

/* freopen closes the stream's file and opens path (or, path NULL, the same file again) in
 * it: the old file gets an fclose, the new one an fopen. */
static FILE *freopen_common(freopen_fn fn, const char *path, const char *mode, FILE *f)
{
    int fd = f != NULL ? fileno(f) : -1, old = followed(fd);
    uint64_t t0 = hpml__prof_on && !hpml__prof_in_io ? hpml__prof_now() : 0;
    FILE *r;

    if (fn == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    r = fn(path, mode, f);
    if (old >= 0)
        hpml__prof_io_record(old, PROF_IO_fclose, t0, hpml__prof_now(), 0);
    if (fd >= 0 && fd < FD_MAX)
        fd_file[fd] = 0;
    if (r != NULL && fileno(r) >= 0 && fileno(r) < FD_MAX) {
        fd_file[fileno(r)] = path == NULL && old >= 0 ? old + 1 : 0;
        if (t0 && path != NULL)
            follow(fileno(r), AT_FDCWD, path, PROF_IO_fopen, t0);
    }
    return r;
}

FILE *freopen(const char *path, const char *mode, FILE *f)
{
    return freopen_common(REAL(real_freopen), path, mode, f);
}

FILE *freopen64(const char *path, const char *mode, FILE *f)
{
    return freopen_common(REAL(real_freopen64), path, mode, f);
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
