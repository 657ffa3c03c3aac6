/*
 * Element conversion for the readers: stored file types (any byte order) to the wanted
 * hpml dtype. Common cases (same type, u8 -> float, f32 <-> f64) have plain loops; the
 * rest go element by element through a 64-bit integer or a double, with range checks so
 * a value never changes silently (2.5 read as i32, 300 read as u8, 1e300 read as f32).
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

size_t hpml__io_stype_size(hpml__io_stype_t t)
{
    static const size_t sz[IO_STYPE_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8, 1};
    return (unsigned)t < IO_STYPE_COUNT ? sz[t] : 0;
}

const char *hpml__io_stype_name(hpml__io_stype_t t)
{
    static const char *const nm[IO_STYPE_COUNT] = {"i8",  "u8",  "i16", "u16", "i32", "u32",
                                                   "i64", "u64", "f16", "f32", "f64", "bool"};
    return (unsigned)t < IO_STYPE_COUNT ? nm[t] : "?";
}

hpml_dtype_t hpml__io_stype_dtype(hpml__io_stype_t t)
{
    switch (t) {
    case IO_I8: return HPML_I8;
    case IO_U8:
    case IO_BOOL: return HPML_U8;
    case IO_I16:
    case IO_U16:
    case IO_I32: return HPML_I32;
    case IO_U32:
    case IO_I64:
    case IO_U64: return HPML_I64;
    case IO_F16: return HPML_F16;
    case IO_F32: return HPML_F32;
    default: return HPML_F64;
    }
}

int hpml__io_want_ok(hpml_dtype_t want)
{
    return want == HPML_F32 || want == HPML_F64 || want == HPML_I32 || want == HPML_I64 ||
           want == HPML_U8 || want == HPML_I8;
}

/* A value on its way from the file to the caller. */
typedef struct {
    int kind; /* 0 signed integer, 1 unsigned integer, 2 floating point */
    int64_t i;
    uint64_t u;
    double d;
} val_t;

static void load_bytes(unsigned char *b, const unsigned char *p, size_t size, int swap)
{
    size_t k;

    if (swap)
        for (k = 0; k < size; k++)
            b[k] = p[size - 1 - k];
    else
        memcpy(b, p, size);
}

static val_t load(const unsigned char *p, hpml__io_stype_t t, int swap)
{
    unsigned char b[8];
    val_t v = {0, 0, 0, 0.0};

    load_bytes(b, p, hpml__io_stype_size(t), swap);
    switch (t) {
    case IO_I8: {
        int8_t x;
        memcpy(&x, b, 1);
        v.i = x;
        break;
    }
    case IO_U8:
        v.kind = 1;
        v.u = b[0];
        break;
    case IO_BOOL:
        v.kind = 1;
        v.u = b[0] != 0;
        break;
    case IO_I16: {
        int16_t x;
        memcpy(&x, b, 2);
        v.i = x;
        break;
    }
    case IO_U16: {
        uint16_t x;
        memcpy(&x, b, 2);
        v.kind = 1;
        v.u = x;
        break;
    }
    case IO_I32: {
        int32_t x;
        memcpy(&x, b, 4);
        v.i = x;
        break;
    }
    case IO_U32: {
        uint32_t x;
        memcpy(&x, b, 4);
        v.kind = 1;
        v.u = x;
        break;
    }
    case IO_I64: {
        int64_t x;
        memcpy(&x, b, 8);
        v.i = x;
        break;
    }
    case IO_U64: {
        uint64_t x;
        memcpy(&x, b, 8);
        v.kind = 1;
        v.u = x;
        break;
    }
    case IO_F16: {
        uint16_t x;
        memcpy(&x, b, 2);
        v.kind = 2;
        v.d = hpml_f16_to_f32(x);
        break;
    }
    case IO_F32: {
        float x;
        memcpy(&x, b, 4);
        v.kind = 2;
        v.d = x;
        break;
    }
    case IO_F64: {
        double x;
        memcpy(&x, b, 8);
        v.kind = 2;
        v.d = x;
        break;
    }
    default: break;
    }
    return v;
}

/* Shortest %g form that reads back as d (so messages show 1e+39, not 9.99...e+38). */
static const char *num_text(char *buf, size_t len, double d)
{
    int prec;

    for (prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return buf;
}

static const char *nonfinite_text(double d)
{
    return isnan(d) ? "NaN" : d > 0 ? "+Inf" : "-Inf";
}

/* Store v as want at dst; 0 or an error with the reason in why. */
static int store(void *dst, hpml_dtype_t want, val_t v, int reject, char *why, size_t whylen)
{
    const char *wn = hpml_dtype_name(want);
    char nb[40];

    if (want == HPML_F32 || want == HPML_F64) {
        double d = v.kind == 0 ? (double)v.i : v.kind == 1 ? (double)v.u : v.d;
        if (v.kind == 2 && !isfinite(d)) {
            if (reject) {
                snprintf(why, whylen, "is %s", nonfinite_text(d));
                return HPML_ERR_NUMERIC;
            }
        } else if (want == HPML_F32 && fabs(d) > FLT_MAX) {
            snprintf(why, whylen, "value %s is out of range for f32", num_text(nb, sizeof(nb), d));
            return HPML_ERR_RANGE;
        }
        if (want == HPML_F32) {
            float f = (float)d;
            memcpy(dst, &f, sizeof(f));
        } else {
            memcpy(dst, &d, sizeof(d));
        }
        return 0;
    }

    /* Integer targets: get an exact integer first. */
    int neg = 0;
    uint64_t mag = 0; /* |value| */
    if (v.kind == 2) {
        if (!isfinite(v.d)) {
            snprintf(why, whylen, "is %s (cannot be read as %s)", nonfinite_text(v.d), wn);
            return HPML_ERR_NUMERIC;
        }
        if (v.d != floor(v.d)) {
            snprintf(why, whylen, "value %s is not an integer (reading as %s)",
                     num_text(nb, sizeof(nb), v.d), wn);
            return HPML_ERR_RANGE;
        }
        if (fabs(v.d) >= 18446744073709551616.0) {
            snprintf(why, whylen, "value %s is out of range for %s", num_text(nb, sizeof(nb), v.d),
                     wn);
            return HPML_ERR_RANGE;
        }
        neg = v.d < 0;
        mag = (uint64_t)fabs(v.d);
    } else if (v.kind == 0) {
        neg = v.i < 0;
        mag = neg ? (uint64_t)0 - (uint64_t)v.i : (uint64_t)v.i;
    } else {
        mag = v.u;
    }
    uint64_t maxpos, maxneg; /* largest magnitude allowed for positive / negative values */
    switch (want) {
    case HPML_U8:
        maxpos = UINT8_MAX;
        maxneg = 0;
        break;
    case HPML_I8:
        maxpos = INT8_MAX;
        maxneg = (uint64_t)INT8_MAX + 1;
        break;
    case HPML_I32:
        maxpos = INT32_MAX;
        maxneg = (uint64_t)INT32_MAX + 1;
        break;
    default:
        maxpos = INT64_MAX;
        maxneg = (uint64_t)INT64_MAX + 1;
        break;
    }
    if (neg ? mag > maxneg : mag > maxpos) {
        if (v.kind == 2)
            snprintf(why, whylen, "value %s is out of range for %s", num_text(nb, sizeof(nb), v.d),
                     wn);
        else
            snprintf(why, whylen, "value %s%" PRIu64 " is out of range for %s", neg ? "-" : "", mag,
                     wn);
        return HPML_ERR_RANGE;
    }
    /* In range now; build the value without overflowing (mag may be 2^63). */
    int64_t x = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
    switch (want) {
    case HPML_U8: {
        uint8_t y = (uint8_t)x;
        memcpy(dst, &y, 1);
        break;
    }
    case HPML_I8: {
        int8_t y = (int8_t)x;
        memcpy(dst, &y, 1);
        break;
    }
    case HPML_I32: {
        int32_t y = (int32_t)x;
        memcpy(dst, &y, 4);
        break;
    }
    default: memcpy(dst, &x, 8); break;
    }
    return 0;
}

int hpml__io_convert_double(void *dst, hpml_dtype_t want, double v, int reject_nonfinite, char *why,
                            size_t whylen)
{
    val_t x = {2, 0, 0, v};
    return store(dst, want, x, reject_nonfinite, why, whylen);
}

/* Is the stored type the same as want, bit for bit? */
static int same_type(hpml__io_stype_t t, hpml_dtype_t want)
{
    switch (t) {
    case IO_I8: return want == HPML_I8;
    case IO_U8: return want == HPML_U8;
    case IO_I32: return want == HPML_I32;
    case IO_I64: return want == HPML_I64;
    case IO_F32: return want == HPML_F32;
    case IO_F64: return want == HPML_F64;
    default: return 0;
    }
}

int hpml__io_is_copy(hpml__io_elem_t el, hpml_dtype_t want)
{
    return same_type(el.type, want) &&
           (hpml__io_stype_size(el.type) == 1 || el.big_endian == HOST_BIG_ENDIAN);
}

/* Is any element in [0, n) NaN/Inf? Branch-free over the exponent bits so it vectorises:
 * a scan over a freshly read block must cost little next to the read itself. */
static int any_nonfinite(const unsigned char *s, hpml_dtype_t want, size_t n)
{
    size_t i;
    int hit = 0;

    if (want == HPML_F32) {
        for (i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, s + 4 * i, 4);
            hit |= (u & 0x7f800000u) == 0x7f800000u;
        }
    } else {
        for (i = 0; i < n; i++) {
            uint64_t u;
            memcpy(&u, s + 8 * i, 8);
            hit |= (u & 0x7ff0000000000000u) == 0x7ff0000000000000u;
        }
    }
    return hit;
}

int hpml__io_check_finite(const void *p, hpml_dtype_t want, size_t n, size_t *bad, char *why,
                          size_t whylen)
{
    const unsigned char *s = p;
    size_t i, es = want == HPML_F32 ? 4 : 8, blk = 4096, b0;

    if (want != HPML_F32 && want != HPML_F64)
        return 0;
    for (b0 = 0; b0 < n; b0 += blk) {
        size_t nb = n - b0 < blk ? n - b0 : blk;
        if (!any_nonfinite(s + b0 * es, want, nb))
            continue;
        for (i = b0; i < b0 + nb; i++) {
            double x;
            if (want == HPML_F32) {
                float f;
                memcpy(&f, s + i * 4, 4);
                x = f;
            } else {
                memcpy(&x, s + i * 8, 8);
            }
            if (!isfinite(x)) {
                *bad = i;
                snprintf(why, whylen, "is %s", nonfinite_text(x));
                return HPML_ERR_NUMERIC;
            }
        }
    }
    return 0;
}

int hpml__io_convert(void *dst, hpml_dtype_t want, size_t dst_stride, const void *src,
                     hpml__io_elem_t el, size_t n, int reject_nonfinite, size_t *bad, char *why,
                     size_t whylen)
{
    const unsigned char *s = src;
    unsigned char *d = dst;
    size_t es = hpml__io_stype_size(el.type), ws = hpml_dtype_size(want), i;
    int swap = es > 1 && el.big_endian != HOST_BIG_ENDIAN;

    if (!swap && same_type(el.type, want)) {
        if (dst_stride == 1)
            memcpy(d, s, n * es);
        else
            for (i = 0; i < n; i++)
                memcpy(d + i * dst_stride * ws, s + i * es, es);
        return reject_nonfinite ? hpml__io_check_finite(s, want, n, bad, why, whylen) : 0;
    }
    if (!swap && dst_stride == 1 && !reject_nonfinite) {
        /* Loops the compiler can vectorise for the conversions datasets need most. */
        if (el.type == IO_U8 && want == HPML_F32) {
            float *o = dst;
            for (i = 0; i < n; i++)
                o[i] = (float)s[i];
            return 0;
        }
        if (el.type == IO_U8 && want == HPML_F64) {
            double *o = dst;
            for (i = 0; i < n; i++)
                o[i] = (double)s[i];
            return 0;
        }
        if (el.type == IO_F32 && want == HPML_F64) {
            double *o = dst;
            for (i = 0; i < n; i++) {
                float f;
                memcpy(&f, s + 4 * i, 4);
                o[i] = f;
            }
            return 0;
        }
    }
    for (i = 0; i < n; i++) {
        val_t v = load(s + i * es, el.type, swap);
        int rc = store(d + i * dst_stride * ws, want, v, reject_nonfinite, why, whylen);
        if (rc != 0) {
            *bad = i;
            return rc;
        }
    }
    return 0;
}
