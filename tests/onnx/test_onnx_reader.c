/* The ONNX reader on models built here with protobuf-c: a good one read and run, names made
 * .lir names, constants held once, external data, and the files it must refuse with a
 * one-line message naming the file: not ONNX, truncated, a tensor whose size lies, a node Loom
 * cannot run. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "onnx/onnx.pb-c.h"

static const float W[6] = {1, 2, 3, 4, 5, 6};

/* A model y:0 = Add(x, w) (or op_type) with x an input f32[2,3] and w an initializer, packed
 * into a malloc'd buffer. raw_bytes is how many bytes w's raw_data claims to hold. */
static uint8_t *pack_model(const char *op_type, size_t raw_bytes, const char *external, size_t *out_size) {
  Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT, d1 = d0;
  d0.value_case = d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
  d0.dim_value = 2, d1.dim_value = 3;
  Onnx__TensorShapeProto__Dimension *dims[2] = {&d0, &d1};
  Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
  shape.n_dim = 2, shape.dim = dims;
  Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
  tt.has_elem_type = 1, tt.elem_type = 1, tt.shape = &shape;
  Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
  type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, type.tensor_type = &tt;
  Onnx__ValueInfoProto in = ONNX__VALUE_INFO_PROTO__INIT, out = in;
  in.name = "x", in.type = &type;
  out.name = "y:0", out.type = &type;
  Onnx__ValueInfoProto *ins[1] = {&in}, *outs[1] = {&out};

  int64_t wdims[2] = {2, 3};
  Onnx__TensorProto w = ONNX__TENSOR_PROTO__INIT;
  w.name = "w", w.n_dims = 2, w.dims = wdims, w.has_data_type = 1, w.data_type = 1;
  Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
  Onnx__StringStringEntryProto *locs[1] = {&loc};
  if (external) {
    loc.key = "location", loc.value = (char *)external;
    w.n_external_data = 1, w.external_data = locs;
    w.has_data_location = 1, w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  } else {
    w.has_raw_data = 1, w.raw_data.len = raw_bytes, w.raw_data.data = (uint8_t *)W;
  }
  Onnx__TensorProto *inits[1] = {&w};

  char *node_in[2] = {"x", "w"}, *node_out[1] = {"y:0"};
  Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
  node.name = "the_add", node.op_type = (char *)op_type;
  node.n_input = 2, node.input = node_in, node.n_output = 1, node.output = node_out;
  Onnx__NodeProto *nodes[1] = {&node};

  Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
  graph.name = "tiny", graph.n_node = 1, graph.node = nodes;
  graph.n_initializer = 1, graph.initializer = inits;
  graph.n_input = 1, graph.input = ins, graph.n_output = 1, graph.output = outs;
  Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
  opset.domain = "", opset.has_version = 1, opset.version = 13;
  Onnx__OperatorSetIdProto *opsets[1] = {&opset};
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  m.has_ir_version = 1, m.ir_version = 8, m.graph = &graph, m.n_opset_import = 1, m.opset_import = opsets;

  *out_size = onnx__model_proto__get_packed_size(&m);
  uint8_t *buf = malloc(*out_size);
  onnx__model_proto__pack(&m, buf);
  return buf;
}

/* A fresh path under the build's temporary folder. */
static void temp_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/onnx-reader-%d-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
           name);
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, size, f);
  fclose(f);
}

/* The message is one line that starts with the file's path and contains `what`. */
static bool one_line_naming(const char *msg, const char *path, const char *what) {
  return !strchr(msg, '\n') && !strncmp(msg, path, strlen(path)) && strstr(msg, what);
}

TEST(reads_and_runs_a_model) {
  size_t size;
  uint8_t *buf = pack_model("Add", sizeof W, NULL, &size);
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_from_onnx_bytes(buf, size, "tiny.onnx", NULL, &g));
  free(buf);
  ASSERT_EQ(loom_graph_param_count(g), 1);
  ASSERT_STREQ(loom_value_name(g, loom_graph_param_at(g, 0)), "x");
  ASSERT_STREQ(loom_value_name(g, loom_graph_output_at(g, 0)), "y_0"); /* "y:0" as a .lir name */
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_type t = {LOOM_F32, 2, {2, 3}};
  loom_tensor x, y;
  ASSERT_OK(loom_tensor_init(&x, &t));
  for (int i = 0; i < 6; i++) ((float *)x.data)[i] = 10.0f * (float)i;
  ASSERT_OK(loom_graph_run(ctx, g, &x, 1, &y, 1, NULL));
  for (int i = 0; i < 6; i++) ASSERT_EQ(((float *)y.data)[i], 10.0f * (float)i + W[i]);
  loom_tensor_deinit(&x);
  loom_tensor_deinit(&y);
  loom_context_destroy(ctx);
  loom_graph_destroy(g);
}

TEST(reads_external_data_through_a_mapping) {
  char data_path[512], model_path[512];
  temp_path(data_path, sizeof data_path, "w.bin");
  temp_path(model_path, sizeof model_path, "model.onnx");
  write_file(data_path, W, sizeof W);
  size_t size;
  const char *base = strrchr(data_path, '/') + 1;
  uint8_t *buf = pack_model("Add", 0, base, &size);
  write_file(model_path, buf, size);
  free(buf);
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_from_onnx(model_path, NULL, &g));
  loom_graph_destroy(g);
  /* The data file shorter than the tensor: refused, naming both. */
  write_file(data_path, W, 8);
  ASSERT_STATUS(loom_graph_from_onnx(model_path, NULL, &g), LOOM_ERR_IO);
  ASSERT_TRUE(one_line_naming(loom_last_error(), model_path, "initializer 'w'"));
  ASSERT_CONTAINS(loom_last_error(), "holds 8 bytes");
  ASSERT_TRUE(g == NULL);
  unlink(data_path);
  unlink(model_path);
}

TEST(refuses_a_file_that_is_not_onnx) {
  char path[512];
  temp_path(path, sizeof path, "text.onnx");
  const char *text = "graph main(x: f32[3]) {\n  return x\n}\n";
  write_file(path, text, strlen(text));
  loom_graph *g = NULL;
  ASSERT_STATUS(loom_graph_from_onnx(path, NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(one_line_naming(loom_last_error(), path, "not an ONNX model"));
  ASSERT_TRUE(g == NULL);
  write_file(path, "", 0);
  ASSERT_STATUS(loom_graph_from_onnx(path, NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(one_line_naming(loom_last_error(), path, "empty file"));
  unlink(path);
  ASSERT_STATUS(loom_graph_from_onnx(path, NULL, &g), LOOM_ERR_IO);
  ASSERT_TRUE(one_line_naming(loom_last_error(), path, "cannot open"));
}

TEST(refuses_a_truncated_model) {
  size_t size;
  uint8_t *buf = pack_model("Add", sizeof W, NULL, &size);
  loom_graph *g = NULL;
  /* Every cut of the file is refused (or, where the cut falls between fields, still a model
   * that reads), never a crash. */
  int refused = 0;
  for (size_t cut = 0; cut < size; cut++) {
    loom_status s = loom_graph_from_onnx_bytes(buf, cut, "cut.onnx", NULL, &g);
    if (s) {
      refused++;
      ASSERT_TRUE(one_line_naming(loom_last_error(), "cut.onnx", ""));
    }
    loom_graph_destroy(g);
    g = NULL;
  }
  ASSERT_TRUE(refused > (int)size / 2);
  ASSERT_STATUS(loom_graph_from_onnx_bytes(buf, size - 3, "cut.onnx", NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(one_line_naming(loom_last_error(), "cut.onnx", "truncated"));
  free(buf);
}

TEST(refuses_a_tensor_whose_size_lies) {
  size_t size;
  uint8_t *buf = pack_model("Add", 16, NULL, &size); /* dims [2,3] f32 need 24 bytes */
  loom_graph *g = NULL;
  ASSERT_STATUS(loom_graph_from_onnx_bytes(buf, size, "lie.onnx", NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(one_line_naming(loom_last_error(), "lie.onnx", "initializer 'w': raw_data holds 16 bytes"));
  ASSERT_CONTAINS(loom_last_error(), "need 24");
  free(buf);
}

TEST(refuses_an_op_naming_the_node) {
  size_t size;
  uint8_t *buf = pack_model("Unique", sizeof W, NULL, &size);
  loom_graph *g = NULL;
  ASSERT_STATUS(loom_graph_from_onnx_bytes(buf, size, "op.onnx", NULL, &g), LOOM_ERR_UNSUPPORTED);
  ASSERT_TRUE(
      one_line_naming(loom_last_error(), "op.onnx", "node 'the_add' (Unique): op Unique is not supported"));
  free(buf);
}

TEST(reads_a_tensor_file) {
  int64_t dims[2] = {2, 3};
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  t.name = "x", t.n_dims = 2, t.dims = dims, t.has_data_type = 1, t.data_type = 1;
  t.n_float_data = 6, t.float_data = (float *)W;
  size_t size = onnx__tensor_proto__get_packed_size(&t);
  uint8_t *buf = malloc(size);
  onnx__tensor_proto__pack(&t, buf);
  char path[512];
  temp_path(path, sizeof path, "x.pb");
  write_file(path, buf, size);
  loom_tensor x;
  char *name = NULL;
  ASSERT_OK(loom_tensor_load_onnx_pb(path, &x, &name));
  ASSERT_STREQ(name, "x");
  ASSERT_EQ(x.type.rank, 2);
  for (int i = 0; i < 6; i++) ASSERT_EQ(((float *)x.data)[i], W[i]);
  loom_tensor_deinit(&x);
  free(name);
  t.n_float_data = 5; /* a lying size */
  onnx__tensor_proto__pack(&t, buf);
  write_file(path, buf, onnx__tensor_proto__get_packed_size(&t));
  ASSERT_STATUS(loom_tensor_load_onnx_pb(path, &x, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(one_line_naming(loom_last_error(), path, "need 6 values, the data holds 5"));
  unlink(path);
  free(buf);
}

/* loom_graph_load_any on a pipe (as loom-plan /dev/stdin or <(...) give one): read whole once,
 * its first byte deciding ONNX or .lir (peeking it would lose it). */
static void load_through_pipe(const void *data, size_t size, int32_t want_params) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], data, size), (long long)size); /* small: fits the pipe's buffer */
  close(fds[1]);
  char path[64];
  snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
  loom_graph *g = NULL;
  loom_status s = loom_graph_load_any(path, &g);
  close(fds[0]);
  ASSERT_OK(s);
  ASSERT_EQ(loom_graph_param_count(g), want_params);
  loom_graph_destroy(g);
}

TEST(loads_a_model_or_a_lir_text_from_a_pipe) {
  size_t size;
  uint8_t *buf = pack_model("Add", sizeof W, NULL, &size);
  load_through_pipe(buf, size, 1);
  free(buf);
  const char *lir = "graph g(a: f32[4], b: f32[4]) {\n  c = add a b\n  return c\n}\n";
  load_through_pipe(lir, strlen(lir), 2);
}
