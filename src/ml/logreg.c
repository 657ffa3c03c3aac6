/*
 * L2-regularised logistic regression (binary sigmoid or multinomial softmax) on
 * row-distributed data, minimised by L-BFGS (Nocedal and Wright, Numerical
 * Optimization, algorithms 7.4 and 3.5-3.6: two-loop recursion, strong-Wolfe line search).
 * The objective is scikit-learn's C*sum(loss) + |W|^2/2 divided by C*n (same minimiser,
 * better scaled). One function evaluation is one pass over the local rows: per tile of rows
 * small enough to stay in L2 (256 KiB), a GEMM for the scores, the loss and d loss / d
 * score (one exp per score), and a GEMM adding the tile's gradient, so X is read from
 * memory once; then one allreduce of p+1 doubles, and every rank takes the same steps.
 */
#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "hpml/linear.h"

#define LOGREG_MAX_RANGE  (1 << 20)    /* label value range handled by the class histogram */
#define LOGREG_TILE_BYTES (256u << 10) /* a tile of rows stays in L2 between its two GEMMs */
#define LS_MAX            40           /* function evaluations per line search */

void hpml_logreg_config_init(hpml_logreg_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->C = 1.0;
    cfg->fit_intercept = 1;
    cfg->multinomial = 0;
    cfg->max_iter = 100;
    cfg->tol = 1e-4;
    cfg->memory = 10;
    cfg->ftol = 64.0 * DBL_EPSILON;
}

void hpml_logreg_destroy(hpml_logreg_t *m)
{
    if (m == NULL)
        return;
    hpml_free(m->classes);
    hpml_free(m->coef);
    hpml_free(m->intercept);
    hpml_free(m);
}

typedef struct {
    hpml_comm_t *comm;
    const double *x;
    const int32_t *cls;   /* class index of each local row */
    size_t rows, n, d, r; /* local rows, global rows, features, weight rows */
    int fi, softmax;
    double C;
    size_t p;    /* parameters: r*d weights then r intercepts when fi */
    size_t tile; /* rows per tile: LOGREG_TILE_BYTES of x */
    double *z;   /* (tile, r) scores, then d loss / d score */
    double *buf; /* p+1: gradient sums and the loss sum, allreduced */
    size_t evals;
} problem_t;

/* f = mean loss + |W|^2/(2Cn), g its gradient, at w. Collective. */
static int evaluate(problem_t *pb, const double *w, double *f, double *g)
{
    size_t d = pb->d, r = pb->r, p = pb->p;
    double loss = 0.0, reg = 0.0;
    int rc;

    memset(pb->buf, 0, (p + 1) * sizeof(double));
    for (size_t i0 = 0; i0 < pb->rows; i0 += pb->tile) {
        size_t m = pb->rows - i0 < pb->tile ? pb->rows - i0 : pb->tile;
        const double *xt = pb->x + i0 * d;

        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < r; k++)
                pb->z[i * r + k] = pb->fi ? w[r * d + k] : 0.0;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)r, (int)d, 1.0, xt,
                    (int)d, w, (int)d, 1.0, pb->z, (int)r);
        for (size_t i = 0; i < m; i++) {
            double *zi = pb->z + i * r;
            int32_t c = pb->cls[i0 + i];

            if (!pb->softmax) {
                /* log(1 + exp(-s z)), s = +1 for class 1; derivative sigmoid(z) - y */
                double s = c == 1 ? 1.0 : -1.0, mz = s * zi[0];
                double e = exp(-fabs(zi[0]));

                /* exp(-|mz|) = e: one exp per row */
                loss += (mz > 0 ? log1p(e) : -mz + log1p(e));
                zi[0] = (zi[0] >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e)) - (c == 1);
            } else {
                double mx = zi[0], sum = 0.0, zc = zi[c];

                for (size_t k = 1; k < r; k++)
                    mx = zi[k] > mx ? zi[k] : mx;
                for (size_t k = 0; k < r; k++) /* one exp per score: e_k kept in zi */
                    sum += (zi[k] = exp(zi[k] - mx));
                loss += mx + log(sum) - zc;
                for (size_t k = 0; k < r; k++)
                    zi[k] = zi[k] / sum - (k == (size_t)c);
            }
            if (pb->fi)
                for (size_t k = 0; k < r; k++)
                    pb->buf[r * d + k] += zi[k];
        }
        /* gradient sums (r, d) += dz^T x_tile */
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)d, (int)m, 1.0, pb->z,
                    (int)r, xt, (int)d, 1.0, pb->buf, (int)d);
    }
    pb->buf[p] = loss;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, pb->buf, p + 1, HPML_F64, HPML_SUM, pb->comm)) != 0)
        return rc;
    pb->evals++;
    for (size_t j = 0; j < p; j++)
        g[j] = pb->buf[j] / (double)pb->n;
    for (size_t j = 0; j < r * d; j++) {
        reg += w[j] * w[j];
        g[j] += w[j] / (pb->C * (double)pb->n);
    }
    *f = pb->buf[p] / (double)pb->n + reg / (2.0 * pb->C * (double)pb->n);
    if (!isfinite(*f))
        return hpml_set_error(HPML_ERR_NUMERIC, "logreg: the objective is not finite");
    return 0;
}

static double dot(const double *a, const double *b, size_t n)
{
    return cblas_ddot((int)n, a, 1, b, 1);
}

typedef struct {
    double a, f, gd;
} lspt_t;

/* Minimiser of the cubic through (lo, hi) with slopes, safeguarded into the interval. */
static double interpolate(lspt_t lo, lspt_t hi)
{
    double d1 = lo.gd + hi.gd - 3.0 * (lo.f - hi.f) / (lo.a - hi.a);
    double d2sq = d1 * d1 - lo.gd * hi.gd, a;
    double left = fmin(lo.a, hi.a), right = fmax(lo.a, hi.a), w = right - left;

    if (d2sq >= 0) {
        double d2 = sqrt(d2sq) * (hi.a > lo.a ? 1.0 : -1.0);
        a = hi.a - (hi.a - lo.a) * (hi.gd + d2 - d1) / (hi.gd - lo.gd + 2.0 * d2);
        if (isfinite(a) && a > left + 0.1 * w && a < right - 0.1 * w)
            return a;
    }
    return 0.5 * (lo.a + hi.a);
}

/*
 * Strong-Wolfe line search along dir from w (value f0, slope gd0 < 0). Returns 0 when a
 * step met the conditions (Armijo up to rounding noise in f: near the optimum f changes
 * by less than its last bits and the curvature condition on the gradient decides), with
 * xn, fn, gn the accepted point; 1 if none was found, and then xn etc. hold the best point
 * seen if it decreased f (*moved says so). *rc gets a collective's error.
 */
static int line_search(problem_t *pb, const double *w, double f0, double gd0, const double *dir,
                       double a0, double *xn, double *fn, double *gn, int *moved, int *rc)
{
    const double c1 = 1e-4, c2 = 0.9;
    /* Allow rounding noise in f: near the optimum f changes by less than its last bits. */
    double fslack = 8.0 * DBL_EPSILON * fabs(f0);
    lspt_t prev = {0.0, f0, gd0}, lo, hi, cur;
    size_t p = pb->p;
    int zoom = 0;

    *moved = 0;
    cur.a = a0;
    for (int it = 0; it < LS_MAX; it++) {
        if (zoom)
            cur.a = interpolate(lo, hi);
        for (size_t j = 0; j < p; j++)
            xn[j] = w[j] + cur.a * dir[j];
        if ((*rc = evaluate(pb, xn, fn, gn)) != 0)
            return 1;
        cur.f = *fn;
        cur.gd = dot(gn, dir, p);
        if (*fn < f0)
            *moved = 1;
        if (!zoom) {
            if (cur.f > f0 + c1 * cur.a * gd0 + fslack || (it > 0 && cur.f >= prev.f)) {
                lo = prev;
                hi = cur;
                zoom = 1;
            } else if (fabs(cur.gd) <= -c2 * gd0) {
                return 0;
            } else if (cur.gd >= 0) {
                lo = cur;
                hi = prev;
                zoom = 1;
            } else {
                prev = cur;
                cur.a *= 2.0;
            }
        } else {
            if (cur.f > f0 + c1 * cur.a * gd0 + fslack || cur.f >= lo.f) {
                hi = cur;
            } else {
                if (fabs(cur.gd) <= -c2 * gd0)
                    return 0;
                if (cur.gd * (hi.a - lo.a) >= 0)
                    hi = lo;
                lo = cur;
            }
            if (fabs(hi.a - lo.a) <= 1e-16 * fmax(1.0, fabs(lo.a)))
                break;
        }
    }
    /* Fall back to the best point in the bracket, if it decreased f. */
    if (zoom && lo.a > 0 && lo.f < f0) {
        for (size_t j = 0; j < p; j++)
            xn[j] = w[j] + lo.a * dir[j];
        if ((*rc = evaluate(pb, xn, fn, gn)) != 0)
            return 1;
        *moved = 1;
    } else {
        *moved = 0;
    }
    return 1;
}

/* Global sorted class labels (histogram over the allreduced label range). */
static int find_classes(hpml_comm_t *comm, const int64_t *y, size_t rows, int64_t **classes,
                        size_t *nclasses)
{
    int64_t ext[2] = {INT64_MIN + 1, INT64_MIN + 1}, *hist = NULL, range;
    int rc;

    *classes = NULL;
    for (size_t i = 0; i < rows; i++) {
        if (y[i] > ext[0])
            ext[0] = y[i];
        if (y[i] == INT64_MIN)
            return hpml_set_error(HPML_ERR_INVAL, "logreg: label out of range");
        if (-y[i] > ext[1])
            ext[1] = -y[i];
    }
    if ((rc = hpml_allreduce(HPML_IN_PLACE, ext, 2, HPML_I64, HPML_MAX, comm)) != 0)
        return rc;
    if (ext[0] < -ext[1])
        return hpml_set_error(HPML_ERR_INVAL, "logreg: no rows");
    if ((double)ext[0] + (double)ext[1] >= LOGREG_MAX_RANGE)
        return hpml_set_error(HPML_ERR_INVAL,
                              "logreg: class labels span [%lld, %lld]; relabel them to 0..K-1",
                              (long long)-ext[1], (long long)ext[0]);
    range = ext[0] + ext[1] + 1;
    hist = hpml_calloc((size_t)range, sizeof(int64_t));
    if (hist == NULL)
        return HPML_ERR_NOMEM;
    for (size_t i = 0; i < rows; i++)
        hist[y[i] + ext[1]]++;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, hist, (size_t)range, HPML_I64, HPML_SUM, comm)) != 0)
        goto out;
    *nclasses = 0;
    for (int64_t v = 0; v < range; v++)
        *nclasses += hist[v] > 0;
    *classes = hpml_malloc(*nclasses * sizeof(int64_t));
    if (*classes == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    *nclasses = 0;
    for (int64_t v = 0; v < range; v++)
        if (hist[v] > 0)
            (*classes)[(*nclasses)++] = v - ext[1];
out:
    hpml_free(hist);
    return rc;
}

/* The L-BFGS memory: the last `mem` steps s = w' - w and gradient changes y = g' - g. */
typedef struct {
    size_t mem, hist, head, p;
    double *s, *yv, *rho, *alph;
} lbfgs_t;

static int lbfgs_init(lbfgs_t *lb, size_t mem, size_t p)
{
    memset(lb, 0, sizeof(*lb));
    lb->mem = mem;
    lb->p = p;
    lb->s = hpml_malloc(mem * p * sizeof(double));
    lb->yv = hpml_malloc(mem * p * sizeof(double));
    lb->rho = hpml_malloc(mem * sizeof(double));
    lb->alph = hpml_malloc(mem * sizeof(double));
    return lb->s && lb->yv && lb->rho && lb->alph ? 0 : HPML_ERR_NOMEM;
}

static void lbfgs_free(lbfgs_t *lb)
{
    hpml_free(lb->s);
    hpml_free(lb->yv);
    hpml_free(lb->rho);
    hpml_free(lb->alph);
}

/* dir = -H g by the two-loop recursion (Nocedal & Wright, Algorithm 7.4); returns the
 * first step length to try. Falls back to steepest descent when that is no descent. */
static double lbfgs_direction(lbfgs_t *lb, const double *g, double *dir, double *gd)
{
    const size_t p = lb->p, mem = lb->mem;
    double a0 = 1.0;

    for (size_t j = 0; j < p; j++)
        dir[j] = -g[j];
    for (size_t h = 0; h < lb->hist; h++) {
        size_t i = (lb->head + mem - 1 - h) % mem;
        lb->alph[i] = lb->rho[i] * dot(lb->s + i * p, dir, p);
        cblas_daxpy((int)p, -lb->alph[i], lb->yv + i * p, 1, dir, 1);
    }
    if (lb->hist > 0) {
        size_t i = (lb->head + mem - 1) % mem;
        cblas_dscal((int)p, 1.0 / (lb->rho[i] * dot(lb->yv + i * p, lb->yv + i * p, p)), dir, 1);
    } else {
        a0 = 1.0 / cblas_dnrm2((int)p, g, 1);
    }
    for (size_t h = lb->hist; h-- > 0;) {
        size_t i = (lb->head + mem - 1 - h) % mem;
        double b = lb->rho[i] * dot(lb->yv + i * p, dir, p);
        cblas_daxpy((int)p, lb->alph[i] - b, lb->s + i * p, 1, dir, 1);
    }
    *gd = dot(g, dir, p);
    if (!(*gd < 0)) { /* not a descent direction: restart from steepest descent */
        lb->hist = 0;
        for (size_t j = 0; j < p; j++)
            dir[j] = -g[j];
        *gd = dot(g, dir, p);
        a0 = 1.0 / sqrt(-*gd);
    }
    return a0;
}

/* Remember the step from (w, g) to (wn, gn), unless its curvature is too small. */
static void lbfgs_push(lbfgs_t *lb, const double *w, const double *wn, const double *g,
                       const double *gn)
{
    const size_t p = lb->p, i = lb->head;
    double sy;

    for (size_t j = 0; j < p; j++) {
        lb->s[i * p + j] = wn[j] - w[j];
        lb->yv[i * p + j] = gn[j] - g[j];
    }
    sy = dot(lb->s + i * p, lb->yv + i * p, p);
    if (sy > 1e-12 * dot(lb->yv + i * p, lb->yv + i * p, p)) {
        lb->rho[i] = 1.0 / sy;
        lb->head = (lb->head + 1) % lb->mem;
        if (lb->hist < lb->mem)
            lb->hist++;
    }
}

static double max_abs(const double *v, size_t n)
{
    double m = 0.0;

    for (size_t j = 0; j < n; j++)
        m = fmax(m, fabs(v[j]));
    return m;
}

/* The L-BFGS iterations from w (objective f, gradient g) until converged or max_iter;
 * m gets n_iter, converged and objective. 0 or an error. */
static int minimise(problem_t *pb, const hpml_logreg_config_t *cfg, double *w, double *g,
                    hpml_logreg_t *m)
{
    const size_t p = pb->p;
    double *wn = hpml_malloc(p * sizeof(double)), *gn = hpml_malloc(p * sizeof(double));
    double *dir = hpml_malloc(p * sizeof(double)), f, fn;
    lbfgs_t lb;
    int rc;

    rc = lbfgs_init(&lb, cfg->memory ? cfg->memory : 10, p);
    if (rc != 0 || !wn || !gn || !dir)
        rc = hpml_set_error(HPML_ERR_NOMEM, "logreg: out of memory for %zu parameters", p);
    if ((rc = hpml_comm_agree(pb->comm, rc)) != 0 || (rc = evaluate(pb, w, &f, g)) != 0)
        goto out;
    for (m->n_iter = 0;;) {
        double gmax = max_abs(g, p), gd, a0, fprev;
        int moved, failed;

        if (gmax <= cfg->tol) {
            m->converged = 1;
            break;
        }
        if (m->n_iter >= cfg->max_iter)
            break;
        a0 = lbfgs_direction(&lb, g, dir, &gd);
        failed = line_search(pb, w, f, gd, dir, a0, wn, &fn, gn, &moved, &rc);
        if (rc != 0)
            goto out;
        if (failed && !moved) {
            /* No decrease possible at this precision (scipy: ABNORMAL_TERMINATION_IN_LNSRCH):
             * as good as it gets; converged if the gradient is at rounding level. */
            m->converged = gmax <= fmax(cfg->tol, 1e-7);
            break;
        }
        m->n_iter++;
        lbfgs_push(&lb, w, wn, g, gn);
        memcpy(w, wn, p * sizeof(double));
        memcpy(g, gn, p * sizeof(double));
        fprev = f;
        f = fn;
        if (cfg->progress != NULL)
            cfg->progress(cfg->progress_ctx, m->n_iter, f, max_abs(g, p));
        /* scipy's L-BFGS-B factr test (sklearn passes ftol = 64 eps) */
        if (cfg->ftol > 0 && !failed &&
            (fprev - f) <= cfg->ftol * fmax(fmax(fabs(fprev), fabs(f)), 1.0)) {
            m->converged = 1;
            break;
        }
    }
    m->objective = f;
out:
    lbfgs_free(&lb);
    hpml_free(wn);
    hpml_free(gn);
    hpml_free(dir);
    return rc;
}

/* Each row's class as an index into the sorted classes (binary search). */
static void class_indices(const hpml_logreg_t *m, const int64_t *y, size_t rows, int32_t *cls)
{
    for (size_t i = 0; i < rows; i++) {
        size_t lo = 0, hi = m->n_classes - 1;

        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (m->classes[mid] < y[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        cls[i] = (int32_t)lo;
    }
}

/* The model's coefficients and intercepts from the parameters w. */
static void store_model(const problem_t *pb, const double *w, hpml_logreg_t *m)
{
    const size_t d = pb->d, K = m->n_classes;
    size_t src = pb->softmax && K == 2 ? 1 : 0; /* binary softmax keeps class 1's row */
    double bmean = 0.0;

    if (pb->softmax && pb->fi) /* softmax is shift-invariant: report zero-sum intercepts */
        for (size_t k = 0; k < pb->r; k++)
            bmean += w[pb->r * d + k] / (double)pb->r;
    for (size_t k = 0; k < m->n_rows; k++) {
        memcpy(m->coef + k * d, w + (src + k) * d, d * sizeof(double));
        m->intercept[k] = pb->fi ? w[pb->r * d + src + k] - bmean : 0.0;
    }
}

int hpml_logreg_fit(hpml_comm_t *comm, const double *x, const int64_t *y, size_t rows, size_t d,
                    const hpml_logreg_config_t *cfg, hpml_logreg_t **out)
{
    hpml_logreg_t *m = NULL;
    problem_t pb = {0};
    int32_t *cls = NULL;
    double *w = NULL, *g = NULL, nn = (double)rows;
    size_t K = 0;
    int rc = 0;

    *out = NULL;
    if (!(cfg->C > 0) || d == 0 || d > INT_MAX / 4 || rows > INT_MAX)
        return hpml_set_error(HPML_ERR_INVAL, "logreg: C must be > 0 and d positive");
    m = hpml_calloc(1, sizeof(*m));
    if ((rc = hpml_comm_agree(
             comm, m == NULL ? hpml_set_error(HPML_ERR_NOMEM, "logreg: out of memory") : 0)) != 0)
        goto out;
    if ((rc = find_classes(comm, y, rows, &m->classes, &K)) != 0)
        goto out;
    if (K < 2) {
        rc = hpml_set_error(HPML_ERR_INVAL,
                            "logreg: the target holds only one class (%lld); need at least 2",
                            (long long)m->classes[0]);
        goto out;
    }
    m->n_classes = K;
    m->n_features = d;
    m->multinomial = cfg->multinomial || K > 2;
    m->n_rows = K == 2 ? 1 : K;
    pb.comm = comm;
    pb.x = x;
    pb.rows = rows;
    pb.d = d;
    pb.softmax = m->multinomial;
    pb.r = pb.softmax ? K : 1;
    pb.fi = cfg->fit_intercept != 0;
    pb.C = cfg->C;
    pb.p = pb.r * d + (pb.fi ? pb.r : 0);
    cls = hpml_malloc((rows ? rows : 1) * sizeof(int32_t));
    pb.tile = LOGREG_TILE_BYTES / (d * sizeof(double));
    pb.tile = pb.tile < 64 ? 64 : pb.tile > 4096 ? 4096 : pb.tile;
    pb.z = hpml_malloc(pb.tile * pb.r * sizeof(double));
    pb.buf = hpml_malloc((pb.p + 1) * sizeof(double));
    w = hpml_calloc(pb.p, sizeof(double));
    g = hpml_malloc(pb.p * sizeof(double));
    m->coef = hpml_calloc(m->n_rows * d, sizeof(double));
    m->intercept = hpml_calloc(m->n_rows, sizeof(double));
    if (!cls || !pb.z || !pb.buf || !w || !g || !m->coef || !m->intercept)
        rc = hpml_set_error(HPML_ERR_NOMEM, "logreg: out of memory for %zu rows of %zu features",
                            rows, d);
    if ((rc = hpml_comm_agree(comm, rc)) != 0)
        goto out;
    class_indices(m, y, rows, cls);
    pb.cls = cls;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, &nn, 1, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    pb.n = (size_t)nn;
    m->n_samples = pb.n;
    if ((rc = minimise(&pb, cfg, w, g, m)) != 0)
        goto out;
    store_model(&pb, w, m);
    *out = m;
    m = NULL;
out:
    hpml_logreg_destroy(m);
    hpml_free(cls);
    hpml_free(pb.z);
    hpml_free(pb.buf);
    hpml_free(w);
    hpml_free(g);
    return rc;
}

int hpml_logreg_predict_proba(const hpml_logreg_t *m, const double *x, size_t rows, double *proba)
{
    size_t d = m->n_features, r = m->n_rows, K = m->n_classes;

    for (size_t i = 0; i < rows; i++) {
        double *pi = proba + i * K;

        for (size_t k = 0; k < r; k++)
            pi[k] = m->intercept[k] + cblas_ddot((int)d, x + i * d, 1, m->coef + k * d, 1);
        if (r == 1) {
            /* sklearn: sigmoid(z) for the binary model; softmax([-z, z]) = sigmoid(2z)
             * for the binary multinomial one. */
            double z = m->multinomial ? 2.0 * pi[0] : pi[0];
            pi[1] = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
            pi[0] = 1.0 - pi[1];
        } else {
            double mx = pi[0], sum = 0.0;

            for (size_t k = 1; k < K; k++)
                mx = fmax(mx, pi[k]);
            for (size_t k = 0; k < K; k++)
                sum += (pi[k] = exp(pi[k] - mx));
            for (size_t k = 0; k < K; k++)
                pi[k] /= sum;
        }
    }
    return 0;
}

int hpml_logreg_predict(const hpml_logreg_t *m, const double *x, size_t rows, int64_t *pred)
{
    size_t d = m->n_features, r = m->n_rows;
    double *z = hpml_malloc((r ? r : 1) * sizeof(double));

    if (z == NULL)
        return HPML_ERR_NOMEM;
    for (size_t i = 0; i < rows; i++) {
        size_t best = 0;

        for (size_t k = 0; k < r; k++)
            z[k] = m->intercept[k] + cblas_ddot((int)d, x + i * d, 1, m->coef + k * d, 1);
        if (r == 1)
            best = z[0] > 0;
        else
            for (size_t k = 1; k < r; k++)
                if (z[k] > z[best])
                    best = k;
        pred[i] = m->classes[best];
    }
    hpml_free(z);
    return 0;
}
