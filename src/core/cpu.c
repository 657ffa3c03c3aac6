/*
 * Run-time CPU feature detection and the choice between the portable and the
 * F16C/AVX2 implementations of the fp16/bf16 conversions and reduction kernels.
 * The choice is made once (AUTO: best available; HPML_SIMD=portable|avx2|auto in the
 * environment overrides it) and can be forced by hpml_simd_select() for tests.
 * The ML kernels also have AVX-512 forms: they are used only under AUTO, so that
 * HPML_SIMD=avx2 (or hpml_simd_select(HPML_SIMD_AVX2)) runs the AVX2 ones on any CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __clang__
#include <cpuid.h>
#endif

#include "core/simd_internal.h"
#include "hpml/core.h"
#include "core/settings_internal.h"

/* 0 = not resolved yet; otherwise an hpml_simd_t (PORTABLE or AVX2). Accessed with
 * relaxed atomics: every thread computes the same value, so a race on the first call
 * only repeats work. */
static int simd_path;
/* 0 = not resolved yet; 1 = the ML kernels stay at AVX2 or below; 2 = they may use
 * AVX-512 (AUTO on a CPU with AVX-512F). Same access rules as simd_path. */
static int simd_wide;

int hpml_cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? 1 : 0;
}

int hpml_cpu_has_f16c(void)
{
#ifdef __clang__
    /* clang 14 (Debian 12's, used by make fuzz) has no "f16c" for __builtin_cpu_supports:
     * the CPUID bit itself (leaf 1, ECX bit 29). */
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u) ? 1 : 0;
#else
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") ? 1 : 0;
#endif
}

int hpml_cpu_has_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") ? 1 : 0;
}

int hpml_cpu_has_avx512f(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 1 : 0;
}

static int avx2_usable(void)
{
    return hpml_cpu_has_avx2() && hpml_cpu_has_f16c() && hpml_cpu_has_fma();
}

static hpml_simd_t resolve_auto(void)
{
    uint64_t v = 0; /* auto|avx2|portable */
    hpml_simd_t p;

    if (!hpml__setting_env(HPML__S_SIMD, &v))
        v = 0;
    /* "avx2" on a CPU without it falls back rather than crashing. */
    p = v != 2 && avx2_usable() ? HPML_SIMD_AVX2 : HPML_SIMD_PORTABLE;
    __atomic_store_n(&simd_wide, p == HPML_SIMD_AVX2 && v == 0 && hpml_cpu_has_avx512f() ? 2 : 1,
                     __ATOMIC_RELAXED);
    return p;
}

hpml_simd_t hpml__simd_path(void)
{
    int p = __atomic_load_n(&simd_path, __ATOMIC_RELAXED);

    if (p == 0) {
        p = (int)resolve_auto();
        __atomic_store_n(&simd_path, p, __ATOMIC_RELAXED);
    }
    return (hpml_simd_t)p;
}

int hpml__simd_avx512(void)
{
    (void)hpml__simd_path();
    return __atomic_load_n(&simd_wide, __ATOMIC_RELAXED) == 2;
}

int hpml_simd_select(hpml_simd_t which)
{
    switch (which) {
    case HPML_SIMD_AUTO:
        __atomic_store_n(&simd_path, (int)resolve_auto(), __ATOMIC_RELAXED);
        return 0;
    case HPML_SIMD_PORTABLE:
        __atomic_store_n(&simd_path, (int)HPML_SIMD_PORTABLE, __ATOMIC_RELAXED);
        __atomic_store_n(&simd_wide, 1, __ATOMIC_RELAXED);
        return 0;
    case HPML_SIMD_AVX2:
        if (!avx2_usable())
            return hpml_set_error(HPML_ERR_UNSUPPORTED, "this CPU lacks AVX2, F16C or FMA");
        __atomic_store_n(&simd_path, (int)HPML_SIMD_AVX2, __ATOMIC_RELAXED);
        __atomic_store_n(&simd_wide, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return hpml_set_error(HPML_ERR_INVAL, "unknown SIMD path %d", (int)which);
}

hpml_simd_t hpml_simd_active(void)
{
    return hpml__simd_path();
}

/* The size of the cache with the highest level that sysfs lists for CPU 0, as lscpu
 * reads it. glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) comes from CPUID, which in a KVM guest
 * can describe the host: on this project's machines it says 320 MiB where the two vCPUs
 * share 32 MiB. */
size_t hpml_cpu_llc_bytes(void)
{
    size_t best = 0;
    int best_level = 0;

    for (int i = 0; i < 8; i++) {
        char path[96], buf[32], *end;
        int level = 0;
        unsigned long long v;
        FILE *f;

        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if ((f = fopen(path, "r")) == NULL)
            break;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        if (level <= best_level)
            continue;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(buf, sizeof(buf), f) != NULL) {
            v = strtoull(buf, &end, 10);
            v <<= *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
            if (v > 0)
                best = (size_t)v, best_level = level;
        }
        fclose(f);
    }
    return best;
}
