/*
 * Validation data that never depends on integer wrap-around or saturation: every input
 * is a small positive integer and every sum over the ranks stays at or below 120, which
 * is exact in i8, u8, bf16 (8 significant bits), f16 and wider types. OMB's char
 * validation instead relies on 8-bit wrap-around, which Open MPI's saturating AVX
 * kernels do not do.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "bench/bench_internal.h"

/* Inputs cycle through 1..m with m*p <= 120, so a sum over p ranks is <= 120. */
static size_t period(int p)
{
    size_t m = (size_t)(120 / (p > 0 ? p : 1));

    return m > 0 ? m : 1;
}

double hpml__bench_value(const bench_ctx_t *c, int r, size_t i)
{
    return (double)(((size_t)r + i) % period(c->size) + 1);
}

double hpml__bench_sum(const bench_ctx_t *c, size_t i)
{
    double s = 0;

    for (int r = 0; r < c->size; r++)
        s += hpml__bench_value(c, r, i);
    return s;
}

void hpml__bench_set(void *buf, hpml_dtype_t dt, size_t i, double v)
{
    switch (dt) {
    case HPML_F32: ((float *)buf)[i] = (float)v; break;
    case HPML_F64: ((double *)buf)[i] = v; break;
    case HPML_F16: ((uint16_t *)buf)[i] = hpml_f32_to_f16((float)v); break;
    case HPML_BF16: ((uint16_t *)buf)[i] = hpml_f32_to_bf16((float)v); break;
    case HPML_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case HPML_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case HPML_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case HPML_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
}

double hpml__bench_get(const void *buf, hpml_dtype_t dt, size_t i)
{
    switch (dt) {
    case HPML_F32: return ((const float *)buf)[i];
    case HPML_F64: return ((const double *)buf)[i];
    case HPML_F16: return hpml_f16_to_f32(((const uint16_t *)buf)[i]);
    case HPML_BF16: return hpml_bf16_to_f32(((const uint16_t *)buf)[i]);
    case HPML_I8: return ((const int8_t *)buf)[i];
    case HPML_U8: return ((const uint8_t *)buf)[i];
    case HPML_I32: return ((const int32_t *)buf)[i];
    case HPML_I64: return (double)((const int64_t *)buf)[i];
    default: return 0;
    }
}

void hpml__bench_fill_rank(const bench_ctx_t *c, void *buf, int r, size_t offset, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hpml__bench_set(buf, c->dtype, i, hpml__bench_value(c, r, offset + i));
}

/* MPI has no fp16/bf16 type: native MPI reduces them as 16-bit words with a user op
 * that calls hpml's kernels (what an MPI user would have to write). */
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    hpml_reduce_local(inout, in, (size_t)*len, HPML_F16, HPML_SUM);
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    hpml_reduce_local(inout, in, (size_t)*len, HPML_BF16, HPML_SUM);
}

int hpml__bench_mpi_type(hpml_dtype_t dt, MPI_Datatype *type, MPI_Op *sum)
{
    *sum = MPI_SUM;
    switch (dt) {
    case HPML_F32: *type = MPI_FLOAT; return 0;
    case HPML_F64: *type = MPI_DOUBLE; return 0;
    case HPML_I8: /* OMB's default mpi_char, as the record's label says, where char is signed */
        *type = CHAR_MIN < 0 ? MPI_CHAR : MPI_SIGNED_CHAR;
        return 0;
    case HPML_U8: *type = MPI_UNSIGNED_CHAR; return 0;
    case HPML_I32: /* OMB's mpi_int, as the label says, where int is 32 bits */
        *type = sizeof(int) == 4 ? MPI_INT : MPI_INT32_T;
        return 0;
    case HPML_I64: *type = MPI_INT64_T; return 0;
    case HPML_F16:
    case HPML_BF16:
        *type = MPI_UINT16_T;
        return MPI_Op_create(dt == HPML_F16 ? sum_f16 : sum_bf16, 1, sum) == MPI_SUCCESS
                   ? 0
                   : HPML_ERR_MPI;
    default: return HPML_ERR_INVAL;
    }
}

void hpml__bench_mpi_type_free(MPI_Op *sum)
{
    if (*sum != MPI_SUM && *sum != MPI_OP_NULL)
        MPI_Op_free(sum);
    *sum = MPI_OP_NULL;
}

double hpml__bench_one(int p)
{
    (void)p;
    return 1.0;
}

double hpml__bench_ranks(int p)
{
    return (double)p;
}

double hpml__bench_ring_factor(int p)
{
    return p > 0 ? (double)(p - 1) / p : 0;
}

int hpml__bench_everyone(const bench_ctx_t *c)
{
    (void)c;
    return 1;
}

int hpml__bench_rank0(const bench_ctx_t *c)
{
    return c->rank == 0;
}
