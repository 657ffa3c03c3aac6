/*
 * The end of an assign tile, shared by the GEMM path (kmeans_kernels.h) and the fused
 * kernels (kmeans_fused.h), included inside them: with each row's nearest centre bi[i] and
 * min_j(|c_j|^2 - 2 x.c_j) = bv[i] known, the inertia, the label changes, *mind and the
 * per-cluster sums in the data type (csum, NULL when not wanted), flushed into the double
 * sums (k x d) when due (last: this is the pass's last tile). Define KT_T (element
 * type), KT_FN(name), KT_ATTR (target attribute or nothing) and KT_ADDROW(s, x, d)
 * (s[0..d) += x[0..d)) before including.
 */
KT_ATTR static inline __attribute__((always_inline)) void
KT_FN(take)(const KT_T *xt, size_t m, size_t d, const KT_T *xn, const KT_T *bv, const int32_t *bi,
            int32_t *labels, double *mind, KT_T *csum, double *counts, double *sums, size_t k,
            int last, km_tally_t *t)
{
    for (size_t i = 0; i < m; i++) {
        int32_t l = bi[i];

        km_take_row(t, (double)xn[i], (double)bv[i], l, labels + i, mind != NULL ? mind + i : NULL);
        if (csum != NULL) {
            KT_ADDROW(csum + (size_t)l * d, xt + i * d, d);
            counts[l] += 1.0;
        }
    }
    if (csum != NULL && km_flush_due(t, m, last))
        KM_FLUSH_SUMS(csum, sums, k * d);
}
