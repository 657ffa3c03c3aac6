/*
 * hpml core: errors, logging, aligned memory, timers, dtypes and ops, fp16/bf16
 * conversion, reduction kernels and a deterministic RNG.
 *
 * Nothing here calls MPI except the logger, which asks MPI for the rank once MPI is
 * initialised. Every function is thread-safe unless its comment says otherwise.
 */
#ifndef HPML_CORE_H
#define HPML_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------------ */

#define HPML_VERSION_MAJOR  0
#define HPML_VERSION_MINOR  1
#define HPML_VERSION_PATCH  0
#define HPML_VERSION_STRING "0.1.0"

/* The version of the --json records the hpml commands print (docs/json.md); it grows
 * when a key changes meaning or disappears, not when one is added. */
#define HPML_JSON_SCHEMA_VERSION 1

/* The version of the library actually linked (may differ from the header's). */
const char *hpml_version(void);
/* The git commit the library was built from (12 hex digits, "-dirty" when the tree had
 * uncommitted changes; "unknown" when built outside git). */
const char *hpml_build_commit(void);

/* ---- errors ------------------------------------------------------------------- */

/* Functions that can fail return 0 or one of these (all negative). */
enum {
    HPML_OK = 0,
    HPML_ERR_INVAL = -1,       /* invalid argument from the caller */
    HPML_ERR_NOMEM = -2,       /* allocation failed */
    HPML_ERR_MPI = -3,         /* an MPI call returned an error */
    HPML_ERR_IO = -4,          /* a file could not be opened, read or written */
    HPML_ERR_FORMAT = -5,      /* malformed input data (file header, spec, tuning file) */
    HPML_ERR_UNSUPPORTED = -6, /* valid request this build or dtype/op cannot do */
    HPML_ERR_MISMATCH = -7,    /* ranks disagree on a collective's arguments */
    HPML_ERR_RANGE = -8,       /* a number is out of range (overflow, too large) */
    HPML_ERR_NUMERIC = -9,     /* NaN/Inf in data, singular matrix, no convergence */
    HPML_ERR_STATE = -10,      /* call not valid in the object's current state */
};

/* Static text for an error code; never NULL ("unknown error" for unknown codes). */
const char *hpml_strerror(int err);

/*
 * A per-thread detail message for the last error set by the library, e.g.
 * "data.npy: header declares 100 rows but the file holds 99". Empty string if none.
 * The library sets it before returning an error where it can say more than the code.
 */
const char *hpml_last_error(void);
/* Set the per-thread detail message (printf-style; control characters, newlines included,
 * become '?': a message is one line) and return `err` unchanged. */
int hpml_set_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hpml_clear_error(void);

/* ---- logging ------------------------------------------------------------------ */

/* Levels for HPML_LOG_LEVEL: error, warn, info, debug (or 0..3). Default: warn. */
typedef enum { HPML_LOG_ERROR = 0, HPML_LOG_WARN, HPML_LOG_INFO, HPML_LOG_DEBUG } hpml_log_level_t;

/* Current level (read once from HPML_LOG_LEVEL, then cached). */
hpml_log_level_t hpml_log_level(void);
void hpml_log_set_level(hpml_log_level_t level);
/* Write one line "[hpml r<rank>] <level>: <message>" to stderr. Use the HPML_LOG macro. */
void hpml_log_write(hpml_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The level is checked before the arguments are evaluated. */
#define HPML_LOG(level, ...)                                                                       \
    do {                                                                                           \
        if ((level) <= hpml_log_level())                                                           \
            hpml_log_write((level), __VA_ARGS__);                                                  \
    } while (0)

/* ---- memory ------------------------------------------------------------------- */

#define HPML_ALIGN 64

/* 64-byte aligned allocation; size 0 returns a valid unique pointer. NULL on failure. */
void *hpml_malloc(size_t bytes);
/* Like hpml_malloc but zero-filled; checks n*size for overflow. */
void *hpml_calloc(size_t n, size_t size);
/* Free memory from hpml_malloc/hpml_calloc; NULL-safe. */
void hpml_free(void *p);

/* ---- timers ------------------------------------------------------------------- */

/* Monotonic wall-clock time in seconds (CLOCK_MONOTONIC), arbitrary origin. */
double hpml_time(void);
/* Monotonic time in nanoseconds. */
uint64_t hpml_time_ns(void);

/* ---- dtypes and ops ----------------------------------------------------------- */

typedef enum {
    HPML_F32 = 0,
    HPML_F64,
    HPML_F16,
    HPML_BF16,
    HPML_I8,
    HPML_U8,
    HPML_I32,
    HPML_I64,
    HPML_DTYPE_COUNT
} hpml_dtype_t;

typedef enum {
    HPML_SUM = 0,
    HPML_PROD,
    HPML_MIN,
    HPML_MAX,
    HPML_AVG, /* SUM, then divided by the number of contributions (see hpml_reduce_finish) */
    HPML_OP_COUNT
} hpml_op_t;

/* Size of one element in bytes; 0 for an invalid dtype. */
size_t hpml_dtype_size(hpml_dtype_t dt);
/* Lower-case name ("f32", "bf16", ...); "?" for an invalid dtype. */
const char *hpml_dtype_name(hpml_dtype_t dt);
/* Parse a name: f32 f64 f16 bf16 i8 u8 i32 i64, also float double half int char
 * (OMB-style aliases: mpi_float mpi_double mpi_int mpi_char). Returns 0 or HPML_ERR_INVAL. */
int hpml_dtype_parse(const char *name, hpml_dtype_t *out);
/* Lower-case op name ("sum", ...) and its parser. */
const char *hpml_op_name(hpml_op_t op);
int hpml_op_parse(const char *name, hpml_op_t *out);
/* 1 for f32 f64 f16 bf16, 0 otherwise. */
int hpml_dtype_is_float(hpml_dtype_t dt);

/* ---- fp16 / bf16 -------------------------------------------------------------- */

/*
 * IEEE binary16 and bfloat16 stored as uint16_t bit patterns. Conversion from f32
 * rounds to nearest, ties to even; NaN stays NaN (quiet bit set, sign and the top
 * payload bits kept, as x86 F16C does); ±Inf, ±0 and subnormals are exact.
 * Converting to f32 is exact (signalling NaNs become quiet, as F16C does; bf16 does
 * the same so both formats behave alike). In bits: f32 NaN x -> f16
 * sign | 0x7e00 | (x's top 10 mantissa bits), -> bf16 (x >> 16) | 0x0040.
 *
 * The array functions use F16C/AVX2 when the CPU has them (checked once at run time)
 * and a portable path otherwise; both give identical bits for every input (tested on
 * all 65,536 patterns and a sweep of f32). Arrays must be naturally aligned (2 or 4
 * bytes) and must not overlap.
 */
float hpml_f16_to_f32(uint16_t h);
uint16_t hpml_f32_to_f16(float f);
float hpml_bf16_to_f32(uint16_t h);
uint16_t hpml_f32_to_bf16(float f);

void hpml_f16_to_f32_array(float *dst, const uint16_t *src, size_t n);
void hpml_f32_to_f16_array(uint16_t *dst, const float *src, size_t n);
void hpml_bf16_to_f32_array(float *dst, const uint16_t *src, size_t n);
void hpml_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n);

/* Which implementation the array functions and reduction kernels use. */
typedef enum { HPML_SIMD_AUTO = 0, HPML_SIMD_PORTABLE, HPML_SIMD_AVX2 } hpml_simd_t;
/* Force a path (tests use this to compare both). Selecting AVX2 on a CPU without
 * AVX2+F16C+FMA returns HPML_ERR_UNSUPPORTED. AUTO picks the best available, unless the
 * environment says HPML_SIMD=portable (read when the path is first resolved). The ML
 * kernels (K-Means, k-NN) also have AVX-512 forms, used only under AUTO on a CPU with
 * AVX-512F: AVX2 (or HPML_SIMD=avx2) keeps them at AVX2. Not thread-safe with concurrent
 * conversions; call at start-up. */
int hpml_simd_select(hpml_simd_t which);
/* The path in use now (never AUTO). */
hpml_simd_t hpml_simd_active(void);
/* CPU features found at run time. */
int hpml_cpu_has_avx2(void);
int hpml_cpu_has_f16c(void);
int hpml_cpu_has_fma(void);
int hpml_cpu_has_avx512f(void);
/* Bytes of the last-level cache that CPU 0 belongs to (sysfs), 0 when unknown. */
size_t hpml_cpu_llc_bytes(void);

/* ---- reduction kernels -------------------------------------------------------- */

/*
 * dst[i] = dst[i] op src[i] for i < n. AVG reduces like SUM (call hpml_reduce_finish
 * once at the end). fp16/bf16 are converted to f32, combined, and rounded back once per
 * call. Integer SUM/PROD wrap around (two's complement), never undefined behaviour.
 * Float MIN/MAX are IEEE 754-2019 minimum/maximum: a NaN operand propagates (the
 * first operand's if both are NaN, payload kept), and -0 < +0; so they are commutative
 * except for which of two NaNs is kept. Float SUM/PROD are single IEEE operations (a
 * NaN result's payload is unspecified). Results are bitwise identical on the portable
 * and AVX2 paths.
 * Buffers may start at any byte address (no alignment needed). dst and src may not
 * overlap unless they are equal. Returns 0 or HPML_ERR_INVAL (bad dtype/op, NULL
 * buffer with n > 0, partial overlap). Thread-safe; vectorised (SSE2 or AVX2).
 */
int hpml_reduce_local(void *dst, const void *src, size_t n, hpml_dtype_t dt, hpml_op_t op);
/* dst[i] = a[i] op b[i]; dst may equal a or b (or both); a may equal b. */
int hpml_reduce_local3(void *dst, const void *a, const void *b, size_t n, hpml_dtype_t dt,
                       hpml_op_t op);
/* Finish a reduction of `contributions` values: for AVG divide by it (integers: C
 * division truncating toward zero); a no-op for the other ops. Floats divide rather
 * than multiply by 1/P, so the result is the correctly rounded quotient of the sum
 * (fp16/bf16 divide in f32 and round once more, which is still correctly rounded).
 * HPML_ERR_INVAL for contributions < 1 with AVG, a bad dtype/op, or NULL with n > 0. */
int hpml_reduce_finish(void *buf, size_t n, hpml_dtype_t dt, hpml_op_t op, int contributions);

/* ---- RNG ---------------------------------------------------------------------- */

/*
 * Deterministic counter-based-seeded generator (xoshiro256** seeded by splitmix64).
 * hpml_rng_init(seed, stream) gives independent streams for the same seed: use the
 * rank (or any id) as stream. The state is plain data: copy it to checkpoint it.
 */
typedef struct hpml_rng {
    uint64_t s[4];
} hpml_rng_t;

void hpml_rng_init(hpml_rng_t *rng, uint64_t seed, uint64_t stream);
uint64_t hpml_rng_u64(hpml_rng_t *rng);
/* Uniform in [0, 1) with 53 random bits. */
double hpml_rng_uniform(hpml_rng_t *rng);
/* Uniform integer in [0, n) without modulo bias; n > 0. */
uint64_t hpml_rng_below(hpml_rng_t *rng, uint64_t n);
/* Standard normal (Box-Muller, deterministic). */
double hpml_rng_normal(hpml_rng_t *rng);

/* ---- settings ------------------------------------------------------------------ */

/*
 * The registry of every HPML_* environment setting (docs: README's table, `hpml info`).
 * hpml_comm_create reads them all once into the communicator; a malformed value, or an
 * agreed setting that differs between ranks, fails it on every rank with a message naming
 * the variable.
 */
typedef enum {
    HPML_SETTING_SIZE,   /* bytes: 4096, 64K, 16M, 1G (hpml_size_parse) in [min, max] */
    HPML_SETTING_COUNT,  /* a non-negative integer in [min, max] */
    HPML_SETTING_CHOICE, /* one of `choices` */
    HPML_SETTING_TEXT    /* a path or a name, checked by its reader */
} hpml_setting_kind_t;

typedef struct hpml_setting {
    const char *name; /* "HPML_SHM_CHUNK" */
    hpml_setting_kind_t kind;
    const char *def;     /* the default, in words */
    uint64_t min, max;   /* SIZE and COUNT */
    const char *choices; /* CHOICE: "thread|mpi" */
    int agreed;          /* must be the same on every rank */
    const char *doc;     /* one line */
} hpml_setting_t;

/* Number of settings, and setting i (NULL past the end). Static data, thread-safe. */
size_t hpml_settings_count(void);
const hpml_setting_t *hpml_setting_at(size_t i);

/* The one size grammar of hpml (environment, tuning files, command lines): digits, then
 * optionally K, M, G or T (powers of 1024, either case, "KiB" too), then optionally "B".
 * 0, or -1 when malformed or beyond 2^64. */
int hpml_size_parse(const char *s, uint64_t *out);
/* v the way that grammar writes it shortest: "64", "256K", "1G", "2147483647"; returns buf. */
const char *hpml_size_format(uint64_t v, char *buf, size_t size);

/* ---- small output helpers ------------------------------------------------------ */

#include <stdio.h>

/* Write `s` as a JSON string literal (quotes, escapes, control characters as \uXXXX). */
void hpml_json_string(FILE *f, const char *s);

/* Identity of the BLAS linked into hpml: "OpenBLAS 0.3.21 ..." and its thread count. */
const char *hpml_blas_config(void);
int hpml_blas_threads(void);
/* Set the BLAS thread count (e.g. to 1 per MPI rank). */
void hpml_blas_set_threads(int n);

#ifdef __cplusplus
}
#endif

#endif /* HPML_CORE_H */
