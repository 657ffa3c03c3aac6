/*
 * Replays fuzz inputs without libFuzzer: calls the target's LLVMFuzzerTestOneInput on
 * every file of the folders (or files) given, so `make test` runs the seed corpus under
 * gcc's AddressSanitizer and UBSan. Prints how many inputs ran; a broken contract aborts.
 *
 *   replay_<name> DIR|FILE...
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/common.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long len;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        if (f != NULL)
            fclose(f);
        return -1;
    }
    /* A copy of exactly the input's size, as libFuzzer gives, so a read past its end is
     * caught by AddressSanitizer. */
    buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    fprintf(stderr, "replay: %s\n", path);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files of a folder, in name order (so runs are repeatable). */
static int run_dir(const char *path, size_t *count)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char **names = NULL, full[4096];
    size_t n = 0, cap = 0;
    int rc = 0;

    if (d == NULL) {
        fprintf(stderr, "replay: cannot open folder %s\n", path);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
        if (e->d_name[0] == '.' || stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
            if (nn == NULL) {
                rc = -1;
                break;
            }
            names = nn;
        }
        if ((names[n] = strdup(full)) == NULL) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && run_file(names[i]) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    *count += n;
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc |= run_dir(argv[i], &count);
        } else {
            rc |= run_file(argv[i]);
            count++;
        }
    }
    printf("replayed %zu input%s\n", count, count == 1 ? "" : "s");
    if (count == 0) { /* a wrong folder name must not pass as a clean replay */
        fprintf(stderr, "replay: no inputs in %s\n", argv[1]);
        return 1;
    }
    return rc != 0 ? 1 : 0;
}
