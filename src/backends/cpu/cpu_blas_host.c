/* OpenBLAS's routines for the cpu backend, by dlsym on OpenBLAS's handle (cpu_blas_host.h says
 * why). */
#include "backends/cpu/cpu_blas_host.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static loom__cpu_blas table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static _Noreturn void table_fail(const char *what, const char *name) {
  const char *err = dlerror();
  fprintf(stderr, "loom: cpu backend: %s%s: %s\n", what, name, err ? err : "not found");
  abort();
}

static void *table_symbol(void *handle, const char *name) {
  void *p = dlsym(handle, name);
  if (!p) table_fail("OpenBLAS has no ", name);
  return p;
}

static void table_load(void) {
  Dl_info info;
  if (!dladdr((void *)openblas_get_config, &info) || !info.dli_fname)
    table_fail("cannot find the file of OpenBLAS", "");
  /* Already loaded (libloom links it): this only takes a handle on it. */
  void *handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) table_fail("cannot open OpenBLAS again at ", info.dli_fname);
  *(void **)&table.sgemm = table_symbol(handle, "cblas_sgemm");
  *(void **)&table.dgemm = table_symbol(handle, "cblas_dgemm");
  *(void **)&table.cgemm = table_symbol(handle, "cblas_cgemm");
  *(void **)&table.zgemm = table_symbol(handle, "cblas_zgemm");
  *(void **)&table.sgemv = table_symbol(handle, "cblas_sgemv");
  *(void **)&table.dgemv = table_symbol(handle, "cblas_dgemv");
  *(void **)&table.cgemv = table_symbol(handle, "cblas_cgemv");
  *(void **)&table.zgemv = table_symbol(handle, "cblas_zgemv");
}

const loom__cpu_blas *loom__cpu_blas_get(void) {
  pthread_once(&table_once, table_load);
  return &table;
}
