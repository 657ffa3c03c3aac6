/*
 * nn engine unit tests: every layer's backward against central finite differences of the
 * loss (accumulated in double), the spec parser's errors, optimizers, model files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "hpml/nn.h"
#include "nn/nn_internal.h"

/* Conv layers use the direct kernel where usable (1) or always im2col + GEMM (0). */
static int use_direct = 1;

/* Loss of the model on (x, y) in double: sum of per-sample losses * scale. */
static double loss_at(hpml_model_t *m, const float *x, size_t n, const int32_t *y,
                      const uint64_t *ids, double scale)
{
    const float *z;
    double l;
    size_t c;

    assert_int_equal(hpml_model_forward(m, x, n, 1, ids, 77, &z), 0);
    assert_int_equal(hpml_model_loss(m, y, &l, &c), 0);
    return l * scale;
}

static void gradcheck(const char *spec, int c, int h, int w, size_t n)
{
    hpml_model_t *m = NULL;
    size_t in, np, classes, bad = 0, checked = 0;
    float *x;
    int32_t *y;
    uint64_t *ids;
    float *g;
    const float *z;
    hpml_rng_t rng;
    double ls;
    size_t cor;
    const double scale = 1.0 / (double)n;

    assert_int_equal(hpml_model_create(spec, c, h, w, &m), 0);
    hpml__nn_set_conv_direct(m, use_direct);
    hpml_model_init(m, 42);
    in = hpml_model_input_size(m);
    np = hpml_model_num_params(m);
    classes = hpml_model_output_size(m);
    x = malloc(n * in * sizeof(float));
    y = malloc(n * sizeof(int32_t));
    ids = malloc(n * sizeof(uint64_t));
    g = malloc(np * sizeof(float));
    hpml_rng_init(&rng, 5, 0);
    for (size_t i = 0; i < n * in; i++)
        x[i] = (float)hpml_rng_normal(&rng);
    for (size_t i = 0; i < n; i++) {
        y[i] = (int32_t)hpml_rng_below(&rng, classes);
        ids[i] = 1000 + i;
    }
    /* Biases start at zero; perturb them so ReLU kinks are not hit exactly. */
    for (size_t i = 0; i < np; i++)
        hpml_model_params(m)[i] += (float)(0.05 * hpml_rng_normal(&rng));
    assert_int_equal(hpml_model_forward(m, x, n, 1, ids, 77, &z), 0);
    assert_int_equal(hpml_model_backward(m, y, (float)scale, NULL, NULL, &ls, &cor), 0);
    memcpy(g, hpml_model_grads(m), np * sizeof(float));
    for (size_t k = 0; k < 120 && k < np; k++) {
        size_t i = np <= 120 ? k : (size_t)hpml_rng_below(&rng, np);
        float *p = &hpml_model_params(m)[i], save = *p;
        const float eps = 2e-3f;
        double lp, lm, l0, num, err, e1, e2;
        *p = save + eps;
        lp = loss_at(m, x, n, y, ids, scale);
        *p = save - eps;
        lm = loss_at(m, x, n, y, ids, scale);
        *p = save;
        l0 = loss_at(m, x, n, y, ids, scale);
        num = (lp - lm) / (2.0 * (double)eps);
        err = fabs(num - g[i]) / fmax(1e-3, fabs(num) + fabs(g[i]));
        /* Next to a ReLU or max-pool kink the gradient is one of the one-sided
         * derivatives; accept it then (with a looser tolerance: they are O(eps)). */
        e1 = fabs((lp - l0) / eps - g[i]) / fmax(1e-3, fabs(g[i]));
        e2 = fabs((l0 - lm) / eps - g[i]) / fmax(1e-3, fabs(g[i]));
        if (e1 < 0.1 || e2 < 0.1)
            err = fmin(err, 0.0);
        checked++;
        if (err > 2e-2) {
            bad++;
            fprintf(stderr, "%s: param %zu analytic %.6g numeric %.6g\n", spec, i, g[i], num);
        }
    }
    /* A kink of ReLU or max-pool inside [-eps, eps] can spoil a handful of points. */
    assert_true(bad <= checked / 50);
    free(x);
    free(y);
    free(ids);
    free(g);
    hpml_model_destroy(m);
}

static void test_grad_dense(void **state)
{
    (void)state;
    gradcheck("dense 7 relu | dense 5 | relu | dense 3", 1, 1, 6, 4);
}

static void test_grad_conv(void **state)
{
    (void)state;
    gradcheck("conv 3 3x3 pad1 relu | pool 2 | dense 4", 2, 6, 6, 3);
    gradcheck("conv 4 3 s2 relu | conv 2 2x2 | flatten | dense 3", 1, 7, 7, 2);
    use_direct = 0; /* the same through im2col + GEMM */
    gradcheck("conv 3 3x3 pad1 relu | pool 2 | dense 4", 2, 6, 6, 3);
    gradcheck("conv 4 3 s2 relu | conv 2 2x2 | flatten | dense 3", 1, 7, 7, 2);
    use_direct = 1;
}

/* The direct convolution against im2col + GEMM on the same model and batch: outputs and
 * every gradient agree to rounding; then finite differences on each path alone. */
static void compare_conv_paths(const char *spec, int c, int h, int w, size_t n)
{
    hpml_model_t *m = NULL;
    size_t in, np, classes;
    float *x, *z0, *g0;
    int32_t *y;
    const float *z;
    hpml_rng_t rng;
    double l0, l1;
    size_t c0, c1;

    assert_int_equal(hpml_model_create(spec, c, h, w, &m), 0);
    hpml_model_init(m, 3);
    in = hpml_model_input_size(m);
    np = hpml_model_num_params(m);
    classes = hpml_model_output_size(m);
    x = malloc(n * in * sizeof(float));
    y = malloc(n * sizeof(int32_t));
    z0 = malloc(n * classes * sizeof(float));
    g0 = malloc(np * sizeof(float));
    hpml_rng_init(&rng, 9, 0);
    for (size_t i = 0; i < n * in; i++)
        x[i] = (float)hpml_rng_normal(&rng);
    for (size_t i = 0; i < n; i++)
        y[i] = (int32_t)hpml_rng_below(&rng, classes);
    for (size_t i = 0; i < np; i++)
        hpml_model_params(m)[i] += (float)(0.05 * hpml_rng_normal(&rng));
    hpml__nn_set_conv_direct(m, 0);
    assert_int_equal(hpml_model_forward(m, x, n, 1, NULL, 1, &z), 0);
    memcpy(z0, z, n * classes * sizeof(float));
    assert_int_equal(hpml_model_backward(m, y, 0.5f, NULL, NULL, &l0, &c0), 0);
    memcpy(g0, hpml_model_grads(m), np * sizeof(float));
    hpml__nn_set_conv_direct(m, 1);
    assert_int_equal(hpml_model_forward(m, x, n, 1, NULL, 1, &z), 0);
    assert_int_equal(hpml_model_backward(m, y, 0.5f, NULL, NULL, &l1, &c1), 0);
    for (size_t i = 0; i < n * classes; i++)
        if (fabsf(z[i] - z0[i]) > 1e-4f * (1.0f + fabsf(z0[i])))
            fail_msg("%s: logit %zu direct %.7g im2col %.7g", spec, i, z[i], z0[i]);
    for (size_t i = 0; i < np; i++) {
        float gd = hpml_model_grads(m)[i];
        if (fabsf(gd - g0[i]) > 1e-4f * (1.0f + fabsf(g0[i])))
            fail_msg("%s: grad %zu direct %.7g im2col %.7g", spec, i, gd, g0[i]);
    }
    assert_true(fabs(l0 - l1) < 1e-4 * (1.0 + fabs(l0)));
    free(x);
    free(y);
    free(z0);
    free(g0);
    hpml_model_destroy(m);
}

static void test_conv_direct(void **state)
{
    static const struct {
        const char *spec;
        int c, h, w;
    } cases[] = {
        /* LeNet's first layer: 28 wide = 3 whole vectors + a masked one */
        {"conv 6 5x5 pad2 relu | pool 2 | dense 4", 1, 28, 28},
        /* 7 channels (a block of 6 and one), 2 input channels, no ReLU, odd sizes; the
         * direct layer second, so its dx is needed */
        {"conv 2 3x3 relu | conv 7 3x3 pad1 | flatten | dense 3", 1, 9, 19},
        {"conv 3 2x2 pad1 relu | conv 5 4x4 relu | dense 2", 2, 6, 21},
    };
    (void)state;
    if (!hpml_cpu_has_avx2() || !hpml_cpu_has_fma() || hpml_simd_active() != HPML_SIMD_AVX2)
        skip();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        compare_conv_paths(cases[i].spec, cases[i].c, cases[i].h, cases[i].w, 3);
        use_direct = 1;
        gradcheck(cases[i].spec, cases[i].c, cases[i].h, cases[i].w, 2);
        use_direct = 0;
        gradcheck(cases[i].spec, cases[i].c, cases[i].h, cases[i].w, 2);
        use_direct = 1;
    }
}

static void test_grad_pool_dropout(void **state)
{
    (void)state;
    gradcheck("conv 3 5x5 pad2 relu | pool 2 s2 | dropout 0.3 | dense 6 relu | dense 4", 1, 8, 8,
              3);
    gradcheck("pool 3 s2 | dense 5 relu | dropout 0.5 | dense 2", 2, 7, 7, 3);
}

static void expect_spec_error(const char *spec, const char *needle)
{
    hpml_model_t *m = NULL;
    int err = hpml_model_create(spec, 1, 28, 28, &m);

    assert_int_equal(err, HPML_ERR_FORMAT);
    assert_null(m);
    if (strstr(hpml_last_error(), needle) == NULL)
        fail_msg("spec '%s': message '%s' lacks '%s'", spec, hpml_last_error(), needle);
}

static void test_spec(void **state)
{
    hpml_model_t *m = NULL;
    (void)state;
    assert_int_equal(hpml_model_create("conv 32 5x5 pad2 relu | pool 2 | conv 64 5x5 relu | "
                                       "pool 2 | dense 128 relu | dense 10",
                                       1, 28, 28, &m),
                     0);
    assert_int_equal(hpml_model_output_size(m), 10);
    /* 32*25+32 + 64*32*25+64 + 128*64*5*5+128 + 1290 */
    assert_int_equal(hpml_model_num_params(m), 832 + 51264 + 204928 + 1290);
    hpml_model_destroy(m);
    expect_spec_error("conv 32 5y5 relu", "column 9");
    expect_spec_error("conv 32 5y5 relu", "kernel size");
    expect_spec_error("dense 128 relu | dnse 10", "column 18");
    expect_spec_error("dense 128 relu | dnse 10", "expected a layer");
    expect_spec_error("dense x", "number of outputs");
    expect_spec_error("dense 10 |", "expected a layer after '|'");
    expect_spec_error("pool 2 | pool 2 | pool 2 | pool 2 | pool 2", "window");
    expect_spec_error("dropout 1.5", "probability");
    expect_spec_error("dense 10 sigmoid", "expected 'relu'");
    expect_spec_error("", "expected a layer");
    /* Sizes that would wrap an int or size_t are errors, not smaller models. */
    assert_int_equal(hpml_model_create("conv 1 1 pad999999999", 1, 200000000, 1, &m),
                     HPML_ERR_FORMAT);
    assert_non_null(strstr(hpml_last_error(), "pads its 200000000x1 input beyond 2147483647"));
    expect_spec_error("conv 999999999 1 | flatten", "more than 2147483647 values per sample");
    expect_spec_error("conv 3 999999 pad999999", "more than 2147483647 values per sample in its");
    expect_spec_error("dense 999999999 | dense 999999999 | dense 2", "parameters");
    assert_int_equal(hpml_model_create("dense 1", 65536, 65536, 2, &m), HPML_ERR_INVAL);
    assert_non_null(strstr(hpml_last_error(), "65536x65536x2 has more than"));
}

/* The canonical spec (saved in model files) describes the same model: never cut short,
 * and a dropout probability kept exactly. */
static void test_spec_canonical(void **state)
{
    char spec[800] = "";
    hpml_model_t *m = NULL, *m2 = NULL;
    (void)state;
    for (int i = 0; i < 40; i++)
        strcat(spec, i ? "|conv 1 1" : "conv 1 1"); /* each layer twice as long canonical */
    strcat(spec, "| dropout 0.9999999 | dense 3");
    assert_int_equal(hpml_model_create(spec, 1, 4, 4, &m), 0);
    assert_int_equal(hpml_model_create(hpml_model_spec(m), 1, 4, 4, &m2), 0);
    assert_string_equal(hpml_model_spec(m2), hpml_model_spec(m));
    assert_int_equal(hpml_model_num_params(m2), hpml_model_num_params(m));
    assert_non_null(strstr(hpml_model_spec(m), "dropout 0.99999988"));
    hpml_model_destroy(m);
    hpml_model_destroy(m2);
}

static void test_optim(void **state)
{
    hpml_opt_config_t c;
    hpml_optim_t *o = NULL;
    float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    (void)state;
    hpml_opt_config_default(&c);
    c.lr = 0.1;
    c.momentum = 0.9;
    assert_int_equal(hpml_optim_create(&c, 2, &o), 0);
    hpml_optim_step(o, w, g, c.lr); /* v = g */
    hpml_optim_step(o, w, g, c.lr); /* v = 0.9 g + g */
    assert_float_equal(w[0], 1.0f - 0.1f * 0.5f - 0.1f * 0.95f, 1e-6);
    hpml_optim_destroy(o);
    c.kind = HPML_OPT_ADAM;
    c.lr = 0.01;
    w[0] = 1.0f;
    assert_int_equal(hpml_optim_create(&c, 2, &o), 0);
    hpml_optim_step(o, w, g, c.lr); /* first Adam step moves by lr*sign(g) */
    assert_float_equal(w[0], 0.99f, 1e-5);
    hpml_optim_destroy(o);
    c.sched = HPML_SCHED_COSINE;
    c.lr = 1.0;
    assert_float_equal(hpml_opt_lr(&c, 50, 100, 10), 0.5, 1e-9);
    c.sched = HPML_SCHED_STEP;
    c.step_every = 2;
    c.step_gamma = 0.1;
    assert_float_equal(hpml_opt_lr(&c, 25, 100, 10), 0.1, 1e-9);
}

static void test_model_file(void **state)
{
    hpml_model_t *m = NULL, *m2 = NULL;
    char path[] = "/tmp/hpml_nn_model_XXXXXX";
    float mean, sd;
    FILE *f;
    int fd = mkstemp(path);
    (void)state;
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(hpml_model_create("conv 2 3x3 relu | pool 2 | dense 3", 1, 8, 8, &m), 0);
    hpml_model_init(m, 3);
    assert_int_equal(hpml_model_save(m, 0.25f, 0.5f, path), 0);
    assert_int_equal(hpml_model_load(path, &m2, &mean, &sd), 0);
    assert_float_equal(mean, 0.25f, 0);
    assert_memory_equal(hpml_model_params(m), hpml_model_params(m2),
                        hpml_model_num_params(m) * sizeof(float));
    hpml_model_destroy(m2);
    m2 = NULL;
    /* flip one byte in the middle */
    f = fopen(path, "r+b");
    fseek(f, 60, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    assert_int_equal(hpml_model_load(path, &m2, &mean, &sd), HPML_ERR_FORMAT);
    assert_non_null(strstr(hpml_last_error(), "corrupt"));
    /* truncate */
    assert_int_equal(truncate(path, 50), 0);
    assert_int_equal(hpml_model_load(path, &m2, &mean, &sd), HPML_ERR_FORMAT);
    unlink(path);
    hpml_model_destroy(m);
}

/* A model file as hpml_model_save writes it, with any header and parameters. */
static void write_model(const char *path, int32_t c, int32_t h, int32_t w, float mean, float sd,
                        const char *spec, uint64_t np, const float *params, size_t nwrite)
{
    uint32_t v = 1, sl = (uint32_t)strlen(spec), crc;
    int32_t shape[3] = {c, h, w};
    unsigned char *b = malloc(64 + sl + nwrite * 4), *p = b;
    FILE *f;

    assert_non_null(b);
    memcpy(p, "HPMLMODL", 8), p += 8;
    memcpy(p, &v, 4), p += 4;
    memcpy(p, shape, 12), p += 12;
    memcpy(p, &mean, 4), p += 4;
    memcpy(p, &sd, 4), p += 4;
    memcpy(p, &sl, 4), p += 4;
    memcpy(p, spec, sl), p += sl;
    memcpy(p, &np, 8), p += 8;
    memcpy(p, params, nwrite * 4), p += nwrite * 4;
    crc = (uint32_t)crc32(0, b, (uInt)(p - b));
    memcpy(p, &crc, 4), p += 4;
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)(p - b), f), (size_t)(p - b));
    fclose(f);
    free(b);
}

static void expect_load_error(const char *path, const char *needle)
{
    hpml_model_t *m = NULL;
    float mean, sd;
    int err = hpml_model_load(path, &m, &mean, &sd);

    if (err != HPML_ERR_FORMAT || m != NULL || strstr(hpml_last_error(), needle) == NULL ||
        strstr(hpml_last_error(), path) == NULL)
        fail_msg("%s: got %d '%s', expected HPML_ERR_FORMAT with '%s'", path, err,
                 hpml_last_error(), needle);
}

/* Model files with valid checksums but impossible contents: sizes that wrap, a spec
 * asking for more parameters than the file holds, NaN or Inf values. Each is refused
 * with a message naming the file, before the spec's parameters are allocated. */
static void test_model_file_checks(void **state)
{
    char dir[] = "/tmp/hpml_nn_checks_XXXXXX", path[256];
    float w[4] = {0.5f, -1.0f, 2.0f, 0.25f}, bad[4], mean, sd;
    hpml_model_t *m = NULL;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/m.hpml", dir);
    write_model(path, 1, 1, 3, 0.5f, 2.0f, "dense 1", 4, w, 4); /* 3 weights + 1 bias */
    assert_int_equal(hpml_model_load(path, &m, &mean, &sd), 0);
    assert_true(mean == 0.5f && sd == 2.0f);
    hpml_model_destroy(m);
    /* 4194304 * 2097152 * 2097152 = 2^64 values per sample, which wraps to 0. */
    write_model(path, 4194304, 2097152, 2097152, 0, 1, "dense 1", 1, w, 1);
    expect_load_error(path, "input shape 4194304x2097152x2097152 is not valid");
    write_model(path, 0, 1, 3, 0, 1, "dense 1", 4, w, 4);
    expect_load_error(path, "input shape 0x1x3 is not valid");
    /* 784e9 parameters claimed by the spec, 4 in the file: no 3 TB allocation first. */
    write_model(path, 1, 28, 28, 0, 1, "dense 999999999", 4, w, 4);
    expect_load_error(path, "holds 16 bytes for 4 parameters, its spec needs 784999999215");
    write_model(path, 1, 1, 3, 0, 1, "dense 1", 5, w, 4);
    expect_load_error(path, "holds 16 bytes for 5 parameters, its spec needs 4");
    write_model(path, 1, 1, 3, 0, 1, "dense 1 | bogus", 4, w, 4);
    expect_load_error(path, "m.hpml: model spec column 11: expected a layer");
    write_model(path, 1, 200000000, 1, 0, 1, "conv 1 1 pad999999999", 4, w, 4);
    expect_load_error(path, "beyond 2147483647 rows");
    memcpy(bad, w, sizeof(w));
    bad[2] = NAN;
    write_model(path, 1, 1, 3, 0, 1, "dense 1", 4, bad, 4);
    expect_load_error(path, "non-finite parameter: parameter 2 of 4 is nan");
    bad[2] = -INFINITY;
    write_model(path, 1, 1, 3, 0, 1, "dense 1", 4, bad, 4);
    expect_load_error(path, "non-finite parameter: parameter 2 of 4 is -inf");
    write_model(path, 1, 1, 3, INFINITY, 1, "dense 1", 4, w, 4);
    expect_load_error(path, "non-finite parameter: the normalisation is mean inf, std 1");
    write_model(path, 1, 1, 3, 0, NAN, "dense 1", 4, w, 4);
    expect_load_error(path, "non-finite parameter: the normalisation is mean 0, std nan");
    write_model(path, 1, 1, 3, 0, 0, "dense 1", 4, w, 4);
    expect_load_error(path, "the normalisation std is 0");
    unlink(path);
    assert_int_equal(rmdir(dir), 0);
}

/* Saving goes through a fresh temporary file: a planted file at any fixed temporary name
 * (here the old path.tmp.<pid>, a symlink) is neither followed nor truncated, the old
 * file's mode is kept, and a failed save leaves nothing behind. */
static void test_model_save_tmp(void **state)
{
    hpml_model_t *m = NULL, *m2 = NULL;
    char dir[] = "/tmp/hpml_nn_save_XXXXXX", path[256], plant[300], victim[256], buf[16] = "";
    float mean, sd;
    struct stat st;
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/m.hpml", dir);
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(plant, sizeof(plant), "%s.tmp.%ld", path, (long)getpid());
    f = fopen(victim, "w");
    assert_non_null(f);
    fputs("keep", f);
    fclose(f);
    assert_int_equal(symlink(victim, plant), 0);
    assert_int_equal(hpml_model_create("dense 3", 1, 2, 2, &m), 0);
    hpml_model_init(m, 1);
    assert_int_equal(hpml_model_save(m, 0.f, 1.f, path), 0);
    f = fopen(victim, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "keep");
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(hpml_model_load(path, &m2, &mean, &sd), 0);
    hpml_model_destroy(m2);
    /* Overwriting keeps the old mode. */
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(hpml_model_save(m, 0.f, 1.f, path), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    /* A folder that does not exist: an error naming the path, and no file. */
    snprintf(path, sizeof(path), "%s/nodir/m.hpml", dir);
    assert_int_equal(hpml_model_save(m, 0.f, 1.f, path), HPML_ERR_IO);
    assert_non_null(strstr(hpml_last_error(), "nodir/m.hpml"));
    snprintf(path, sizeof(path), "%s/m.hpml", dir);
    unlink(path);
    unlink(plant);
    unlink(victim);
    assert_int_equal(rmdir(dir), 0); /* empty: no temporary file left */
    hpml_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_dense),     cmocka_unit_test(test_grad_conv),
        cmocka_unit_test(test_conv_direct),    cmocka_unit_test(test_grad_pool_dropout),
        cmocka_unit_test(test_spec),           cmocka_unit_test(test_optim),
        cmocka_unit_test(test_model_file),     cmocka_unit_test(test_model_save_tmp),
        cmocka_unit_test(test_spec_canonical), cmocka_unit_test(test_model_file_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
