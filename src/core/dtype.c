/* dtype and op tables: sizes, names and parsers. */
#include <strings.h>

#include "hpml/core.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[HPML_DTYPE_COUNT] = {
    [HPML_F32] = {"f32", 4},   [HPML_F64] = {"f64", 8}, [HPML_F16] = {"f16", 2},
    [HPML_BF16] = {"bf16", 2}, [HPML_I8] = {"i8", 1},   [HPML_U8] = {"u8", 1},
    [HPML_I32] = {"i32", 4},   [HPML_I64] = {"i64", 8},
};

static const struct {
    const char *alias;
    hpml_dtype_t dt;
} dtype_aliases[] = {
    {"float", HPML_F32},      {"mpi_float", HPML_F32}, {"float32", HPML_F32}, {"double", HPML_F64},
    {"mpi_double", HPML_F64}, {"float64", HPML_F64},   {"half", HPML_F16},    {"float16", HPML_F16},
    {"fp16", HPML_F16},       {"bfloat16", HPML_BF16}, {"char", HPML_I8},     {"mpi_char", HPML_I8},
    {"int8", HPML_I8},        {"uint8", HPML_U8},      {"int", HPML_I32},     {"mpi_int", HPML_I32},
    {"int32", HPML_I32},      {"int64", HPML_I64},     {"long", HPML_I64},
};

static const char *op_names[HPML_OP_COUNT] = {"sum", "prod", "min", "max", "avg"};

size_t hpml_dtype_size(hpml_dtype_t dt)
{
    return (unsigned)dt < HPML_DTYPE_COUNT ? dtypes[dt].size : 0;
}

const char *hpml_dtype_name(hpml_dtype_t dt)
{
    return (unsigned)dt < HPML_DTYPE_COUNT ? dtypes[dt].name : "?";
}

int hpml_dtype_is_float(hpml_dtype_t dt)
{
    return dt == HPML_F32 || dt == HPML_F64 || dt == HPML_F16 || dt == HPML_BF16;
}

int hpml_dtype_parse(const char *name, hpml_dtype_t *out)
{
    if (name == NULL || out == NULL)
        return HPML_ERR_INVAL;
    for (int i = 0; i < HPML_DTYPE_COUNT; i++)
        if (strcasecmp(name, dtypes[i].name) == 0) {
            *out = (hpml_dtype_t)i;
            return 0;
        }
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++)
        if (strcasecmp(name, dtype_aliases[i].alias) == 0) {
            *out = dtype_aliases[i].dt;
            return 0;
        }
    return HPML_ERR_INVAL;
}

const char *hpml_op_name(hpml_op_t op)
{
    return (unsigned)op < HPML_OP_COUNT ? op_names[op] : "?";
}

int hpml_op_parse(const char *name, hpml_op_t *out)
{
    if (name == NULL || out == NULL)
        return HPML_ERR_INVAL;
    for (int i = 0; i < HPML_OP_COUNT; i++)
        if (strcasecmp(name, op_names[i]) == 0) {
            *out = (hpml_op_t)i;
            return 0;
        }
    return HPML_ERR_INVAL;
}
