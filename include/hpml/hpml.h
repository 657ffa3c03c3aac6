/* hpml: the umbrella header. Include this, link with `pkg-config --libs hpml`. */
#ifndef HPML_H
#define HPML_H

#include "hpml/core.h"
#include "hpml/comm.h"
#include "hpml/io.h"
#include "hpml/sysinfo.h"

#endif /* HPML_H */
