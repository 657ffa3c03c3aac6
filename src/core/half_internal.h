/*
 * Private to the core layer: eight-lane bf16 <-> f32 conversions for the AVX2 path,
 * shared by the array converters (half.c) and the fused fp16/bf16 reduction kernels
 * (reduce.c). Only call them from functions compiled with HPML_AVX2_TARGET.
 */
#ifndef HPML_CORE_HALF_INTERNAL_H
#define HPML_CORE_HALF_INTERNAL_H

#include <immintrin.h>

#define HPML_AVX2_TARGET __attribute__((target("avx2,f16c,fma")))

/* bf16 -> f32 is a shift; a NaN also gets its quiet bit, as in the portable path. */
HPML_AVX2_TARGET static inline __m256 hpml__bf16x8_to_f32(__m128i h)
{
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    /* |u| fits in 31 bits, so the signed compare is an unsigned one. */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
    return _mm256_castsi256_ps(_mm256_or_si256(u, _mm256_and_si256(nan, quiet)));
}

HPML_AVX2_TARGET static inline __m128i hpml__f32x8_to_bf16(__m256 f)
{
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x0040);
    __m256i x = _mm256_castps_si256(f);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(hi, one)));
    r = _mm256_srli_epi32(r, 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absmask), inf);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
    /* All lanes are <= 0xffff, so the unsigned-saturating pack is exact; it packs within
     * 128-bit halves, hence the cross-lane permute. */
    __m256i p = _mm256_packus_epi32(r, r);
    p = _mm256_permute4x64_epi64(p, 0x08); /* qwords 0 and 2 to the low half */
    return _mm256_castsi256_si128(p);
}

#endif /* HPML_CORE_HALF_INTERNAL_H */
