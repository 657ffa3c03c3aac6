/* Unit tests for the settings registry: the one size grammar, every entry well-formed,
 * and the environment read as each kind says (values, ranges, choices, defaults). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/settings_internal.h"
#include "hpml/core.h"

static void test_size_grammar(void **state)
{
    static const struct {
        const char *s;
        uint64_t v;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"4K", 4096},
        {"4k", 4096},
        {"64KB", 65536},
        {"64KiB", 65536},
        {"16M", 16u << 20},
        {"1G", (uint64_t)1 << 30},
        {"2T", (uint64_t)2 << 40},
        {"512B", 512},
        {"18446744073709551615", UINT64_MAX},
    };
    static const char *bad[] = {"",
                                " 4K",
                                "-1",
                                "+4",
                                "4 K",
                                "4KK",
                                "4Q",
                                "K",
                                "4Ki",
                                "4.5M",
                                "0x10",
                                "16777216T",
                                "18446744073709551616"};
    uint64_t v;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        assert_int_equal(hpml_size_parse(good[i].s, &v), 0);
        assert_true(v == good[i].v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(hpml_size_parse(bad[i], &v), -1);
    assert_int_equal(hpml_size_parse(NULL, &v), -1);
}

/* Every entry has a name, a one-line doc, and a default its own parser takes (or words
 * for a default that is not a value); the names are unique and HPML_-prefixed. */
static void test_registry_well_formed(void **state)
{
    size_t n = hpml_settings_count();

    (void)state;
    assert_int_equal(n, HPML__S_COUNT);
    assert_null(hpml_setting_at(n));
    for (size_t i = 0; i < n; i++) {
        const hpml_setting_t *s = hpml_setting_at(i);

        assert_non_null(s);
        assert_int_equal(strncmp(s->name, "HPML_", 5), 0);
        assert_true(s->doc != NULL && strlen(s->doc) > 10 && strchr(s->doc, '\n') == NULL);
        assert_non_null(s->def);
        if (s->kind == HPML_SETTING_CHOICE)
            assert_non_null(s->choices);
        if (s->kind == HPML_SETTING_SIZE || s->kind == HPML_SETTING_COUNT)
            assert_true(s->min <= s->max);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s->name, hpml_setting_at(j)->name);
    }
}

static void test_read_environment(void **state)
{
    hpml__settings_t s;
    uint64_t v;

    (void)state;
    for (size_t i = 0; i < hpml_settings_count(); i++)
        unsetenv(hpml_setting_at(i)->name);
    /* Unset: nothing set, defaults in force. */
    assert_int_equal(hpml__settings_read(&s), 0);
    for (int i = 0; i < HPML__S_COUNT; i++)
        assert_int_equal(s.set[i], 0);
    assert_true(hpml__setting_effective(&s, HPML__S_SHM_CHUNK) == 256 * 1024);
    assert_true(hpml__setting_effective(&s, HPML__S_PROGRESS) == 0); /* thread */
    assert_true(hpml__setting_effective(&s, HPML__S_MAX_CHUNK_ELEMS) == UINT64_MAX);
    hpml__settings_free(&s);

    /* Well-formed values, read by their kind; the same value however written. */
    setenv("HPML_SHM_CHUNK", "64KB", 1);
    setenv("HPML_SHM_NBUF", "8", 1);
    setenv("HPML_PROGRESS", "mpi", 1);
    setenv("HPML_LOG_LEVEL", "DEBUG", 1);
    setenv("HPML_TUNING_FILE", "/tmp/t.txt", 1);
    assert_int_equal(hpml__settings_read(&s), 0);
    assert_true(s.set[HPML__S_SHM_CHUNK] && s.value[HPML__S_SHM_CHUNK] == 65536);
    assert_true(s.value[HPML__S_SHM_NBUF] == 8);
    assert_true(s.value[HPML__S_PROGRESS] == 1);
    assert_true(s.value[HPML__S_LOG_LEVEL] % 4 == 3);
    assert_string_equal(s.text[HPML__S_TUNING_FILE], "/tmp/t.txt");
    hpml__settings_free(&s);
    assert_int_equal(hpml__setting_env(HPML__S_SHM_CHUNK, &v), 1);
    assert_true(v == 65536);

    /* Malformed or out of range: an error naming the variable, the value and what it
     * accepts; the other settings are still read. */
    static const struct {
        const char *name, *value, *msg;
    } bad[] = {
        {"HPML_SHM_CHUNK", "0", "HPML_SHM_CHUNK='0' is not a size from 64 to 1G bytes"},
        {"HPML_SHM_CHUNK", "100G", "HPML_SHM_CHUNK='100G' is not a size from 64 to 1G"},
        {"HPML_SHM_NBUF", "0", "HPML_SHM_NBUF='0' is not an integer from 3 to 64"},
        {"HPML_SHM_NBUF", "4x", "HPML_SHM_NBUF='4x' is not an integer"},
        {"HPML_PROGRESS", "bogus", "HPML_PROGRESS='bogus' is not one of thread|mpi"},
        {"HPML_SIMD", "avx9", "HPML_SIMD='avx9' is not one of auto|avx2|portable"},
        {"HPML_LOG_LEVEL", "loud", "HPML_LOG_LEVEL='loud' is not one of error|warn"},
        {"HPML_CHECK", "2", "HPML_CHECK='2' is not one of 0|1"},
        {"HPML_BCAST_CHUNK", "64Q", "HPML_BCAST_CHUNK='64Q' is not a size"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char saved[64] = "";
        const char *old = getenv(bad[i].name);

        if (old != NULL)
            snprintf(saved, sizeof(saved), "%s", old);
        setenv(bad[i].name, bad[i].value, 1);
        assert_int_equal(hpml__settings_read(&s), HPML_ERR_INVAL);
        if (strstr(hpml_last_error(), bad[i].msg) == NULL)
            fail_msg("'%s' lacks '%s'", hpml_last_error(), bad[i].msg);
        assert_true(s.set[HPML__S_SHM_NBUF] || strcmp(bad[i].name, "HPML_SHM_NBUF") == 0);
        hpml__settings_free(&s);
        assert_int_equal(hpml__setting_env(HPML__S_PROGRESS, &v),
                         strcmp(bad[i].name, "HPML_PROGRESS") != 0);
        if (saved[0] != '\0')
            setenv(bad[i].name, saved, 1);
        else
            unsetenv(bad[i].name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_grammar),
        cmocka_unit_test(test_registry_well_formed),
        cmocka_unit_test(test_read_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
