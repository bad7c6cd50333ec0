#include "graph_spec.h"

#include <gtest/gtest.h>

#include <map>

namespace capi_test {

namespace {
const char* kFc = "data, weight, bias -> out: out[n, o] = sum(k0) { data[n, k0] * weight[o, k0] } + bias[o]";
const char* kRelu = "data -> out: out[i0, i1] = relu(data[i0, i1])";
const char* kSoftmax =
    "data, label -> out: out[i0, i1] = exp(data[i0, i1]) / sum(k1) { exp(data[i0, k1]) } + 0 * label[i0]";
const char* kSoftmaxGrad = "output, label -> dx: dx[i0, i1] = softmax_ce_grad(output[i0, :], label[i0])";
const char* kFcData = "dy, weight, data -> dx: dx[n, k0] = sum(o) { dy[n, o] * weight[o, k0] }";
const char* kReluGrad =
    "dy, data, output -> out: out[i0, i1] = dact(dy[i0, i1], data[i0, i1], output[i0, i1])";
const char* kFcWeight = "dy, data -> dw: dw[o, kk] = sum(n) { dy[n, o] * data[n, kk] }";
const char* kFcBias = "dy -> db: db[o] = sum(n0) { dy[n0, o] }";
const char* kSgd2 = "weight, grad -> output: output[i0, i1] = sgd_update_output(weight[i0, i1], grad[i0, i1])";
const char* kSgd1 = "weight, grad -> output: output[i0] = sgd_update_output(weight[i0], grad[i0])";
}  // namespace

GraphSpec mlp_spec(int64_t batch, int64_t in, int64_t hidden, int64_t classes) {
  GraphSpec s;
  auto T = [&](const std::string& n, std::vector<int64_t> shape, bool p = false) {
    s.tensors.push_back({n, shape, p});
  };
  auto O = [&](const std::string& n, const std::string& op, std::vector<std::string> ins,
               std::vector<std::string> outs, const char* tdl, AT_Role role = AT_ROLE_FORWARD,
               const std::string& fwd = "") { s.ops.push_back({n, op, ins, outs, tdl, role, fwd}); };
  T("data", {batch, in});
  T("fc1_weight", {hidden, in}, true);
  T("fc1_bias", {hidden}, true);
  T("fc1_output", {batch, hidden});
  T("act1_output", {batch, hidden});
  T("fc2_weight", {classes, hidden}, true);
  T("fc2_bias", {classes}, true);
  T("fc2_output", {batch, classes});
  T("softmax_label", {batch});
  T("softmax_output", {batch, classes});
  T("d_fc2_output", {batch, classes});
  T("d_act1_output", {batch, hidden});
  T("d_fc1_output", {batch, hidden});
  T("d_fc1_weight", {hidden, in});
  T("d_fc1_bias", {hidden});
  T("d_fc2_weight", {classes, hidden});
  T("d_fc2_bias", {classes});
  for (const char* w : {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"}) {
    for (const auto& t : std::vector<TensorSpec>(s.tensors))
      if (t.name == w) T(std::string(w) + "_new", t.shape);
  }
  O("fc1", "FullyConnected", {"data", "fc1_weight", "fc1_bias"}, {"fc1_output"}, kFc);
  O("act1", "Activation", {"fc1_output"}, {"act1_output"}, kRelu);
  O("fc2", "FullyConnected", {"act1_output", "fc2_weight", "fc2_bias"}, {"fc2_output"}, kFc);
  O("softmax", "SoftmaxOutput", {"fc2_output", "softmax_label"}, {"softmax_output"}, kSoftmax);
  O("softmax_bwd", "_backward_SoftmaxOutput", {"softmax_output", "softmax_label"}, {"d_fc2_output"}, kSoftmaxGrad,
    AT_ROLE_BACKWARD, "softmax");
  O("fc2_bwd_data", "_backward_FullyConnected_data", {"d_fc2_output", "fc2_weight", "act1_output"},
    {"d_act1_output"}, kFcData, AT_ROLE_BACKWARD, "fc2");
  O("act1_bwd", "_backward_Activation", {"d_act1_output", "fc1_output", "act1_output"}, {"d_fc1_output"}, kReluGrad,
    AT_ROLE_BACKWARD, "act1");
  O("fc1_bwd_weight", "_backward_FullyConnected_weight", {"d_fc1_output", "data"}, {"d_fc1_weight"}, kFcWeight,
    AT_ROLE_BACKWARD, "fc1");
  O("fc1_bwd_bias", "_backward_FullyConnected_bias", {"d_fc1_output"}, {"d_fc1_bias"}, kFcBias, AT_ROLE_BACKWARD,
    "fc1");
  O("fc2_bwd_weight", "_backward_FullyConnected_weight", {"d_fc2_output", "act1_output"}, {"d_fc2_weight"},
    kFcWeight, AT_ROLE_BACKWARD, "fc2");
  O("fc2_bwd_bias", "_backward_FullyConnected_bias", {"d_fc2_output"}, {"d_fc2_bias"}, kFcBias, AT_ROLE_BACKWARD,
    "fc2");
  for (const char* w : {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"}) {
    std::string n(w);
    bool matrix = n.find("weight") != std::string::npos;
    O(n + "_update", "sgd_update", {n, "d_" + n}, {n + "_new"}, matrix ? kSgd2 : kSgd1, AT_ROLE_UPDATE);
    s.gradients.push_back({n, "d_" + n});
    s.outputs.push_back("d_" + n);
    s.outputs.push_back(n + "_new");
  }
  s.gradients.push_back({"fc2_output", "d_fc2_output"});
  s.gradients.push_back({"act1_output", "d_act1_output"});
  s.gradients.push_back({"fc1_output", "d_fc1_output"});
  s.outputs.push_back("softmax_output");
  return s;
}

AT_Graph* build_capi(const GraphSpec& spec) {
  AT_Graph* g = nullptr;
  EXPECT_EQ(at_graph_create(&g), AT_OK) << at_last_error();
  std::map<std::string, int32_t> tid, nid;
  for (const auto& t : spec.tensors) {
    int32_t id = -1;
    EXPECT_EQ(at_graph_add_tensor(g, t.name.c_str(), static_cast<int32_t>(t.shape.size()), t.shape.data(), AT_FLOAT32,
                                  t.is_param, &id),
              AT_OK)
        << at_last_error();
    tid[t.name] = id;
  }
  for (const auto& o : spec.ops) {
    std::vector<int32_t> ins, outs;
    for (const auto& n : o.inputs) ins.push_back(tid.at(n));
    for (const auto& n : o.outputs) outs.push_back(tid.at(n));
    int32_t id = -1;
    EXPECT_EQ(at_graph_add_op(g, o.name.c_str(), o.op.c_str(), static_cast<int32_t>(ins.size()), ins.data(),
                              static_cast<int32_t>(outs.size()), outs.data(), o.tdl.c_str(), o.role, &id),
              AT_OK)
        << at_last_error();
    nid[o.name] = id;
    if (!o.backward_of.empty()) {
      EXPECT_EQ(at_graph_set_backward_of(g, id, nid.at(o.backward_of)), AT_OK) << at_last_error();
    }
  }
  for (const auto& gr : spec.gradients)
    EXPECT_EQ(at_graph_set_gradient(g, tid.at(gr.first), tid.at(gr.second)), AT_OK) << at_last_error();
  for (const auto& n : spec.outputs) EXPECT_EQ(at_graph_mark_output(g, tid.at(n)), AT_OK) << at_last_error();
  return g;
}

autotile::Graph build_core(const GraphSpec& spec) {
  autotile::Graph g;
  std::map<std::string, int32_t> nid;
  for (const auto& t : spec.tensors) g.add_tensor(t.name, t.shape, autotile::DType::kFloat32, t.is_param);
  for (const auto& o : spec.ops) {
    std::vector<int32_t> ins, outs;
    for (const auto& n : o.inputs) ins.push_back(g.tensor_id(n));
    for (const auto& n : o.outputs) outs.push_back(g.tensor_id(n));
    int32_t id = g.add_node(o.name, o.op, ins, outs, o.tdl, static_cast<autotile::NodeRole>(o.role));
    nid[o.name] = id;
    if (!o.backward_of.empty()) g.set_backward_of(id, nid.at(o.backward_of));
  }
  for (const auto& gr : spec.gradients) g.set_gradient(g.tensor_id(gr.first), g.tensor_id(gr.second));
  for (const auto& n : spec.outputs) g.mark_output(g.tensor_id(n));
  return g;
}

void expect_error(AT_Status status, AT_Status want, const char* function) {
  EXPECT_EQ(status, want) << function << " returned " << at_status_name(status) << ": " << at_last_error();
  std::string msg = at_last_error();
  EXPECT_FALSE(msg.empty()) << function;
  EXPECT_NE(msg.find(function), std::string::npos) << "message '" << msg << "' does not name " << function;
}

}  // namespace capi_test
