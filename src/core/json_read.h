/* The JSON reader (loom__jr_*): declared in include/loom/internal/json_read.h, which Loom's
 * tools include too (loom-bench compare); the library's sources include it through this
 * header. */
#ifndef LOOM_CORE_JSON_READ_H
#define LOOM_CORE_JSON_READ_H

#include "loom/internal/json_read.h"

#endif
