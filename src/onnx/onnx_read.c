/* Reading an ONNX model: the file, the checks that it is a model Loom reads, its inputs and
 * initializers, each node through its op family's lowering, and its outputs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx_internal.h"

/* The opsets of the default domain whose ops are lowered as their spec says. Before opset 7,
 * ops took attributes that later ones dropped (Add's broadcast, consumed_inputs): the
 * lowerings do not list those, so a node that uses one is refused, and one that does not means
 * what the later opset's op means. */
#define OPSET_MIN 1
#define OPSET_MAX 17

void loom_onnx_options_init(loom_onnx_options *options) {
  if (options) memset(options, 0, sizeof *options);
}

void loom__onnx_lir_name(const loom_graph *g, const char *name, char *buf, size_t size) {
  size_t o = 0;
  if (!name[0] || (name[0] >= '0' && name[0] <= '9') || (name[0] == 'v' && name[1] >= '0' && name[1] <= '9'))
    buf[o++] = '_';
  for (const char *p = name; *p && o + 1 < size; p++) {
    char ch = *p;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    buf[o++] = ok ? ch : '_';
  }
  buf[o] = '\0';
  for (int n = 2; loom_graph_find(g, buf).id >= 0 && o + 12 < size; n++)
    snprintf(buf + o, size - o, "_%d", n);
}

static loom_status check_model(const char *path, const Onnx__ModelProto *m, int64_t *out_opset) {
  if (!m->has_ir_version || !m->graph)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: not an ONNX model (no %s)", path,
                       m->has_ir_version ? "graph" : "ir_version");
  *out_opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) && o->has_version)
      *out_opset = o->version;
  }
  if (*out_opset < 0) *out_opset = m->ir_version <= 2 ? 1 : OPSET_MAX; /* IR 3 on must say; say the newest */
  if (*out_opset < OPSET_MIN || *out_opset > OPSET_MAX)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: opset %lld of the default ONNX domain; Loom reads opsets %d to %d", path,
                       (long long)*out_opset, OPSET_MIN, OPSET_MAX);
  return LOOM_OK;
}

static loom_status add_initializers(loom__onnx *c, Onnx__GraphProto *gp) {
  if (gp->n_sparse_initializer)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: sparse initializers ('%s') are not supported", c->path,
                       gp->sparse_initializer[0]->values && gp->sparse_initializer[0]->values->name
                           ? gp->sparse_initializer[0]->values->name
                           : "");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    Onnx__TensorProto *t = gp->initializer[i];
    char what[320];
    snprintf(what, sizeof what, "initializer '%s'", t->name ? t->name : "");
    if (!t->name || !*t->name)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: initializer %zu has no name", c->path, i);
    loom_type type;
    void *data;
    loom_status s = loom__onnx_tensor_decode(t, c->path, what, &type, &data);
    loom__onnx_val *v;
    if (!s) s = loom__onnx_add(c, t->name, &type, &v);
    if (s) {
      loom__free(data);
      return s;
    }
    if (!data && !(data = loom__malloc(1))) return loom__oom("an empty initializer");
    v->host = data;
    v->host_owned = true;
  }
  return LOOM_OK;
}

/* The type an input declares, or the one the options give for it. */
static loom_status input_type(loom__onnx *c, const Onnx__ValueInfoProto *in, const loom_onnx_options *opt,
                              loom_type *out) {
  const Onnx__TypeProto *tp = in->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: input '%s' is not a tensor (sequences, maps and optionals are not supported)",
                       c->path, in->name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  loom_dtype d;
  if (!tt->has_elem_type || !loom__onnx_dtype(tt->elem_type, &d))
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: input '%s' has element type %s, which Loom has no dtype for", c->path, in->name,
                       loom__onnx_dtype_name(tt->has_elem_type ? tt->elem_type : 0));
  const loom_type *given = NULL;
  for (int32_t i = 0; opt && i < opt->n_input_types; i++)
    if (opt->input_names[i] && !strcmp(opt->input_names[i], in->name)) given = &opt->input_types[i];
  for (int32_t i = 0; opt && i < opt->n_input_values; i++)
    if (opt->value_names[i] && !strcmp(opt->value_names[i], in->name)) given = &opt->input_values[i].type;
  int32_t rank = tt->shape ? (int32_t)tt->shape->n_dim : -1;
  if (given) {
    bool ok = given->dtype == d && (rank < 0 || given->rank == rank);
    for (int32_t j = 0; ok && rank > 0 && j < rank; j++) {
      const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[j];
      if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
        ok = dim->dim_value == given->dims[j];
    }
    char buf[LOOM_TYPE_STRING_MAX];
    if (!ok)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s: input '%s': the type given, %s, does not match the model's", c->path, in->name,
                         loom_type_format(given, buf, sizeof buf));
    *out = *given;
    return LOOM_OK;
  }
  if (rank < 0 || rank > LOOM_MAX_RANK)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: input '%s' has %s: give its type (loom_onnx_options)",
                       c->path, in->name, rank < 0 ? "no shape" : "more than 8 dimensions");
  int64_t dims[LOOM_MAX_RANK];
  for (int32_t j = 0; j < rank; j++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[j];
    if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
      return loom__error(
          LOOM_ERR_UNSUPPORTED,
          "%s: input '%s' has a symbolic dimension %d ('%s'): give its type (loom_onnx_options)", c->path,
          in->name, j,
          dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dim->dim_param : "");
    dims[j] = dim->dim_value;
  }
  if (loom_type_make(d, rank, dims, out))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: input '%s': %s", c->path, in->name, loom_last_error());
  return LOOM_OK;
}

/* The value the options give for input `name`, or NULL. */
static const loom_tensor *given_value(const char *name, const loom_onnx_options *opt) {
  for (int32_t i = 0; opt && i < opt->n_input_values; i++)
    if (opt->value_names[i] && !strcmp(opt->value_names[i], name)) return &opt->input_values[i];
  return NULL;
}

static loom_status add_inputs(loom__onnx *c, const Onnx__GraphProto *gp, const loom_onnx_options *opt) {
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *in = gp->input[i];
    if (!in->name || !*in->name)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: input %zu has no name", c->path, i);
    if (loom__onnx_find(c, in->name)) continue; /* an initializer listed as an input (IR 3): a constant */
    loom_type type;
    loom__onnx_val *v;
    loom_status s = input_type(c, in, opt, &type);
    if (!s) s = loom__onnx_add(c, in->name, &type, &v);
    if (s) return s;
    const loom_tensor *value = given_value(in->name, opt);
    if (value) { /* known now: a constant like an initializer */
      int64_t bytes;
      loom_type_bytes(&type, &bytes);
      if (!(v->host = loom__malloc(bytes ? (size_t)bytes : 1))) return loom__oom("an input's value");
      if (bytes) memcpy(v->host, value->data, (size_t)bytes);
      v->host_owned = true;
      continue;
    }
    char name[256];
    loom__onnx_lir_name(c->g, in->name, name, sizeof name);
    v->v = loom_graph_param(c->g, name, &type);
    if (c->g->error) return c->g->error;
  }
  return LOOM_OK;
}

static const loom__onnx_op *find_op(const char *op_type) {
  static const loom__onnx_op *tables[] = {loom__onnx_ops_math,   loom__onnx_ops_layout, loom__onnx_ops_reduce,
                                          loom__onnx_ops_nn,     loom__onnx_ops_gather, loom__onnx_ops_loss,
                                          loom__onnx_ops_resize, loom__onnx_ops_einsum};
  for (int32_t t = 0; t < LOOM_ARRAY_SIZE(tables); t++)
    for (const loom__onnx_op *o = tables[t]; o->op_type; o++)
      if (!strcmp(o->op_type, op_type)) return o;
  return NULL;
}

/* Whether `name` is in the comma-separated list. */
static bool listed(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && !memcmp(p, name, n)) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* The checks every node passes before its lowering runs. */
static loom_status check_node(loom__onnx *c, const Onnx__NodeProto *n, const loom__onnx_op **out_op) {
  if (!n->op_type || !*n->op_type) return loom__onnx_invalid(c, "no op type");
  if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
    return loom__onnx_refuse(c, "ops of domain '%s' are not supported", n->domain);
  const loom__onnx_op *op = find_op(n->op_type);
  if (!op) return loom__onnx_refuse(c, "op %s is not supported", n->op_type);
  for (size_t i = 0; i < n->n_attribute; i++) {
    const char *a = n->attribute[i]->name ? n->attribute[i]->name : "";
    if (!listed(op->attrs, a)) return loom__onnx_refuse(c, "attribute '%s' is not supported", a);
  }
  for (size_t i = 0; i < n->n_input; i++)
    if (n->input[i][0] && !loom__onnx_find(c, n->input[i]))
      return loom__onnx_invalid(c, "input '%s' is not defined before this node", n->input[i]);
  *out_op = op;
  return LOOM_OK;
}

static loom_status lower_nodes(loom__onnx *c, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    c->node = n;
    c->node_index = (int32_t)i;
    const loom__onnx_op *op = NULL;
    loom_status s = check_node(c, n, &op);
    if (!s && !loom__onnx_fold(c, n, &s)) s = op->lower(c, n, op->arg);
    if (!s && c->g->error) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", loom_last_error());
      s = loom__onnx_refuse(c, "Loom cannot build it: %s", msg);
    }
    for (size_t k = 0; !s && k < n->n_output; k++)
      if (n->output[k][0] && !loom__onnx_find(c, n->output[k]))
        s = loom__onnx_refuse(c, "output %zu ('%s') is not supported", k, n->output[k]);
    if (s) return s;
  }
  c->node = NULL;
  return LOOM_OK;
}

static loom_status set_outputs(loom__onnx *c, const Onnx__GraphProto *gp) {
  if (!gp->n_output) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the graph has no outputs", c->path);
  loom_value *outs = loom__calloc(gp->n_output, sizeof *outs);
  if (!outs) return loom__oom("the graph's outputs");
  loom_status s = LOOM_OK;
  for (size_t i = 0; !s && i < gp->n_output; i++) {
    const char *name = gp->output[i]->name ? gp->output[i]->name : "";
    loom__onnx_val *v = loom__onnx_find(c, name);
    if (!v) {
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: output '%s' is computed by no node", c->path, name);
      break;
    }
    bool named = v->named; /* read before materialize, which may move c->vals */
    loom_value before = v->v, x = loom__onnx_materialize(c, v);
    if (c->g->error) break;
    /* A value that already has another name (an input, an earlier output, the value an
     * Identity passed on) is returned through a view of its own, so each output carries its
     * ONNX name; one named after this output by its node is returned as it is. */
    bool own = named && before.id == x.id;
    if (loom_value_name(c->g, x) && !own) {
      const loom_type t_copy = *loom_value_type(c->g, x), *t = &t_copy;
      x = loom_reshape(c->g, x, t->rank, t->dims);
    }
    char lname[256];
    if (!own) loom__onnx_lir_name(c->g, name, lname, sizeof lname);
    if (!own && !c->g->error) s = loom_value_set_name(c->g, x, lname);
    outs[i] = x;
  }
  if (!s && c->g->error) s = c->g->error;
  if (!s) s = loom_graph_return(c->g, outs, (int32_t)gp->n_output);
  loom__free(outs);
  return s;
}

static void context_free(loom__onnx *c) {
  for (int32_t i = 0; i < c->n_vals; i++) {
    if (c->vals[i].host_owned) loom__free(c->vals[i].host);
    loom__free(c->vals[i].name);
  }
  loom__free(c->vals);
  loom__free(c->slots);
}

static loom_status read_graph(loom__onnx *c, Onnx__GraphProto *gp, const loom_onnx_options *opt) {
  loom_status s = add_initializers(c, gp);
  if (!s) s = add_inputs(c, gp, opt);
  if (!s) s = lower_nodes(c, gp);
  if (!s) s = set_outputs(c, gp);
  if (!s) s = loom_graph_verify(c->g);
  return s;
}

loom_status loom_graph_from_onnx_bytes(const void *data, size_t size, const char *path,
                                       const loom_onnx_options *opt, loom_graph **out_graph) {
  if (out_graph) *out_graph = NULL;
  if (!out_graph || (!data && size))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_from_onnx: NULL argument");
  if (!path) path = "(memory)";
  Onnx__ModelProto *m = onnx__model_proto__unpack(&loom__onnx_allocator, size, data);
  if (!m)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: not an ONNX model, or truncated (the protobuf does not parse)", path);
  loom__onnx c;
  memset(&c, 0, sizeof c);
  c.path = path;
  loom_status s = check_model(path, m, &c.opset);
  if (!s) {
    char name[256];
    const char *gname = m->graph->name && *m->graph->name ? m->graph->name : "main";
    snprintf(name, sizeof name, "%s", gname);
    for (char *p = name; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
        *p = '_';
    if (name[0] >= '0' && name[0] <= '9') name[0] = '_';
    s = loom_graph_create(name, &c.g);
  }
  if (!s) s = read_graph(&c, m->graph, opt);
  context_free(&c);
  onnx__model_proto__free_unpacked(m, &loom__onnx_allocator);
  if (s) {
    loom_graph_destroy(c.g);
    return loom__onnx_one_line(s, path);
  }
  *out_graph = c.g;
  return LOOM_OK;
}

loom_status loom_graph_from_onnx(const char *path, const loom_onnx_options *opt, loom_graph **out_graph) {
  if (out_graph) *out_graph = NULL;
  if (!path || !out_graph)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_from_onnx: NULL argument");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    loom_status s = loom__error(LOOM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    close(fd);
    return loom__error(st.st_size == 0 ? LOOM_ERR_INVALID_ARGUMENT : LOOM_ERR_IO, "%s: %s", path,
                       st.st_size == 0 ? "not an ONNX model (empty file)" : "not a regular file");
  }
  /* Mapped, not read: the parse copies what it keeps, and the pages go with the mapping. */
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return loom__error(LOOM_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
  loom_status s = loom_graph_from_onnx_bytes(map, (size_t)st.st_size, path, opt, out_graph);
  munmap(map, (size_t)st.st_size);
  return s;
}

/* Whether the bytes are an ONNX model: the first is the tag of ModelProto's field 1
 * (ir_version, a varint), which no .lir text starts with. */
static bool starts_like_onnx(const void *data, size_t size) {
  return size > 0 && ((const unsigned char *)data)[0] == 0x08;
}

/* Whether the regular file at path is an ONNX model: by its name, else by its first byte. */
static bool looks_like_onnx(const char *path) {
  size_t len = strlen(path);
  if (len >= 5 && !strcmp(path + len - 5, ".onnx")) return true;
  unsigned char first = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  bool got = fread(&first, 1, 1, f) == 1;
  fclose(f);
  return got && starts_like_onnx(&first, 1);
}

/* A pipe, a FIFO or a terminal: read whole once (its first byte cannot be peeked and then read
 * again), then parsed from memory as what its first byte says. */
static loom_status load_stream(const char *path, loom_graph **out_graph) {
  enum { MAX_STREAM = 1 << 30 };
  FILE *f = fopen(path, "rb");
  if (!f) return loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
  size_t len = 0, cap = 1 << 16;
  char *buf = loom__malloc(cap);
  loom_status s = buf ? LOOM_OK : loom__oom("the graph read from a stream");
  while (!s) {
    if (len == cap) {
      char *grown = cap >= MAX_STREAM ? NULL : loom__realloc(buf, cap * 2);
      if (!grown) {
        s = cap >= MAX_STREAM
                ? loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: more than 1 GiB from a stream", path)
                : loom__oom("the graph read from a stream");
        break;
      }
      buf = grown;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) s = loom__error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (!s)
    s = starts_like_onnx(buf, len) ? loom_graph_from_onnx_bytes(buf, len, path, NULL, out_graph)
                                   : loom_graph_parse(buf, len, path, out_graph);
  loom__free(buf);
  return s;
}

loom_status loom_graph_load_any(const char *path, loom_graph **out_graph) {
  if (out_graph) *out_graph = NULL;
  if (!path || !out_graph)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_load_any: NULL argument");
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return load_stream(path, out_graph);
  return looks_like_onnx(path) ? loom_graph_from_onnx(path, NULL, out_graph)
                               : loom_graph_load(path, out_graph);
}
