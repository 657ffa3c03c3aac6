/*
 * RNG: determinism, independent streams, range and rough uniformity of below(),
 * uniform in [0, 1), normal mean and variance. Fixed seeds, so every run draws the
 * same numbers and the loose statistical bounds cannot flake.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hpml/core.h"

static void test_deterministic(void **state)
{
    (void)state;
    hpml_rng_t a, b;
    hpml_rng_init(&a, 42, 3);
    hpml_rng_init(&b, 42, 3);
    for (int i = 0; i < 1000; i++)
        assert_true(hpml_rng_u64(&a) == hpml_rng_u64(&b));
    /* The state is plain data: a copy continues identically (checkpointing). */
    hpml_rng_t c = a;
    for (int i = 0; i < 100; i++)
        assert_true(hpml_rng_uniform(&a) == hpml_rng_uniform(&c));
    /* xoshiro256** itself, against the reference implementation's output for the state
     * {1, 2, 3, 4} (Blackman & Vigna's xoshiro256starstar.c). */
    hpml_rng_t d = {{1, 2, 3, 4}};
    assert_true(hpml_rng_u64(&d) == 11520ull);
    assert_true(hpml_rng_u64(&d) == 0ull);
    assert_true(hpml_rng_u64(&d) == 1509978240ull);
    assert_true(hpml_rng_u64(&d) == 1215971899390074240ull);
    /* Pinned seeding, so a change (which would change every seeded result downstream,
     * and break resumed checkpoints) is noticed. */
    hpml_rng_init(&d, 0, 0);
    assert_true(hpml_rng_u64(&d) == 18407285820426800678ull);
}

static void test_streams_differ(void **state)
{
    (void)state;
    enum { S = 16, K = 64 };
    static uint64_t v[S][K];
    /* Streams 0..S-1 of one seed, and seed/stream swapped pairs, share no values. */
    for (int s = 0; s < S; s++) {
        hpml_rng_t r;
        hpml_rng_init(&r, 1234, (uint64_t)s);
        for (int k = 0; k < K; k++)
            v[s][k] = hpml_rng_u64(&r);
    }
    for (int s = 0; s < S; s++)
        for (int t = s + 1; t < S; t++)
            for (int k = 0; k < K; k++)
                for (int j = 0; j < K; j++)
                    assert_true(v[s][k] != v[t][j]);
    hpml_rng_t x, y;
    hpml_rng_init(&x, 1, 0);
    hpml_rng_init(&y, 0, 1);
    assert_true(hpml_rng_u64(&x) != hpml_rng_u64(&y));
    hpml_rng_init(&x, 5, 7);
    hpml_rng_init(&y, 6, 7);
    assert_true(hpml_rng_u64(&x) != hpml_rng_u64(&y));
    /* Bits look balanced within a stream: about half of 64*10000 bits set. */
    hpml_rng_init(&x, 77, 0);
    long ones = 0;
    for (int i = 0; i < 10000; i++)
        ones += __builtin_popcountll(hpml_rng_u64(&x));
    assert_true(labs(ones - 320000) < 4000); /* ~10 sigma */
}

static void test_below(void **state)
{
    (void)state;
    hpml_rng_t r;
    hpml_rng_init(&r, 9, 1);
    assert_true(hpml_rng_below(&r, 1) == 0);
    /* n = 6: chi-square over 60000 draws, 5 degrees of freedom. */
    enum { N = 60000 };
    long cnt[6] = {0};
    for (int i = 0; i < N; i++) {
        uint64_t k = hpml_rng_below(&r, 6);
        assert_true(k < 6);
        cnt[k]++;
    }
    double chi = 0;
    for (int k = 0; k < 6; k++)
        chi += (cnt[k] - N / 6.0) * (cnt[k] - N / 6.0) / (N / 6.0);
    assert_true(chi < 30.0); /* p ~ 1e-5 */
    /* A bound where modulo reduction would be visibly biased: n = 3 * 2^62. Values
     * below 2^62 would come up twice as often under `x % n`; unbiased, a third. */
    uint64_t n = 3ull << 62;
    long low = 0;
    for (int i = 0; i < N; i++) {
        uint64_t k = hpml_rng_below(&r, n);
        assert_true(k < n);
        low += k < (1ull << 62);
    }
    assert_true(fabs(low / (double)N - 1.0 / 3) < 0.01);
    /* Huge and odd bounds stay in range. */
    for (int i = 0; i < 1000; i++) {
        assert_true(hpml_rng_below(&r, UINT64_MAX) < UINT64_MAX);
        assert_true(hpml_rng_below(&r, 1000003) < 1000003);
    }
}

static void test_uniform(void **state)
{
    (void)state;
    hpml_rng_t r;
    hpml_rng_init(&r, 2024, 5);
    enum { N = 200000 };
    double sum = 0, sum2 = 0;
    long bins[10] = {0};
    for (int i = 0; i < N; i++) {
        double u = hpml_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
        sum2 += u * u;
        bins[(int)(u * 10)]++;
    }
    double mean = sum / N, var = sum2 / N - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.005);
    assert_true(fabs(var - 1.0 / 12) < 0.002);
    for (int k = 0; k < 10; k++)
        assert_true(labs(bins[k] - N / 10) < 1000);
}

static void test_normal(void **state)
{
    (void)state;
    hpml_rng_t r;
    hpml_rng_init(&r, 31337, 2);
    enum { N = 200000 };
    double sum = 0, sum2 = 0, sum4 = 0;
    long within1 = 0;
    for (int i = 0; i < N; i++) {
        double z = hpml_rng_normal(&r);
        assert_true(isfinite(z));
        sum += z;
        sum2 += z * z;
        sum4 += z * z * z * z;
        within1 += fabs(z) < 1.0;
    }
    double mean = sum / N, var = sum2 / N - mean * mean;
    assert_true(fabs(mean) < 0.015);
    assert_true(fabs(var - 1.0) < 0.02);
    assert_true(fabs(sum4 / N - 3.0) < 0.15);                /* kurtosis of a normal */
    assert_true(fabs(within1 / (double)N - 0.6827) < 0.005); /* 68% within one sigma */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_streams_differ),
        cmocka_unit_test(test_below),         cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_normal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
