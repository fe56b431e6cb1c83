/* Writes graphs as canonical .lir text (shared/IR.md, "Text format"); parse.c reads it back.
 *
 * The canonical form:
 *
 *   graph NAME(p: TYPE, q: TYPE) {
 *     NAMES = OP [DATA] OPERANDS ATTRIBUTES : TYPE
 *     NAMES = loop n=N piece=P [slices=S] {
 *       in NAME = OUTER [axis=A] [offset=O]
 *       NAMES = OP ...
 *       out NAME COMBINE [axis=A] [k=K largest=B]
 *     }
 *     return a, b
 *   }
 *
 * - Two-space indent, single spaces, one statement per line; unnamed values print as v<id>
 *   (loom__value_label), which the builder reserves for that value alone.
 * - Attributes: only those set, in one fixed order that follows IR.md's examples (k axis n
 *   largest axes keepdims to value shape perm start stop step reps stride padding dilation
 *   groups), so IR.md's statements print back as IR.md writes them.
 * - A loop (docs/ir-loops.md) prints as a block, its body two spaces deeper (slices only where
 *   not the default, 2): one `in` line per parameter (axis only for a sliced operand, offset
 *   only where not 0), the body's ops, one `out` line per result (concat with its axis; topk
 *   with axis, k and largest), and no ': TYPE'. The body's values are labelled in the body's
 *   own graph (v<id> counts its values), which is the scope the parser reads them in.
 * - Every other single-result statement ends in ': TYPE'. topk, the one multi-result op, has none:
 *   its results have different types and IR.md's grammar has room for one; its types follow
 *   from the operand anyway. (The parser also accepts one type, for the first result, or one
 *   per result.)
 * - Constants: a flat list in C order ("[1,2,3]"), bare for a scalar ("2"); complex as
 *   interleaved re,im pairs, always bracketed; bool as true/false; f16/bf16 through f32,
 *   which is exact.
 * - Floats: the shortest decimal that reads back to the same value of the element's dtype
 *   (%.17g at most; integral values below 2^53 in full), and inf, -inf, nan. fill's float value always shows
 * a '.' or an exponent, so that it reads back as a float and not as an integer.
 * - Numbers are written in the C locale whatever the process's locale.
 *
 * So print(parse(print(g))) == print(g), and the re-parsed graph equals g (NaN payloads and
 * the sign of NaN aside).
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* Output goes to a FILE or to a growing string. The string is allocated with plain malloc,
 * not loom__malloc, because the caller frees it with free() (graph.h): a counted allocation
 * freed uncounted would show as a leak in loom_testing_live_allocations. */
typedef struct sink {
  FILE *file;
  char *buf;
  size_t len, cap;
  bool failed;
} sink;

static void put(sink *s, const char *fmt, ...) LOOM_PRINTF(2, 3);
static void put(sink *s, const char *fmt, ...) {
  if (s->failed) return;
  va_list ap;
  va_start(ap, fmt);
  if (s->file) {
    if (vfprintf(s->file, fmt, ap) < 0) s->failed = true;
    va_end(ap);
    return;
  }
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? s->cap - s->len : 0, fmt, ap);
  va_end(ap);
  if (n >= 0 && s->buf && (size_t)n < s->cap - s->len) {
    s->len += (size_t)n;
  } else if (n >= 0) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap - s->len <= (size_t)n) cap *= 2;
    char *bigger = realloc(s->buf, cap);
    if (!bigger) {
      s->failed = true;
    } else {
      s->buf = bigger;
      s->cap = cap;
      s->len += (size_t)vsnprintf(s->buf + s->len, s->cap - s->len, fmt, ap2);
    }
  } else {
    s->failed = true;
  }
  va_end(ap2);
}

/* ---- numbers ---------------------------------------------------------------------------- */

/* True when text reads back (as parse.c reads it) to the same value of dtype dt. */
static bool reads_back(const char *text, double want, loom_dtype dt) {
  double d = strtod(text, NULL);
  switch (dt) {
    case LOOM_F16:
      return loom_f32_to_f16((float)d) == loom_f32_to_f16((float)want);
    case LOOM_BF16:
      return loom_f32_to_bf16((float)d) == loom_f32_to_bf16((float)want);
    case LOOM_F32:
    case LOOM_C64:
      return (float)d == (float)want;
    default:
      return d == want;
  }
}

/* Drops the '+' and leading zeros of an exponent: 6e-08 -> 6e-8, 4e+100 -> 4e100. */
static void tidy_exponent(char *buf) {
  char *e = strchr(buf, 'e');
  if (!e) return;
  char *src = e + 1, *dst = e + 1;
  if (*src == '+')
    src++;
  else if (*src == '-')
    *dst++ = *src++;
  while (src[0] == '0' && src[1]) src++;
  memmove(dst, src, strlen(src) + 1);
}

/* The shortest decimal for v as an element of dt; with `point`, always with '.' or 'e'.
 * Integral values below 2^53 print in full (65504, not 6.55e4). */
static void format_real(double v, loom_dtype dt, bool point, char *buf, size_t size) {
  if (isnan(v)) {
    snprintf(buf, size, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, size, v < 0 ? "-inf" : "inf");
    return;
  }
  if (v == trunc(v) && fabs(v) < 0x1p53) {
    snprintf(buf, size, "%.0f", v);
  } else {
    /* The fewest digits that read back. Reading back is monotone in the digits (the
     * nearest p+1-digit decimal is at least as near as the nearest p-digit one), so bisect;
     * the answer is checked, and 17 digits always read back. */
    int lo = 1, hi = dt == LOOM_F16 || dt == LOOM_BF16 ? 5 : dt == LOOM_F32 || dt == LOOM_C64 ? 9 : 17;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      snprintf(buf, size, "%.*g", mid, v);
      if (reads_back(buf, v, dt))
        hi = mid;
      else
        lo = mid + 1;
    }
    snprintf(buf, size, "%.*g", hi, v);
    if (!reads_back(buf, v, dt)) snprintf(buf, size, "%.17g", v);
    tidy_exponent(buf);
  }
  if (point && !strpbrk(buf, ".e")) strncat(buf, ".0", size - strlen(buf) - 1);
}

static void put_real(sink *s, double v, loom_dtype dt, bool point) {
  char buf[320]; /* at most 24 bytes are written, but GCC cannot see that `prec` <= 17 */
  format_real(v, dt, point, buf, sizeof buf);
  put(s, "%s", buf);
}

/* ---- parts ------------------------------------------------------------------------------ */

static void put_type(sink *s, const loom_type *t) {
  char buf[LOOM_TYPE_STRING_MAX];
  put(s, "%s", loom_type_format(t, buf, sizeof buf));
}

static void put_label(sink *s, const loom_graph *g, int32_t id) {
  char buf[32];
  put(s, "%s", loom__value_label(g, id, buf, sizeof buf));
}

static void put_list(sink *s, const loom_int_list *l) {
  put(s, "[");
  for (int32_t i = 0; i < l->count; i++) put(s, i ? ",%lld" : "%lld", (long long)l->v[i]);
  put(s, "]");
}

/* Attribute keys and the order they print in: IR.md's, so its examples print back as
 * written (`topk d2 k=10 axis=1 largest=false`, `reduce_sum sq axes=[2] keepdims=false`,
 * `conv x w stride=.. padding=.. dilation=.. groups=G`, `irfft x axis=A n=N`). */
static const struct {
  const char *name;
  uint32_t bit;
} attr_order[] = {
    {"to", LOOM_ATTR_TO}, /* cast's only attribute; quantize's first: `quantize w to=q4 axis=1` */
    {"k", LOOM_ATTR_K},
    {"axis", LOOM_ATTR_AXIS},
    {"n", LOOM_ATTR_N},
    {"largest", LOOM_ATTR_LARGEST},
    {"axes", LOOM_ATTR_AXES},
    {"keepdims", LOOM_ATTR_KEEPDIMS},
    {"value", LOOM_ATTR_VALUE},
    {"shape", LOOM_ATTR_SHAPE},
    {"perm", LOOM_ATTR_PERM},
    {"start", LOOM_ATTR_START},
    {"stop", LOOM_ATTR_STOP},
    {"step", LOOM_ATTR_STEP},
    {"reps", LOOM_ATTR_REPS},
    {"stride", LOOM_ATTR_STRIDE},
    {"padding", LOOM_ATTR_PADDING},
    {"dilation", LOOM_ATTR_DILATION},
    {"groups", LOOM_ATTR_GROUPS},
};
_Static_assert(sizeof attr_order / sizeof attr_order[0] == 18, "one entry per LOOM_ATTR_* bit");

static void put_attrs(sink *s, const loom_attrs *a) {
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(attr_order); i++) {
    uint32_t bit = attr_order[i].bit;
    if (!(a->set & bit)) continue;
    put(s, " %s=", attr_order[i].name);
    switch (bit) {
      case LOOM_ATTR_AXIS:
        put(s, "%lld", (long long)a->axis);
        break;
      case LOOM_ATTR_K:
        put(s, "%lld", (long long)a->k);
        break;
      case LOOM_ATTR_N:
        put(s, "%lld", (long long)a->n);
        break;
      case LOOM_ATTR_GROUPS:
        put(s, "%lld", (long long)a->groups);
        break;
      case LOOM_ATTR_LARGEST:
        put(s, "%s", a->largest ? "true" : "false");
        break;
      case LOOM_ATTR_KEEPDIMS:
        put(s, "%s", a->keepdims ? "true" : "false");
        break;
      case LOOM_ATTR_TO:
        put(s, "%s", loom_dtype_name(a->to));
        break;
      case LOOM_ATTR_VALUE:
        if (a->value_is_int)
          put(s, "%lld", (long long)a->ivalue);
        else
          put_real(s, a->value, LOOM_F64, true);
        break;
      default:
        put_list(s, loom__attrs_list((loom_attrs *)a, bit)); /* only read */
        break;
    }
  }
}

/* Component i of constant data of dtype dt (complex: i counts re and im). */
static void put_component(sink *s, loom_dtype dt, const void *data, int64_t i) {
  const char *b = (const char *)data;
  switch (dt) {
    case LOOM_BOOL:
      put(s, "%s", b[i] ? "true" : "false");
      return;
    case LOOM_I8:
      put(s, "%d", (int)((const int8_t *)data)[i]);
      return;
    case LOOM_U8:
      put(s, "%u", (unsigned)((const uint8_t *)data)[i]);
      return;
    case LOOM_I16:
      put(s, "%d", (int)((const int16_t *)data)[i]);
      return;
    case LOOM_I32:
      put(s, "%ld", (long)((const int32_t *)data)[i]);
      return;
    case LOOM_I64:
      put(s, "%lld", (long long)((const int64_t *)data)[i]);
      return;
    case LOOM_F16:
      put_real(s, loom_f16_to_f32(((const uint16_t *)data)[i]), dt, false);
      return;
    case LOOM_BF16:
      put_real(s, loom_bf16_to_f32(((const uint16_t *)data)[i]), dt, false);
      return;
    case LOOM_F32:
    case LOOM_C64:
      put_real(s, ((const float *)data)[i], dt, false);
      return;
    default:
      put_real(s, ((const double *)data)[i], dt, false);
      return;
  }
}

static void put_constant(sink *s, const loom__op *o, const loom_type *t) {
  int64_t n = 0;
  if (loom_type_elements(t, &n) || !o->const_data) n = 0;
  bool complex = loom_dtype_is_complex(t->dtype);
  if (complex) n *= 2;
  if (t->rank == 0 && !complex && n == 1) {
    put(s, " ");
    put_component(s, t->dtype, o->const_data, 0);
    return;
  }
  put(s, " [");
  for (int64_t i = 0; i < n && !s->failed; i++) {
    if (i) put(s, ",");
    put_component(s, t->dtype, o->const_data, i);
  }
  put(s, "]");
}

static void put_ops(sink *s, const loom_graph *g, int32_t indent);

static void put_indent(sink *s, int32_t indent) {
  put(s, "%*s", (int)indent, "");
}

/* A loop's header, its body one level deeper, and the closing brace (docs/ir-loops.md). The
 * body's names are its own graph's: `in` lines name the outer value each parameter reads. */
static void put_loop(sink *s, const loom_graph *g, const loom__op *o, int32_t indent) {
  const loom__loop *l = o->loop;
  const loom_graph *b = l->body;
  put(s, " n=%lld piece=%lld", (long long)l->n, (long long)l->piece);
  if (l->slices != LOOM_LOOP_SLICES_DEFAULT) put(s, " slices=%d", (int)l->slices);
  put(s, " {\n");
  for (int32_t i = 0; i < o->n_inputs && i < b->n_params; i++) {
    put_indent(s, indent + 2);
    put(s, "in ");
    put_label(s, b, b->params[i]);
    put(s, " = ");
    put_label(s, g, o->inputs[i]);
    if (l->rules[i].axis >= 0) put(s, " axis=%d", (int)l->rules[i].axis);
    if (l->rules[i].offset != 0) put(s, " offset=%lld", (long long)l->rules[i].offset);
    if (l->rules[i].stride > 1) put(s, " stride=%lld", (long long)l->rules[i].stride);
    if (l->rules[i].halo != 0) put(s, " halo=%lld", (long long)l->rules[i].halo);
    put(s, "\n");
  }
  put_ops(s, b, indent + 2);
  for (int32_t j = 0; j < o->n_outputs && j < b->n_outputs; j++) {
    const loom_loop_output *c = &l->combines[j];
    put_indent(s, indent + 2);
    put(s, "out ");
    put_label(s, b, b->outputs[j]);
    put(s, " %s", loom_combine_name(c->combine));
    if (c->combine == LOOM_COMBINE_CONCAT) put(s, " axis=%d", (int)c->axis);
    if (c->combine == LOOM_COMBINE_TOPK)
      put(s, " axis=%d k=%lld largest=%s", (int)c->axis, (long long)c->k, c->largest ? "true" : "false");
    put(s, "\n");
  }
  put_indent(s, indent);
  put(s, "}");
}

/* A fused op's block (docs/ir-fusion.md): a loop's without its attributes, rules and combines. */
static void put_fused(sink *s, const loom_graph *g, const loom__op *o, int32_t indent) {
  const loom_graph *b = o->fused;
  put(s, " {\n");
  for (int32_t i = 0; i < o->n_inputs && i < b->n_params; i++) {
    put_indent(s, indent + 2);
    put(s, "in ");
    put_label(s, b, b->params[i]);
    put(s, " = ");
    put_label(s, g, o->inputs[i]);
    put(s, "\n");
  }
  put_ops(s, b, indent + 2);
  for (int32_t j = 0; j < b->n_outputs; j++) {
    put_indent(s, indent + 2);
    put(s, "out ");
    put_label(s, b, b->outputs[j]);
    put(s, "\n");
  }
  put_indent(s, indent);
  put(s, "}");
}

static void put_op(sink *s, const loom_graph *g, const loom__op *o, int32_t indent) {
  put_indent(s, indent);
  for (int32_t r = 0; r < o->n_outputs; r++) {
    if (r) put(s, ", ");
    put_label(s, g, o->outputs[r]);
  }
  put(s, " = %s", loom_op_name(o->kind));
  if (o->loop || o->fused) {
    if (o->loop)
      put_loop(s, g, o, indent);
    else
      put_fused(s, g, o, indent);
    put(s, "\n");
    return;
  }
  const loom_type *t0 = &g->values[o->outputs[0]].type;
  if (o->kind == LOOM_OP_CONSTANT) put_constant(s, o, t0);
  for (int32_t i = 0; i < o->n_inputs; i++) {
    put(s, " ");
    put_label(s, g, o->inputs[i]);
  }
  put_attrs(s, &o->attrs);
  if (o->n_outputs == 1) {
    put(s, " : ");
    put_type(s, t0);
  }
  put(s, "\n");
}

static void put_ops(sink *s, const loom_graph *g, int32_t indent) {
  for (int32_t i = 0; i < g->n_ops && !s->failed; i++) put_op(s, g, &g->ops[i], indent);
}

static void put_graph(sink *s, const loom_graph *g) {
  put(s, "graph %s(", g->name);
  for (int32_t i = 0; i < g->n_params; i++) {
    put(s, i ? ", " : "");
    put_label(s, g, g->params[i]);
    put(s, ": ");
    put_type(s, &g->values[g->params[i]].type);
  }
  put(s, ") {\n");
  put_ops(s, g, 2);
  /* A graph still being built has no return yet; it prints without one. */
  if (g->returned) {
    put(s, "  return ");
    for (int32_t i = 0; i < g->n_outputs; i++) {
      put(s, i ? ", " : "");
      put_label(s, g, g->outputs[i]);
    }
    put(s, "\n");
  }
  put(s, "}\n");
}

/* %g follows LC_NUMERIC; .lir always uses '.'. */
static void print_in_c_locale(sink *s, const loom_graph *g) {
  locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  locale_t old = c ? uselocale(c) : (locale_t)0;
  put_graph(s, g);
  if (c) {
    uselocale(old);
    freelocale(c);
  }
}

loom_status loom_graph_print(const loom_graph *graph, FILE *stream) {
  if (!graph || !stream) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_print: NULL argument");
  sink s = {.file = stream};
  errno = 0;
  print_in_c_locale(&s, graph);
  if (s.failed || ferror(stream))
    return loom__error(LOOM_ERR_IO, "printing graph '%s': %s", graph->name,
                       errno ? strerror(errno) : "write error");
  return LOOM_OK;
}

loom_status loom_graph_to_string(const loom_graph *graph, char **out_text) {
  if (!out_text) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_to_string: out_text is NULL");
  *out_text = NULL;
  if (!graph) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_to_string: graph is NULL");
  sink s = {0};
  print_in_c_locale(&s, graph);
  if (s.failed || !s.buf) {
    free(s.buf);
    return loom__oom("printing a graph");
  }
  *out_text = s.buf;
  return LOOM_OK;
}
