/*
 * Deterministic RNG: xoshiro256** (Blackman & Vigna, 2018) seeded by splitmix64.
 * Streams: the state is seeded from splitmix64(seed) mixed with splitmix64 of the
 * stream id, so every (seed, stream) pair starts at an unrelated point of the 2^256
 * period; with 2^64 streams of at most 2^64 draws each, overlap is negligible.
 */
#include <math.h>

#include "hpml/core.h"

/* GCC and Clang's 128-bit integer; __extension__ keeps -Wpedantic quiet. */
__extension__ typedef unsigned __int128 u128;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void hpml_rng_init(hpml_rng_t *rng, uint64_t seed, uint64_t stream)
{
    /* Hash the stream id first so that nearby (seed, stream) pairs such as (1, 0) and
     * (0, 1) do not feed splitmix64 the same starting value. */
    uint64_t t = stream ^ 0x6a09e667f3bcc909ull;
    uint64_t x = seed ^ splitmix64(&t);
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
    /* xoshiro must not start from the all-zero state (splitmix64 makes that
     * astronomically unlikely, but keep the guarantee). */
    if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0)
        rng->s[0] = 1;
}

uint64_t hpml_rng_u64(hpml_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double hpml_rng_uniform(hpml_rng_t *rng)
{
    return (double)(hpml_rng_u64(rng) >> 11) * 0x1.0p-53;
}

uint64_t hpml_rng_below(hpml_rng_t *rng, uint64_t n)
{
    if (n == 0)
        return 0; /* contract says n > 0; answer something harmless */
    /* Lemire's multiply-shift with rejection (2019): unbiased, usually one draw. */
    uint64_t x = hpml_rng_u64(rng);
    u128 m = (u128)x * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t thresh = (0 - n) % n; /* 2^64 mod n */
        while (lo < thresh) {
            x = hpml_rng_u64(rng);
            m = (u128)x * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double hpml_rng_normal(hpml_rng_t *rng)
{
    /* Box-Muller, one value per call (the second is discarded so the state stays a
     * plain 4-word copyable struct). 1 - u lies in (0, 1], so log never sees 0. */
    double u1 = 1.0 - hpml_rng_uniform(rng);
    double u2 = hpml_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}
