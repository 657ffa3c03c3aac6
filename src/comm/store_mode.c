/*
 * Store modes of the shared-memory allreduce: the copy with streaming stores, and the
 * picker that chooses between plain and streaming stores per size class by timing whole
 * operations (the rules below; docs/decisions/store-modes.md). The picker keeps its own
 * state (hpml_store_mode_t, one per node segment); every local rank publishes its
 * figures in its control block, and all choose from their sums.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "comm/shm_internal.h"
#include "comm/store_mode.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Copy with non-temporal (streaming) stores: whole lines go to memory without first
 * taking them from the cache that holds them (the peer's, after it read them). */
static void copy_nt(char *dst, const char *src, size_t n)
{
#if defined(__x86_64__)
    size_t head = (size_t)(-(uintptr_t)dst & 63); /* whole lines from here on */

    if (n < 256) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; dst += 64, src += 64, n -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src),
                b = _mm_loadu_si128((const __m128i *)(src + 16)),
                c = _mm_loadu_si128((const __m128i *)(src + 32)),
                d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
    _mm_sfence(); /* the streaming stores are ordered before the release that follows */
#else
    memcpy(dst, src, n);
#endif
}

void hpml__shm_copy(void *dst, const void *src, size_t n, int nt)
{
    if (nt)
        copy_nt(dst, src, n);
    else
        memcpy(dst, src, n);
}

void hpml__store_mode_init(hpml_store_mode_t *sm, int nt, int out_nt, size_t llc_bytes)
{
    memset(sm, 0, sizeof(*sm));
    sm->nt = nt;
    sm->out_nt = out_nt;
    sm->llc_bytes = llc_bytes;
    sm->pend_class = -1;
}

/*
 * The picker. An shm allreduce writes the pipeline buffers that peers read (knob 0) and,
 * in large size classes, the caller's output (knob 1) with plain stores or with streaming
 * stores, which write whole lines without first taking them from the peer's cache or
 * reading them from memory. Which is faster depends on the host and changes within
 * minutes, so each knob is measured per size class (docs/decisions/store-modes.md):
 * - whole operations are timed, not the copies (streaming copies look fast even when the
 *   reader then loses); knob 1 only where the node's outputs reach an eighth of the
 *   last-level cache, and only from the class's call OUT_START;
 * - MODE_WARM calls alternate the modes in pairs (the first call after a change of modes
 *   is never counted), then a moving average of the mode in use, with the other mode
 *   probed every MODE_PROBE calls; only one knob is off its choice in any call;
 * - a mode changes only after both are measured anew side by side, since a passing
 *   slowdown lands in the average of the mode in use alone;
 * - the local ranks choose together from the sums of their published figures, streaming
 *   only below mode_bias of plain;
 * - a class idle for MODE_STALE steps after a run of MODE_RUN calls warms up again.
 * HPML_SHM_NT and HPML_SHM_OUT_NT fix either knob. No mode changes a result.
 */
#define MODE_MIN   ((size_t)64 << 10) /* smaller operations use plain stores */
#define MODE_PROBE 128u
#define MODE_WARM  12u /* P P N N P P N N P P N N: 3 counted samples of each mode */
#define MODE_STALE ((uint64_t)1 << 14)
#define MODE_RUN   (2 * MODE_WARM)
#define MODE_FRESH 4u /* a figure measured within this many calls of its knob is current */
#define OUT_START  (MODE_PROBE / 2) /* the output's knob waits for this many calls */

/* Streaming when its cost is below this fraction of plain's: pipeline, output. */
static const double mode_bias[HPML_SHM_KNOBS] = {0.8, 0.95};

/* What one call measures for a knob (pend_role). */
enum { ROLE_NONE, ROLE_WARM, ROLE_PROBE, ROLE_AVG };

/* My cost of mode m of knob k in class c, for the peers' choices. */
static void publish(hpml_shm_t *s, int c, int k, int m)
{
    const hpml_store_mode_t *sm = &s->mode;

    atomic_store_explicit(&hpml__shm_ctrl(s, s->local_rank)->mode_cost[c][k][m],
                          (float)sm->cost[c][k][m], memory_order_relaxed);
}

/* The median of the warm-up samples that were taken (0 when none was: a call that came
 * right after a change of modes, such as a probe of the other knob, is not a sample). */
static double warm_value(const double *v)
{
    double a[3];
    int n = 0;

    for (int i = 0; i < 3; i++)
        if (v[i] > 0)
            a[n++] = v[i];
    if (n == 3) {
        double lo = a[0] < a[1] ? a[0] : a[1], hi = a[0] < a[1] ? a[1] : a[0];

        return a[2] < lo ? lo : a[2] > hi ? hi : a[2];
    }
    return n == 2 ? (a[0] + a[1]) / 2 : n == 1 ? a[0] : 0;
}

static int mode_class(size_t bytes)
{
    int c = 0;

    for (bytes >>= 18; bytes > 0 && c < HPML_SHM_MODE_CLASSES - 1; bytes >>= 2)
        c++;
    return c; /* [64K, 256K), [256K, 1M), [1M, 4M), [4M, 16M), 16M and more */
}

/* Is the output's knob measured in class c (see above)? */
static int out_class(const hpml_shm_t *s, int c)
{
    const hpml_store_mode_t *sm = &s->mode;
    size_t lo = MODE_MIN << (2 * c); /* the class's smallest operation */

    if (sm->llc_bytes == 0)
        return lo >= ((size_t)4 << 20);
    return lo * (size_t)s->local_size >= sm->llc_bytes / 8;
}

/* The local ranks' choice for knob k of class c, from the sums of their costs, or from
 * mine while a peer has not published its own; plain while a mode has no figure. */
static int knob_best(hpml_shm_t *s, int c, int k)
{
    const hpml_store_mode_t *sm = &s->mode;
    double sum[2] = {0, 0};
    int all = 1;

    for (int r = 0; r < s->local_size && all; r++)
        for (int m = 0; m < 2; m++) {
            float v = atomic_load_explicit(&hpml__shm_ctrl(s, r)->mode_cost[c][k][m],
                                           memory_order_relaxed);
            all &= v > 0;
            sum[m] += v;
        }
    if (!all) /* a peer has not published this class yet */
        sum[0] = sm->cost[c][k][0], sum[1] = sm->cost[c][k][1];
    return sum[0] > 0 && sum[1] > 0 && sum[1] < mode_bias[k] * sum[0];
}

int hpml__shm_mode_pick(hpml_shm_t *s, size_t bytes, int out_ok)
{
    hpml_store_mode_t *sm = &s->mode;
    int live[HPML_SHM_KNOBS], modes = 0, active = -1, c;
    unsigned calls;

    sm->pend_class = -1;
    if (sm->nt > 0)
        modes |= HPML_SHM_MODE_PIPE;
    if (out_ok && sm->out_nt > 0)
        modes |= HPML_SHM_MODE_OUT;
    if (bytes < MODE_MIN)
        return modes;
    c = mode_class(bytes);
    live[0] = sm->nt < 0;
    live[1] = out_ok && sm->out_nt < 0 && out_class(s, c);
    if (!live[0] && !live[1])
        return modes;
    if (sm->last[c] != 0 && s->step - sm->last_step[c] > MODE_STALE) {
        if (sm->run[c] >= MODE_RUN) { /* warm up again */
            memset(sm->calls[c], 0, sizeof(sm->calls[c]));
            memset(sm->cur[c], 0, sizeof(sm->cur[c]));
            sm->class_calls[c] = 0;
            sm->last[c] = 0;
        }
        sm->run[c] = 0;
    }
    sm->run[c]++;
    sm->last_step[c] = s->step;
    calls = sm->class_calls[c]++;
    /* Knob 0 first. Knob 1 waits at its choice (plain before it has one), its count
     * standing still, until the class's call OUT_START and while knob 0 warms up or
     * probes. */
    for (int k = 0; k < HPML_SHM_KNOBS; k++) {
        unsigned n;
        int m = 0;

        sm->pend_role[k] = ROLE_NONE;
        if (!live[k])
            continue;
        if (active >= 0 || (k == 1 && calls < OUT_START)) {
            m = sm->cur[c][k];
        } else if ((n = sm->calls[c][k]++) < MODE_WARM) {
            if (n == 0)
                memset(sm->warm[c][k], 0, sizeof(sm->warm[c][k]));
            m = (int)((n >> 1) & 1u);
            sm->pend_role[k] = ROLE_WARM;
            active = k;
        } else {
            int cur = sm->cur[c][k], best = knob_best(s, c, k);
            const unsigned *seen = sm->seen[c][k];

            /* Two calls of the other mode every MODE_PROBE (the first pays for the change
             * of mode and is not counted); and before changing, both modes measured anew,
             * the other one first (see above). */
            if (n % MODE_PROBE < 2)
                m = !cur;
            else if (best != cur && n - seen[best] > MODE_FRESH)
                m = best;
            else if (best != cur && seen[cur] < seen[best])
                m = cur;
            else
                m = -1;
            if (m >= 0) {
                sm->pend_role[k] = ROLE_PROBE;
                active = k;
            } else {
                m = sm->cur[c][k] = best;
                sm->pend_role[k] = ROLE_AVG;
            }
        }
        if (m)
            modes |= k == 0 ? HPML_SHM_MODE_PIPE : HPML_SHM_MODE_OUT;
    }
    for (int k = 0; k < HPML_SHM_KNOBS; k++)
        if (active >= 0 && k != active)
            sm->pend_role[k] = ROLE_NONE; /* the other knob is off its choice */
    sm->pend_class = c;
    sm->pend_modes = modes;
    return modes;
}

void hpml__shm_mode_record(hpml_shm_t *s, size_t bytes, double seconds)
{
    hpml_store_mode_t *sm = &s->mode;
    int c = sm->pend_class, changed;
    double v = seconds / (double)bytes;

    sm->pend_class = -1;
    if (c < 0)
        return;
    changed = sm->last[c] != sm->pend_modes + 1;
    sm->last[c] = sm->pend_modes + 1;
    for (int k = 0; k < HPML_SHM_KNOBS; k++) {
        double *cost = sm->cost[c][k];
        unsigned *seen = sm->seen[c][k];
        int m = (sm->pend_modes >> k) & 1; /* HPML_SHM_MODE_PIPE is bit 0, _OUT bit 1 */

        switch (sm->pend_role[k]) {
        case ROLE_WARM:
            /* Warm-up call n (the second of its pair; the knob's count went up at the
             * pick) is sample n / 4 of its mode; after the last one both averages start
             * at their medians. */
            if (!changed)
                sm->warm[c][k][m][(sm->calls[c][k] - 1) / 4] = v;
            if (sm->calls[c][k] == MODE_WARM)
                for (int q = 0; q < 2; q++) {
                    cost[q] = warm_value(sm->warm[c][k][q]);
                    seen[q] = sm->calls[c][k];
                    publish(s, c, k, q);
                }
            break;
        case ROLE_PROBE:
            /* A probe replaces the mode's figure, which is many calls old. */
            if (!changed) {
                cost[m] = v;
                seen[m] = sm->calls[c][k];
                publish(s, c, k, m);
            }
            break;
        case ROLE_AVG:
            /* The mode in use follows a moving average (which a passing slowdown can
             * raise: it is not a measurement that may change the mode). */
            if (!changed) {
                cost[m] = cost[m] > 0 ? 0.75 * cost[m] + 0.25 * v : v;
                publish(s, c, k, m);
            }
            break;
        default: break;
        }
    }
}
