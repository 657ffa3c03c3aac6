/* Error codes, their text, and a per-thread detail message for the last error. */
#include <stdarg.h>
#include <stdio.h>

#include "hpml/core.h"

static _Thread_local char last_error[512];

const char *hpml_strerror(int err)
{
    switch (err) {
    case HPML_OK: return "success";
    case HPML_ERR_INVAL: return "invalid argument";
    case HPML_ERR_NOMEM: return "out of memory";
    case HPML_ERR_MPI: return "MPI error";
    case HPML_ERR_IO: return "I/O error";
    case HPML_ERR_FORMAT: return "malformed input";
    case HPML_ERR_UNSUPPORTED: return "not supported";
    case HPML_ERR_MISMATCH: return "ranks disagree on a collective";
    case HPML_ERR_RANGE: return "value out of range";
    case HPML_ERR_NUMERIC: return "numerical failure";
    case HPML_ERR_STATE: return "invalid state";
    default: return "unknown error";
    }
}

const char *hpml_last_error(void)
{
    return last_error;
}

int hpml_set_error(int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    /* Messages quote bytes of the files they are about (a header, a field, a spec word):
     * control characters become '?', so a message stays one line and cannot drive the
     * terminal it is printed on. */
    for (char *p = last_error; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return err;
}

void hpml_clear_error(void)
{
    last_error[0] = '\0';
}
