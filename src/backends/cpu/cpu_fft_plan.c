/* FFTW plans for the cpu backend (cpu_fft.h): made once per problem, cached, measured by
 * default and remembered across processes as wisdom in Loom's cache folder.
 *
 * FFTW's planner is not thread-safe, so every fftw*_plan_*, fftw*_destroy_plan and wisdom call
 * holds one process-wide mutex; the new-array execute calls are thread-safe and run outside it.
 * FFTW_MEASURE overwrites the arrays it plans on, so measured plans are made on stand-ins of the
 * same sizes and alignments. Cached plans live until exit (reachable from the cache, so
 * LeakSanitizer does not count them).
 *
 * Wisdom is per precision and per CPU (the cpuid brand string and signature name the file):
 * FFTW_MEASURE's choice on a Zen 5 is not one for a Skylake, and machines of this project change
 * kind between sessions. A file that does not read is ignored (the plans are measured again and
 * the file rewritten); it is written to a temporary name and renamed, so a reader never sees half
 * of one. */
#include <fftw3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "backends/cpu/cpu_fft.h"
#include "core/core.h"

#define FFT_CACHE_MAX 512

typedef struct fft_entry {
  loom__fft_key key;
  void *plan; /* fftw_plan or fftwf_plan */
} fft_entry;

static pthread_mutex_t fft_lock = PTHREAD_MUTEX_INITIALIZER;
static fft_entry fft_cache[FFT_CACHE_MAX];
static int32_t fft_cache_count;
static bool fft_ready;
static bool fft_measure;         /* FFTW_MEASURE is 0: the choice is a flag of its own */
static char fft_wisdom[2][1024]; /* per precision (0 f32, 1 f64): the file, "" for none */

int64_t loom__fft_len_in(const loom__fft_key *k) {
  return k->kind == LOOM__FFT_C2R ? k->n / 2 + 1 : k->n;
}

int64_t loom__fft_len_out(const loom__fft_key *k) {
  return k->kind == LOOM__FFT_R2C ? k->n / 2 + 1 : k->n;
}

int64_t loom__fft_elem_bytes(const loom__fft_key *k, bool input) {
  bool real = input ? k->kind == LOOM__FFT_R2C : k->kind == LOOM__FFT_C2R;
  return (k->dbl ? 8 : 4) * (real ? 1 : 2);
}

/* ---- wisdom ------------------------------------------------------------------------------- */

/* A file-name-safe name of this CPU: its brand string and family/model/stepping signature. */
static void cpu_name(char *buf, size_t size) {
  char brand[49] = "cpu";
  unsigned sig = 0;
#if defined(__x86_64__) || defined(__i386__)
  unsigned r[12], a, b, c, d;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    for (unsigned i = 0; i < 3; i++)
      __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    memcpy(brand, r, 48);
    brand[48] = '\0';
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) sig = a;
#endif
  size_t j = 0;
  for (size_t i = 0; brand[i] && j + 1 < size; i++) {
    char ch = brand[i];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
    if (ok)
      buf[j++] = ch;
    else if (j > 0 && buf[j - 1] != '_')
      buf[j++] = '_';
  }
  while (j > 0 && buf[j - 1] == '_') j--;
  snprintf(buf + j, size - j, "-%08x", sig);
}

/* The wisdom files' names (none without a cache folder or where it cannot be made). */
static void wisdom_paths(void) {
  const char *dir = getenv("LOOM_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char base[768], cpu[96];
  if (dir && *dir)
    snprintf(base, sizeof base, "%s/fftw", dir);
  else if (xdg && *xdg)
    snprintf(base, sizeof base, "%s/loom/fftw", xdg);
  else if (home && *home)
    snprintf(base, sizeof base, "%s/.cache/loom/fftw", home);
  else
    return;
  if (!loom__make_dirs(base)) return;
  cpu_name(cpu, sizeof cpu);
  snprintf(fft_wisdom[0], sizeof fft_wisdom[0], "%s/%s.f32.wisdom", base, cpu);
  snprintf(fft_wisdom[1], sizeof fft_wisdom[1], "%s/%s.f64.wisdom", base, cpu);
}

/* Writes one precision's wisdom (callers hold fft_lock). A failure only costs the next process
 * its measuring, so it is not an error of the transform. */
static void wisdom_save(int64_t dbl) {
  const char *path = fft_wisdom[dbl ? 1 : 0];
  if (!path[0]) return;
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  int ok = dbl ? fftw_export_wisdom_to_filename(tmp) : fftwf_export_wisdom_to_filename(tmp);
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

static void fft_init(void) {
  const char *m = getenv("LOOM_FFTW_MEASURE");
  fft_measure = !(m && m[0] == '0');
  fftw_init_threads();
  fftwf_init_threads();
  if (fft_measure) {
    wisdom_paths();
    /* a missing or unreadable file leaves no wisdom: plans are measured afresh */
    if (fft_wisdom[0][0]) (void)fftwf_import_wisdom_from_filename(fft_wisdom[0]);
    if (fft_wisdom[1][0]) (void)fftw_import_wisdom_from_filename(fft_wisdom[1]);
  }
  fft_ready = true;
}

/* ---- planning (callers hold fft_lock) ----------------------------------------------------- */

static void *plan_guru(const loom__fft_key *k, void *in, void *out, unsigned flags) {
  fftw_iodim64 dim = {k->n, k->stride, k->stride}, how[2];
  int hr = 0;
  for (int i = 0; i < 2; i++)
    if (k->loop[i][0] > 1) how[hr++] = (fftw_iodim64){k->loop[i][0], k->loop[i][1], k->loop[i][2]};
  /* fftwf_iodim64 has the same layout as fftw_iodim64. */
  const fftwf_iodim64 *fdim = (const fftwf_iodim64 *)&dim, *fhow = (const fftwf_iodim64 *)how;
  int sign = k->kind == LOOM__FFT_FORWARD ? FFTW_FORWARD : FFTW_BACKWARD;
  switch (k->kind) {
    case LOOM__FFT_FORWARD:
    case LOOM__FFT_BACKWARD:
      if (k->dbl) return fftw_plan_guru64_dft(1, &dim, hr, how, in, out, sign, flags);
      return fftwf_plan_guru64_dft(1, fdim, hr, fhow, in, out, sign, flags);
    case LOOM__FFT_R2C:
      if (k->dbl) return fftw_plan_guru64_dft_r2c(1, &dim, hr, how, in, out, flags);
      return fftwf_plan_guru64_dft_r2c(1, fdim, hr, fhow, in, out, flags);
    default:
      if (k->dbl) return fftw_plan_guru64_dft_c2r(1, &dim, hr, how, in, out, flags);
      return fftwf_plan_guru64_dft_c2r(1, fdim, hr, fhow, in, out, flags);
  }
}

/* Bytes an array of the key spans: the last element's offset plus one. */
static int64_t span_bytes(const loom__fft_key *k, bool input) {
  int64_t last = (input ? loom__fft_len_in(k) : loom__fft_len_out(k)) - 1;
  int64_t off = last * k->stride;
  for (int i = 0; i < 2; i++) off += (k->loop[i][0] - 1) * k->loop[i][input ? 1 : 2];
  return (off + 1) * loom__fft_elem_bytes(k, input);
}

/* A measured plan on stand-ins of the key's sizes and alignments; NULL when they cannot be
 * allocated. */
static void *plan_measured(const loom__fft_key *k, unsigned flags) {
  int64_t bin = span_bytes(k, true), bout = span_bytes(k, false);
  char *a = fftw_malloc((size_t)(LOOM_MAX(bin, bout) + 64));
  char *b = k->inplace ? NULL : fftw_malloc((size_t)(bout + 64));
  void *plan = NULL;
  if (a && (k->inplace || b))
    plan = plan_guru(k, a + k->align_in, k->inplace ? a + k->align_in : b + k->align_out, flags);
  fftw_free(a);
  fftw_free(b);
  return plan;
}

static void *plan_create(const loom__fft_key *k, void *in, void *out) {
  if (!fft_ready) fft_init();
  if (k->dbl)
    fftw_plan_with_nthreads((int)k->nthreads);
  else
    fftwf_plan_with_nthreads((int)k->nthreads);
  unsigned extra = k->unaligned ? FFTW_UNALIGNED : 0;
  if (!fft_measure) return plan_guru(k, in, out, FFTW_ESTIMATE | extra);
  void *plan = plan_measured(k, FFTW_MEASURE | extra);
  if (plan) wisdom_save(k->dbl);
  return plan;
}

loom_status loom__fft_plan_get(const loom__fft_key *k, void *in, void *out, void **out_plan,
                               bool *out_owned) {
  *out_plan = NULL;
  *out_owned = false;
  pthread_mutex_lock(&fft_lock);
  for (int32_t i = 0; i < fft_cache_count; i++)
    if (memcmp(&fft_cache[i].key, k, sizeof *k) == 0) {
      *out_plan = fft_cache[i].plan;
      pthread_mutex_unlock(&fft_lock);
      return LOOM_OK;
    }
  void *plan = plan_create(k, in, out);
  if (plan && fft_cache_count < FFT_CACHE_MAX)
    fft_cache[fft_cache_count++] = (fft_entry){*k, plan};
  else if (plan)
    *out_owned = true;
  pthread_mutex_unlock(&fft_lock);
  if (!plan)
    return loom__error(LOOM_ERR_INTERNAL, "fft: FFTW could not plan a length-%lld transform",
                       (long long)k->n);
  *out_plan = plan;
  return LOOM_OK;
}

void loom__fft_plan_release(const loom__fft_key *k, void *plan, bool owned) {
  if (!owned || !plan) return;
  pthread_mutex_lock(&fft_lock);
  if (k->dbl)
    fftw_destroy_plan(plan);
  else
    fftwf_destroy_plan(plan);
  pthread_mutex_unlock(&fft_lock);
}

void loom__fft_execute(const loom__fft_key *k, void *plan, void *in, void *out) {
  switch (k->kind) {
    case LOOM__FFT_FORWARD:
    case LOOM__FFT_BACKWARD:
      if (k->dbl)
        fftw_execute_dft(plan, in, out);
      else
        fftwf_execute_dft(plan, in, out);
      break;
    case LOOM__FFT_R2C:
      if (k->dbl)
        fftw_execute_dft_r2c(plan, in, out);
      else
        fftwf_execute_dft_r2c(plan, in, out);
      break;
    default:
      if (k->dbl)
        fftw_execute_dft_c2r(plan, in, out);
      else
        fftwf_execute_dft_c2r(plan, in, out);
      break;
  }
}
