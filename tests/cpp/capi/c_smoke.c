/* The C API used from C (compiled as C99 with -pedantic -Werror): the header must be plain
 * C and the library linkable from a C translation unit. Called by capi_wrapper_test.cc. */
#include <stdio.h>
#include <string.h>

#include "autotile/c_api.h"

#define CHECK(call)                                                                        \
  do {                                                                                     \
    AT_Status st_ = (call);                                                                \
    if (st_ != AT_OK) {                                                                    \
      snprintf(msg, cap, "%s failed: %s: %s", #call, at_status_name(st_), at_last_error()); \
      goto done;                                                                           \
    }                                                                                      \
  } while (0)

/* Plans y = x * w^T (x: 8x4, w: 6x4, a weight) on 2 devices and checks the plan and the
 * execution graph from C. Returns 0 and an empty msg on success. */
int capi_c_smoke(char* msg, size_t cap) {
  AT_Graph* g = NULL;
  AT_Plan* p = NULL;
  AT_ExecGraph* e = NULL;
  int32_t x, w, y, node, cuts, devices, n, d, total = 0;
  const int64_t xs[2] = {8, 4}, ws[2] = {6, 4}, ys[2] = {8, 6};
  int32_t ins[2], outs[1];
  const char* tiling = NULL;
  int failed = 1;
  msg[0] = '\0';
  CHECK(at_graph_create(&g));
  CHECK(at_graph_add_tensor(g, "x", 2, xs, AT_FLOAT32, 0, &x));
  CHECK(at_graph_add_tensor(g, "w", 2, ws, AT_FLOAT32, 1, &w));
  CHECK(at_graph_add_tensor(g, "y", 2, ys, AT_FLOAT32, 0, &y));
  ins[0] = x;
  ins[1] = w;
  outs[0] = y;
  CHECK(at_graph_add_op(g, "matmul", "FullyConnected", 2, ins, 1, outs,
                        "data, weight -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] }", AT_ROLE_FORWARD,
                        &node));
  CHECK(at_graph_mark_output(g, y));
  CHECK(at_search(g, 2, "tofu", NULL, &p));
  CHECK(at_plan_num_cuts(p, &cuts));
  CHECK(at_plan_tiling(p, w, 0, &tiling));
  if (cuts != 1 || tiling == NULL || tiling[0] == '\0') {
    snprintf(msg, cap, "unexpected plan: %d cuts, tiling '%s'", cuts, tiling ? tiling : "(null)");
    goto done;
  }
  CHECK(at_exec_build(g, p, 0, &e));
  CHECK(at_exec_num_devices(e, &devices));
  for (d = 0; d < devices; ++d) {
    const int32_t* ops = NULL;
    CHECK(at_exec_schedule(e, d, &ops, &n));
    total += n;
  }
  CHECK(at_exec_num_ops(e, &n));
  if (devices != 2 || total != n) {
    snprintf(msg, cap, "unexpected execution graph: %d devices, %d scheduled of %d ops", devices, total, n);
    goto done;
  }
  /* And an error from C: a stale handle after freeing. */
  CHECK(at_exec_free(e));
  if (at_exec_num_ops(e, &n) != AT_ERR_INVALID_HANDLE || strstr(at_last_error(), "at_exec_num_ops") == NULL) {
    e = NULL;
    snprintf(msg, cap, "a stale handle was not reported");
    goto done;
  }
  e = NULL;
  failed = 0;
done:
  at_exec_free(e);
  at_plan_free(p);
  at_graph_free(g);
  return failed;
}
