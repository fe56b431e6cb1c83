/* The host BLAS under the shim, and the routines forwarded to it as they are.
 *
 * OpenBLAS is opened by its own path, the library Loom links (found with dladdr on one of its
 * own functions, openblas_get_config, which no libblas.so.3 exports), or LOOM_BLAS_HOST where
 * set; never as "libblas.so.3", which in a program running over the shim is the shim itself.
 * Each routine is looked up once with dlsym on that handle: a lookup through the global scope
 * would find the shim's symbol and call back into it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas/blas.h"

/* OpenBLAS's own; declared here rather than through its cblas.h, whose prototypes would clash
 * with the shim's. */
extern char *openblas_get_config(void);

static blas_host host_table;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_path[4096];

static _Noreturn void host_fail(const char *what, const char *detail) {
  fprintf(stderr, "loom-blas: %s: %s\n", what, detail ? detail : "unknown error");
  abort();
}

/* The host library's path: LOOM_BLAS_HOST, else the file OpenBLAS was loaded from. */
static void host_find_path(void) {
  const char *env = getenv("LOOM_BLAS_HOST");
  if (env && *env) {
    const char *base = strrchr(env, '/');
    base = base ? base + 1 : env;
    if (strncmp(base, "libblas.so", 10) == 0)
      host_fail("LOOM_BLAS_HOST names a libblas.so (the shim's own name, which would call itself)", env);
    snprintf(host_path, sizeof host_path, "%s", env);
    return;
  }
  Dl_info info;
  if (!dladdr((void *)openblas_get_config, &info) || !info.dli_fname)
    host_fail("cannot find the file of the OpenBLAS Loom links", dlerror());
  snprintf(host_path, sizeof host_path, "%s", info.dli_fname);
}

static void *host_symbol(void *handle, const char *name) {
  void *p = dlsym(handle, name);
  if (!p) {
    char what[512];
    snprintf(what, sizeof what, "the host BLAS %.400s has no %.64s", host_path, name);
    host_fail(what, dlerror());
  }
  return p;
}

static void host_load(void) {
  host_find_path();
  void *handle = dlopen(host_path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) host_fail("cannot open the host BLAS", dlerror());
#define LOAD_SUB(name, params, args) *(void **)&host_table.name = host_symbol(handle, #name);
#define LOAD_FUN(ret, name, params, args) LOAD_SUB(name, params, args)
#define LOAD_CSUB(name, params, args, check) LOAD_SUB(name, params, args)
  BLAS_F77_FORWARDED(LOAD_SUB, LOAD_FUN)
  BLAS_F77_LEVEL3(LOAD_SUB)
  CBLAS_FORWARDED(LOAD_CSUB, LOAD_FUN)
#undef LOAD_SUB
#undef LOAD_FUN
#undef LOAD_CSUB
}

const blas_host *loom__blas_host(void) {
  pthread_once(&host_once, host_load);
  return &host_table;
}

const char *loom__blas_host_path(void) {
  loom__blas_host();
  return host_path;
}

/* ---- the forwarded routines --------------------------------------------------------------- */

#define FWD_SUB(name, params, args) \
  BLAS_EXPORT void name params;     \
  void name params {                \
    loom__blas_host()->name args;   \
  }
#define FWD_FUN(ret, name, params, args) \
  BLAS_EXPORT ret name params;           \
  ret name params {                      \
    return loom__blas_host()->name args; \
  }
/* A CBLAS routine forwards only arguments reference CBLAS accepts: OpenBLAS reports bad ones
 * in its own way (xerbla_ with the Fortran routine's name), which is not CBLAS's. */
#define FWD_CSUB(name, params, args, check) \
  BLAS_EXPORT void name params;             \
  void name params {                        \
    if (!(check)) return;                   \
    loom__blas_host()->name args;           \
  }

BLAS_F77_FORWARDED(FWD_SUB, FWD_FUN)
CBLAS_FORWARDED(FWD_CSUB, FWD_FUN)
