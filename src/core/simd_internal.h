/*
 * Private to the core layer: which SIMD path is in use, and the block conversion
 * routines of both paths, so the reduction kernels can call the path they were
 * dispatched to without going through the public dispatcher again.
 */
#ifndef HPML_CORE_SIMD_INTERNAL_H
#define HPML_CORE_SIMD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/core.h"

/* The resolved path (HPML_SIMD_PORTABLE or HPML_SIMD_AVX2; never AUTO). Cheap: one
 * relaxed atomic load after the first call. */
hpml_simd_t hpml__simd_path(void);

/* 1 when the ML kernels may use AVX-512 (path AVX2 chosen by AUTO, CPU with AVX-512F);
 * 0 under HPML_SIMD=avx2|portable or after hpml_simd_select(AVX2|PORTABLE). */
int hpml__simd_avx512(void);

/* Portable (plain C, bit-exact RNE) array conversions. */
void hpml__f16_to_f32_portable(float *dst, const uint16_t *src, size_t n);
void hpml__f32_to_f16_portable(uint16_t *dst, const float *src, size_t n);
void hpml__bf16_to_f32_portable(float *dst, const uint16_t *src, size_t n);
void hpml__f32_to_bf16_portable(uint16_t *dst, const float *src, size_t n);

/* F16C/AVX2 array conversions; only call when hpml_cpu_has_avx2/f16c/fma are all 1. */
void hpml__f16_to_f32_avx2(float *dst, const uint16_t *src, size_t n);
void hpml__f32_to_f16_avx2(uint16_t *dst, const float *src, size_t n);
void hpml__bf16_to_f32_avx2(float *dst, const uint16_t *src, size_t n);
void hpml__f32_to_bf16_avx2(uint16_t *dst, const float *src, size_t n);

#endif /* HPML_CORE_SIMD_INTERNAL_H */
