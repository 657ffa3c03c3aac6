/* `hpml info`: hpml's build, the MPI library, nodes, shared memory, BLAS and CPU. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "hpml/comm.h"
#include "hpml/core.h"
#include "hpml/kmeans.h"
#include "hpml/sysinfo.h"

typedef struct {
    int json;
} opts_t;

static const opt_t options[] = {
    {.name = "json",
     .kind = OPT_FLAG,
     .off = offsetof(opts_t, json),
     .help = "print the same facts as one JSON document"},
    {0},
};

static const opt_cmd_t command = {
    .name = "info",
    .usage = "Usage: [mpirun -np N] hpml info [--json]\n\n"
             "Print facts about this build of hpml and the job it runs in: hpml's version and "
             "build\n"
             "options, the MPI library's own version string, the MPI standard version, the "
             "thread\n"
             "level MPI provided, ranks, nodes and ranks per node (with host names), whether "
             "node\n"
             "shared memory works, the BLAS in use and its thread count, the CPU features "
             "hpml's\n"
             "kernels use and the size of the last-level cache (from sysfs; the shared-memory\n"
             "allreduce streams outputs that outgrow it), the collective-algorithm selection\n"
             "table in force (built-in, HPML_TUNING_FILE, or forced by "
             "HPML_ALGO_<COLLECTIVE>),\n"
             "and every HPML_* setting with its value in force, default and meaning.\n",
};

static void cpu_model(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];

    snprintf(buf, len, "unknown");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *colon = strchr(line, ':');

        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            colon += 2;
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(buf, len, "%s", colon);
            break;
        }
    }
    fclose(f);
}

static const char *simd_name(hpml_simd_t s)
{
    return s == HPML_SIMD_AVX2 ? "avx2+f16c+fma" : "portable";
}

static void print_text(const hpml_sysinfo_t *si, const char *cpu)
{
    size_t llc = hpml_cpu_llc_bytes();

    printf("hpml %s\n", hpml_version());
    printf("  build:          MPI=%s  CC=%s  flags=%s\n", HPML_BUILD_MPI, HPML_BUILD_CC,
           HPML_BUILD_OPT);
    printf("MPI\n");
    printf("  library:        %.*s\n", (int)strcspn(si->mpi_library, "\n"), si->mpi_library);
    printf("  standard:       MPI %d.%d\n", si->mpi_version, si->mpi_subversion);
    printf("  thread level:   %s\n", hpml_thread_level_name(si->thread_provided));
    printf("Job\n");
    printf("  ranks:          %d\n", si->ranks);
    printf("  nodes:          %d\n", si->nodes);
    for (int i = 0; i < si->nodes; i++)
        printf("    %-20s %d rank%s\n", si->hostnames[i], si->node_ranks[i],
               si->node_ranks[i] == 1 ? "" : "s");
    printf("  shared memory:  %s%s%s\n", si->shm_works ? "works" : "does not work",
           si->shm_works ? "" : ": ", si->shm_works ? "" : si->shm_detail);
    printf("BLAS\n");
    printf("  library:        %s\n", hpml_blas_config());
    printf("  threads:        %d\n", hpml_blas_threads());
    printf("CPU\n");
    printf("  model:          %s\n", cpu);
    printf("  online cores:   %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("  features:       avx2=%s f16c=%s fma=%s avx512f=%s\n",
           hpml_cpu_has_avx2() ? "yes" : "no", hpml_cpu_has_f16c() ? "yes" : "no",
           hpml_cpu_has_fma() ? "yes" : "no", hpml_cpu_has_avx512f() ? "yes" : "no");
    printf("  kernels:        %s\n", simd_name(hpml_simd_active()));
    printf("  kmeans kernel:  %s\n", hpml_kmeans_kernel_name());
    if (llc > 0)
        printf("  cache:          %zu KiB (last level)\n", llc >> 10);
    else
        printf("  cache:          last level unknown\n");
}

static void print_json(const hpml_sysinfo_t *si, const char *cpu)
{
    cli_json_begin("info");
    printf(", \"ranks\": %d,\n  \"hpml\": {\"version\": ", si->ranks);
    hpml_json_string(stdout, hpml_version());
    printf(", \"commit\": ");
    hpml_json_string(stdout, hpml_build_commit());
    printf(", \"mpi\": ");
    hpml_json_string(stdout, HPML_BUILD_MPI);
    printf(", \"cc\": ");
    hpml_json_string(stdout, HPML_BUILD_CC);
    printf(", \"flags\": ");
    hpml_json_string(stdout, HPML_BUILD_OPT);
    printf("},\n  \"mpi\": {\"library\": ");
    hpml_json_string(stdout, si->mpi_library);
    printf(", \"standard\": \"%d.%d\", \"thread_level\": ", si->mpi_version, si->mpi_subversion);
    hpml_json_string(stdout, hpml_thread_level_name(si->thread_provided));
    printf("},\n  \"job\": {\"ranks\": %d, \"nodes\": [", si->ranks);
    for (int i = 0; i < si->nodes; i++) {
        printf("%s{\"host\": ", i ? ", " : "");
        hpml_json_string(stdout, si->hostnames[i]);
        printf(", \"ranks\": %d}", si->node_ranks[i]);
    }
    printf("], \"shared_memory\": %s, \"shared_memory_detail\": ",
           si->shm_works ? "true" : "false");
    hpml_json_string(stdout, si->shm_detail);
    printf("},\n  \"blas\": {\"library\": ");
    hpml_json_string(stdout, hpml_blas_config());
    printf(", \"threads\": %d},\n  \"cpu\": {\"model\": ", hpml_blas_threads());
    hpml_json_string(stdout, cpu);
    printf(", \"cores\": %ld, \"avx2\": %s, \"f16c\": %s, \"fma\": %s, \"kernels\": ",
           sysconf(_SC_NPROCESSORS_ONLN), hpml_cpu_has_avx2() ? "true" : "false",
           hpml_cpu_has_f16c() ? "true" : "false", hpml_cpu_has_fma() ? "true" : "false");
    hpml_json_string(stdout, simd_name(hpml_simd_active()));
    printf(", \"avx512f\": %s, \"kmeans_kernel\": ", hpml_cpu_has_avx512f() ? "true" : "false");
    hpml_json_string(stdout, hpml_kmeans_kernel_name());
    printf(", \"llc_bytes\": %zu}", hpml_cpu_llc_bytes());
}

static const char *kind_name(hpml_setting_kind_t k)
{
    switch (k) {
    case HPML_SETTING_SIZE: return "size";
    case HPML_SETTING_COUNT: return "count";
    case HPML_SETTING_CHOICE: return "choice";
    default: return "text";
    }
}

/* The settings registry with the values in force (this rank's environment, which
 * hpml_comm_create has just read and, for the agreed ones, compared across ranks). */
static void print_settings(int json)
{
    size_t n = hpml_settings_count();

    if (json)
        printf(",\n  \"settings\": [");
    else
        printf("Settings (environment; * must be the same on every rank)\n");
    for (size_t i = 0; i < n; i++) {
        const hpml_setting_t *s = hpml_setting_at(i);
        const char *v = getenv(s->name);
        int set = v != NULL && *v != '\0';

        if (json) {
            printf("%s\n    {\"name\": \"%s\", \"value\": ", i ? "," : "", s->name);
            if (set)
                hpml_json_string(stdout, v);
            else
                printf("null");
            printf(", \"default\": ");
            hpml_json_string(stdout, s->def);
            printf(", \"kind\": \"%s\", \"agreed\": %s, \"doc\": ", kind_name(s->kind),
                   s->agreed ? "true" : "false");
            hpml_json_string(stdout, s->doc);
            printf("}");
        } else {
            char val[64];

            if (set)
                snprintf(val, sizeof(val), "%s", v);
            else
                snprintf(val, sizeof(val), "(%s)", s->def[0] ? s->def : "unset");
            printf("  %-26s%c %-16s %s\n", s->name, s->agreed ? '*' : ' ', val, s->doc);
        }
    }
    if (json)
        printf("\n  ]");
}

int cmd_info(int argc, char **argv)
{
    opts_t o = {0};
    const opt_set_t set = {options, &o};
    hpml_sysinfo_t si;
    hpml_comm_t *comm = NULL;
    char cpu[256];
    int json, operand, rc;

    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    json = o.json;

    rc = hpml_sysinfo_gather(MPI_COMM_WORLD, &si);
    if (rc != 0) /* agreed on cli_fail_agreed's own communicator */
        return cli_fail_agreed("info", rc);
    /* The selection table depends on the communicator's shape (ranks, nodes) and on
     * HPML_TUNING_FILE / HPML_ALGO_*, so build the communicator hpml would use. A bad
     * tuning file fails here on every rank alike. */
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (rc != 0) {
        if (cli_rank() == 0)
            fprintf(stderr, "hpml info: %s: %s\n", hpml_strerror(rc), hpml_last_error());
        hpml_sysinfo_free(&si);
        return CLI_EXIT_FAIL;
    }
    if (cli_rank() == 0) {
        cpu_model(cpu, sizeof(cpu));
        if (json) {
            print_json(&si, cpu);
            printf(",\n  \"selection\": ");
            hpml_select_describe(comm, stdout, 1);
            print_settings(1);
            printf("\n}\n");
        } else {
            print_text(&si, cpu);
            printf("Collectives\n");
            hpml_select_describe(comm, stdout, 0);
            print_settings(0);
        }
    }
    hpml_comm_destroy(comm);
    hpml_sysinfo_free(&si);
    return CLI_EXIT_OK;
}
