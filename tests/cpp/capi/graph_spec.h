// Test fixture of the C API tests: a small training graph written once as data and built
// two ways, through the C API (under test) and through the core's own autotile::Graph
// (the oracle), so plans and execution graphs can be compared field by field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autotile/c_api.h"
#include "graph/graph.h"

namespace capi_test {

/// \brief One tensor of a GraphSpec.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool is_param = false;
};

/// \brief One op of a GraphSpec (inputs/outputs by tensor name).
struct OpSpec {
  std::string name, op;
  std::vector<std::string> inputs, outputs;
  std::string tdl;
  AT_Role role = AT_ROLE_FORWARD;
  std::string backward_of;  ///< forward op name, for backward ops
};

/// \brief A whole graph as data.
struct GraphSpec {
  std::vector<TensorSpec> tensors;
  std::vector<OpSpec> ops;
  std::vector<std::pair<std::string, std::string>> gradients;  ///< (tensor, its gradient)
  std::vector<std::string> outputs;
};

/// \brief A 2-layer MLP training graph (forward, backward, SGD update) with the TDL texts
/// the Python registry generates for FullyConnected/Activation/SoftmaxOutput/sgd_update.
GraphSpec mlp_spec(int64_t batch = 24, int64_t in = 32, int64_t hidden = 64, int64_t classes = 16);

/// \brief Builds `spec` through the C API; fails the current test on any error.
AT_Graph* build_capi(const GraphSpec& spec);

/// \brief Builds `spec` with the core's Graph directly (the oracle).
autotile::Graph build_core(const GraphSpec& spec);

/// \brief Expects `status` to be `want` with a non-empty message mentioning `function`.
void expect_error(AT_Status status, AT_Status want, const char* function);

}  // namespace capi_test
