/* hpml: the umbrella header. Include this, link with `pkg-config --libs hpml`. */
#ifndef HPML_H
#define HPML_H

#include "hpml/core.h"    /* errors, memory, timers, dtypes, fp16/bf16, kernels, RNG */
#include "hpml/comm.h"    /* communicator, collectives, nonblocking, fusion */
#include "hpml/sysinfo.h" /* facts about the job for `hpml info` */
#include "hpml/io.h"      /* .npy, IDX, CSV */
#include "hpml/kmeans.h"  /* distributed K-Means */
#include "hpml/knn.h"     /* nearest neighbours */
#include "hpml/decomp.h"  /* PCA, truncated SVD */
#include "hpml/linear.h"  /* linear/ridge and logistic regression */
#include "hpml/nn.h"      /* DNN engine and data-parallel trainer */
#include "hpml/bench.h"   /* OMB-compatible benchmark harness */
#include "hpml/prof.h"    /* reports of libhpml-prof.so (hpml prof merge) */

#endif /* HPML_H */
