/* The JSON writer (loom__json): declared in include/loom/internal/json.h, which Loom's tools
 * include too; the library's sources include it through this header. */
#ifndef LOOM_CORE_JSON_H
#define LOOM_CORE_JSON_H

#include "loom/internal/json.h"

#endif
