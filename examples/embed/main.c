/* Embedding Loom: build y = sigmoid(A.x + b) with the C builder API, run it on cpu0 under a
 * memory limit, and print the result. Built against an installed Loom by tests/install.cmake
 * (find_package(Loom) and pkg-config). */
#include <loom/loom.h>
#include <stdio.h>

#define CHECK(call)                                                           \
  do {                                                                        \
    loom_status s_ = (call);                                                  \
    if (s_) {                                                                 \
      fprintf(stderr, "%s: %s\n", loom_status_string(s_), loom_last_error()); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main(void) {
  loom_graph *g;
  CHECK(loom_graph_create("affine", &g));
  loom_type ta, tx, tb;
  CHECK(loom_type_make(LOOM_F32, 2, (int64_t[]){2, 3}, &ta));
  CHECK(loom_type_make(LOOM_F32, 1, (int64_t[]){3}, &tx));
  CHECK(loom_type_make(LOOM_F32, 1, (int64_t[]){2}, &tb));
  loom_value a = loom_graph_param(g, "a", &ta);
  loom_value x = loom_graph_param(g, "x", &tx);
  loom_value b = loom_graph_param(g, "b", &tb);
  /* Builder calls chain freely: an error sticks and loom_graph_verify reports the first. */
  loom_value y = loom_unary(g, LOOM_OP_SIGMOID, loom_binary(g, LOOM_OP_ADD, loom_dot(g, a, x), b));
  loom_graph_return(g, &y, 1);
  CHECK(loom_graph_verify(g));

  float av[] = {1, 2, 3, 4, 5, 6}, xv[] = {0.5f, -1, 0.25f}, bv[] = {0.1f, -0.2f};
  loom_tensor in[3] = {{ta, av}, {tx, xv}, {tb, bv}}, out[1];

  /* Rewrite for memory, cut into stages that fit 1 MiB, and run them. */
  loom_runner runner = {"cpu0", 1 << 20};
  loom_graph *opt;
  loom_plan *plan;
  loom_context *ctx;
  CHECK(loom_graph_optimize(g, NULL, &opt, NULL));
  CHECK(loom_plan_split_by_memory(opt, &runner, 1, &plan));
  CHECK(loom_context_create(NULL, &ctx));
  CHECK(loom_run(ctx, plan, NULL, in, 3, out, 1, NULL)); /* NULL options: on the plan's runners */
  const float *yv = out[0].data;
  printf("y = [%.6f, %.6f]\n", yv[0], yv[1]);

  loom_tensor_deinit(&out[0]);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  return 0;
}
