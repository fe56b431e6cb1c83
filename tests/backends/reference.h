/* Helpers for the cpu kernel tests: typed element access as double/int64, views over host
 * arrays, one-op graphs, and running an op through loom__cpu_run_op with its scratch.
 * Expected values are computed by the tests themselves with plain loops over these. */
#ifndef LOOM_TESTS_BACKENDS_REFERENCE_H
#define LOOM_TESTS_BACKENDS_REFERENCE_H

#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "loom/loom.h"

/* glibc's <complex.h> defines CMPLX for GCC only; clang has the same builtin. */
#ifndef CMPLX
#define CMPLX(re, im) __builtin_complex((double)(re), (double)(im))
#endif

/* A type from a dims list: ref_type(LOOM_F32, 2, (int64_t[]){3, 4}). */
loom_type ref_type(loom_dtype dt, int32_t rank, const int64_t *dims);
int64_t ref_elements(const loom_type *t);

/* Element i (an element offset) of storage of dtype dt. ref_get gives the real part as
 * double (f16/bf16 widened exactly); ref_get_im the imaginary part (0 for real dtypes);
 * ref_get_i the integer value of bool/integer dtypes. */
double ref_get(loom_dtype dt, const void *p, int64_t i);
double ref_get_im(loom_dtype dt, const void *p, int64_t i);
int64_t ref_get_i(loom_dtype dt, const void *p, int64_t i);
/* Stores v (rounded once to dt for floats; truncated to dt's width for integers, which
 * wraps; != 0 for bool) and, for complex, im as the imaginary part. */
void ref_set(loom_dtype dt, void *p, int64_t i, double v);
void ref_set_c(loom_dtype dt, void *p, int64_t i, double re, double im);
void ref_set_i(loom_dtype dt, void *p, int64_t i, int64_t v);
/* v truncated to dt's width, sign-extended for signed dtypes (the wrapped value). */
int64_t ref_wrap(loom_dtype dt, uint64_t v);
/* The smallest and largest values of an integer dtype. */
int64_t ref_int_min(loom_dtype dt);
int64_t ref_int_max(loom_dtype dt);

/* A view of type t over data with element strides (NULL: dense). */
loom__view ref_view(const loom_type *t, void *data, const int64_t *strides);
/* Zeroed dense storage for t (at least 1 byte), freed with free(). */
void *ref_alloc(const loom_type *t);
/* Deterministic pseudo-random numbers in [-1, 1). */
double ref_rand(void);
void ref_seed(uint64_t seed);

/* A graph with params of the given types; *params gets their values. */
loom_graph *ref_graph(int32_t n, const loom_type *types, loom_value *params);
/* The op that produced value v. */
const loom__op *ref_op(const loom_graph *g, loom_value v);
/* The result type of value v. */
loom_type ref_value_type(const loom_graph *g, loom_value v);
/* Runs op with its scratch (loom__op_scratch_bytes, allocated here). */
loom_status ref_run(const loom_graph *g, const loom__op *op, const loom__view *in, const loom__view *out);

/* Compares a float result with the expected one: NaN matches NaN, infinities match exactly,
 * otherwise |got - want| <= tol * max(1, |want|). */
bool ref_close(double got, double want, double tol);
/* The tolerance for one rounding in dt (a few ulps), for results computed in other ways. */
double ref_tol(loom_dtype dt);

#endif
