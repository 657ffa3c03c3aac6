/* The windowed send/receive loop shared by the bandwidth cases (p2p_window.c). */
#ifndef HPML_BENCH_P2P_WINDOW_H
#define HPML_BENCH_P2P_WINDOW_H

#include "bench/bench_internal.h"

/* One window of c->window messages of c->count elements to/from `peer`. */
int hpml__bench_window(bench_ctx_t *c, int peer, int send, int recv);

#endif
