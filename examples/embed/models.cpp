// The TDL texts below are the ones autotile's Python op registry generates (docs/tdl.md):
// an engine describes each of its operators once, as an index expression, and the planner
// derives every way to partition it. Ops are added in the order the Python lowering emits
// them (forward, then the backward chain from the loss, then weight gradients, then
// updates), so ties in the search break the same way.
#include "models.hpp"

#include <string>
#include <vector>

namespace embed {
namespace {

// Biases are added inside the sum where the reduced variables are 0, so the contraction stays a
// strategy (a slab other than the first adds no bias).
const char* kFc =
    "data, weight, bias -> out: out[n, o] = sum(k0) { data[n, k0] * weight[o, k0] + (k0 == 0) * bias[o] }";
const char* kFcData = "dy, weight, data -> dx: dx[n, k0] = sum(o) { dy[n, o] * weight[o, k0] }";
const char* kFcWeight = "dy, data -> dw: dw[o, kk] = sum(n) { dy[n, o] * data[n, kk] }";
const char* kFcBias = "dy -> db: db[o] = sum(n0) { dy[n0, o] }";
const char* kSoftmax =
    "data, label -> out: out[i0, i1] = exp(data[i0, i1]) / sum(k1) { exp(data[i0, k1]) } + 0 * label[i0]";
const char* kSoftmaxGrad = "output, label -> dx: dx[i0, i1] = softmax_ce_grad(output[i0, :], label[i0])";
// 3x3 convolution, stride 1, pad 1, and its gradients.
const char* kConv =
    "data, weight, bias -> out: out[n, co, y, x] = sum(ci, ky, kx) "
    "{ data[n, ci, y + ky - 1, x + kx - 1] * weight[co, ci, ky, kx] + (ci + ky + kx == 0) * bias[co] }";
const char* kConvData =
    "dy, weight, data -> dx: dx[n, ci, iy, ix] = sum(co, ky, kx) "
    "{ dy[n, co, iy - ky + 1, ix - kx + 1] * weight[co, ci, ky, kx] }";
const char* kConvWeight =
    "dy, data -> dw: dw[co, ci, ky, kx] = sum(n, y, x) { dy[n, co, y, x] * data[n, ci, y + ky - 1, x + kx - 1] }";
const char* kConvBias = "dy -> db: db[co] = sum(n, y, x) { dy[n, co, y, x] }";
// 2x2 max pooling, stride 2, and its gradient.
const char* kPool = "data -> out: out[n, c, y, x] = maxpool(max(ky, kx) { data[n, c, 2*y + ky, 2*x + kx] })";
const char* kPoolGrad = "dy, data -> dx: dx[n, c, iy, ix] = dmaxpool(dy[n, c, (iy) / 2, (ix) / 2], data[n, c, :, :])";

/// "i0, i1, ..." for a rank.
std::string index_vars(int rank) {
  std::string s;
  for (int i = 0; i < rank; ++i) s += (i ? ", i" : "i") + std::to_string(i);
  return s;
}

/// Element-wise ReLU of a rank-`rank` tensor.
std::string relu_tdl(int rank) {
  std::string v = index_vars(rank);
  return "data -> out: out[" + v + "] = relu(data[" + v + "])";
}

/// ReLU gradient (reads dy, the input and the output).
std::string relu_grad_tdl(int rank) {
  std::string v = index_vars(rank);
  return "dy, data, output -> out: out[" + v + "] = dact(dy[" + v + "], data[" + v + "], output[" + v + "])";
}

/// SGD update of a rank-`rank` weight.
std::string sgd_tdl(int rank) {
  std::string v = index_vars(rank);
  return "weight, grad -> output: output[" + v + "] = sgd_update_output(weight[" + v + "], grad[" + v + "])";
}

/// Update ops for `params` (name, rank) in order, gradients already recorded.
void sgd_updates(GraphRecorder& g, const std::vector<std::pair<std::string, std::vector<int64_t>>>& params,
                 const std::vector<std::string>& grads) {
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& w = params[i].first;
    g.tensor(w + "_update_output", params[i].second);
    g.op(w + "_update", "sgd_update", {w, grads[i]}, {w + "_update_output"},
         sgd_tdl(static_cast<int>(params[i].second.size())), AT_ROLE_UPDATE, {{"lr", "0.1"}});
    g.output(grads[i]);
    g.output(w + "_update_output");
  }
}

}  // namespace

void build_mlp(GraphRecorder& g, int64_t batch, int layers, int64_t hidden) {
  const std::string nh = std::to_string(hidden);
  g.tensor("data", {batch, hidden});
  std::string x = "data";
  std::vector<std::string> layer_in;  // input of fc{l}
  for (int l = 1; l <= layers; ++l) {
    const std::string fc = "fc" + std::to_string(l);
    g.tensor(fc + "_weight", {hidden, hidden}, true);
    g.tensor(fc + "_bias", {hidden}, true);
    g.tensor(fc + "_output", {batch, hidden});
    g.op(fc, "FullyConnected", {x, fc + "_weight", fc + "_bias"}, {fc + "_output"}, kFc, AT_ROLE_FORWARD,
         {{"num_hidden", nh}, {"no_bias", "False"}});
    layer_in.push_back(x);
    x = fc + "_output";
    if (l < layers) {
      const std::string act = "act" + std::to_string(l);
      g.tensor(act + "_output", {batch, hidden});
      g.op(act, "Activation", {x}, {act + "_output"}, relu_tdl(2), AT_ROLE_FORWARD, {{"act_type", "relu"}});
      x = act + "_output";
    }
  }
  g.tensor("softmax_label", {batch});
  g.tensor("softmax_output", {batch, hidden});
  g.op("softmax", "SoftmaxOutput", {x, "softmax_label"}, {"softmax_output"}, kSoftmax);
  g.output("softmax_output");

  // Backward chain from the loss to the first layer's output (the data needs no gradient).
  g.tensor("softmax_backward0_output", {batch, hidden});
  g.backward("softmax_backward0", "_backward_SoftmaxOutput", {"softmax_output", "softmax_label"},
             {"softmax_backward0_output"}, kSoftmaxGrad, "softmax");
  const std::string last = "fc" + std::to_string(layers);
  g.gradient(last + "_output", "softmax_backward0_output");
  std::vector<std::string> dy(static_cast<size_t>(layers));  // gradient of fc{l}_output
  dy[static_cast<size_t>(layers - 1)] = "softmax_backward0_output";
  for (int l = layers; l >= 2; --l) {
    const std::string fc = "fc" + std::to_string(l), act = "act" + std::to_string(l - 1);
    const std::string prev = "fc" + std::to_string(l - 1);
    g.tensor(fc + "_backward0_output", {batch, hidden});
    g.backward(fc + "_backward0", "_backward_FullyConnected_data", {dy[l - 1], fc + "_weight", act + "_output"},
               {fc + "_backward0_output"}, kFcData, fc);
    g.gradient(act + "_output", fc + "_backward0_output");
    g.tensor(act + "_backward0_output", {batch, hidden});
    g.backward(act + "_backward0", "_backward_Activation", {fc + "_backward0_output", prev + "_output", act + "_output"},
               {act + "_backward0_output"}, relu_grad_tdl(2), act);
    g.gradient(prev + "_output", act + "_backward0_output");
    dy[static_cast<size_t>(l - 2)] = act + "_backward0_output";
  }
  // Weight and bias gradients, layer by layer.
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  std::vector<std::string> grads;
  for (int l = 1; l <= layers; ++l) {
    const std::string fc = "fc" + std::to_string(l);
    g.tensor(fc + "_backward1_output", {hidden, hidden});
    g.backward(fc + "_backward1", "_backward_FullyConnected_weight", {dy[l - 1], layer_in[l - 1]},
               {fc + "_backward1_output"}, kFcWeight, fc);
    g.tensor(fc + "_backward2_output", {hidden});
    g.backward(fc + "_backward2", "_backward_FullyConnected_bias", {dy[l - 1]}, {fc + "_backward2_output"}, kFcBias, fc);
    g.gradient(fc + "_weight", fc + "_backward1_output");
    g.gradient(fc + "_bias", fc + "_backward2_output");
    params.push_back({fc + "_weight", {hidden, hidden}});
    params.push_back({fc + "_bias", {hidden}});
    grads.push_back(fc + "_backward1_output");
    grads.push_back(fc + "_backward2_output");
  }
  sgd_updates(g, params, grads);
}

void build_cnn(GraphRecorder& g, int64_t batch, int64_t classes) {
  const int64_t B = batch;
  g.tensor("data", {B, 3, 32, 32});
  g.tensor("conv1_weight", {16, 3, 3, 3}, true);
  g.tensor("conv1_bias", {16}, true);
  g.tensor("conv1_output", {B, 16, 32, 32});
  g.op("conv1", "Convolution", {"data", "conv1_weight", "conv1_bias"}, {"conv1_output"}, kConv, AT_ROLE_FORWARD,
       {{"kernel", "(3, 3)"}, {"pad", "(1, 1)"}, {"num_filter", "16"}});
  g.tensor("relu1_output", {B, 16, 32, 32});
  g.op("relu1", "Activation", {"conv1_output"}, {"relu1_output"}, relu_tdl(4));
  g.tensor("pool1_output", {B, 16, 16, 16});
  g.op("pool1", "Pooling", {"relu1_output"}, {"pool1_output"}, kPool);
  g.tensor("conv2_weight", {32, 16, 3, 3}, true);
  g.tensor("conv2_bias", {32}, true);
  g.tensor("conv2_output", {B, 32, 16, 16});
  g.op("conv2", "Convolution", {"pool1_output", "conv2_weight", "conv2_bias"}, {"conv2_output"}, kConv,
       AT_ROLE_FORWARD, {{"kernel", "(3, 3)"}, {"pad", "(1, 1)"}, {"num_filter", "32"}});
  g.tensor("relu2_output", {B, 32, 16, 16});
  g.op("relu2", "Activation", {"conv2_output"}, {"relu2_output"}, relu_tdl(4));
  g.tensor("pool2_output", {B, 32, 8, 8});
  g.op("pool2", "Pooling", {"relu2_output"}, {"pool2_output"}, kPool);
  g.tensor("flat_output", {B, 32 * 8 * 8});
  g.op("flat", "Flatten", {"pool2_output"}, {"flat_output"}, "data -> out: out[i0, i1] = data[i0, i1 / 64, :, :]");
  g.tensor("fc_weight", {classes, 32 * 8 * 8}, true);
  g.tensor("fc_bias", {classes}, true);
  g.tensor("fc_output", {B, classes});
  g.op("fc", "FullyConnected", {"flat_output", "fc_weight", "fc_bias"}, {"fc_output"}, kFc);
  g.tensor("softmax_label", {B});
  g.tensor("softmax_output", {B, classes});
  g.op("softmax", "SoftmaxOutput", {"fc_output", "softmax_label"}, {"softmax_output"}, kSoftmax);
  g.output("softmax_output");

  // Backward chain: each op's gradient name is "<op>_backward<i>_output".
  struct Step {
    const char* name;
    const char* op;
    std::vector<std::string> inputs;
    std::vector<int64_t> shape;
    std::string tdl;
    const char* forward;
    const char* grad_of;  // the forward tensor this output is the gradient of
  };
  const std::vector<Step> chain = {
      {"softmax_backward0", "_backward_SoftmaxOutput", {"softmax_output", "softmax_label"}, {B, classes},
       kSoftmaxGrad, "softmax", "fc_output"},
      {"fc_backward0", "_backward_FullyConnected_data", {"softmax_backward0_output", "fc_weight", "flat_output"},
       {B, 2048}, kFcData, "fc", "flat_output"},
      {"flat_backward0", "Reshape", {"fc_backward0_output"}, {B, 32, 8, 8},
       "data -> out: out[i0, i1, i2, i3] = data[i0, 64*i1 + 8*i2 + i3]", "flat", "pool2_output"},
      {"pool2_backward0", "_backward_Pooling", {"flat_backward0_output", "relu2_output"}, {B, 32, 16, 16}, kPoolGrad,
       "pool2", "relu2_output"},
      {"relu2_backward0", "_backward_Activation", {"pool2_backward0_output", "conv2_output", "relu2_output"},
       {B, 32, 16, 16}, relu_grad_tdl(4), "relu2", "conv2_output"},
      {"conv2_backward0", "_backward_Convolution_data", {"relu2_backward0_output", "conv2_weight", "pool1_output"},
       {B, 16, 16, 16}, kConvData, "conv2", "pool1_output"},
      {"pool1_backward0", "_backward_Pooling", {"conv2_backward0_output", "relu1_output"}, {B, 16, 32, 32}, kPoolGrad,
       "pool1", "relu1_output"},
      {"relu1_backward0", "_backward_Activation", {"pool1_backward0_output", "conv1_output", "relu1_output"},
       {B, 16, 32, 32}, relu_grad_tdl(4), "relu1", "conv1_output"},
      {"conv1_backward1", "_backward_Convolution_weight", {"relu1_backward0_output", "data"}, {16, 3, 3, 3},
       kConvWeight, "conv1", "conv1_weight"},
      {"conv1_backward2", "_backward_Convolution_bias", {"relu1_backward0_output"}, {16}, kConvBias, "conv1",
       "conv1_bias"},
      {"conv2_backward1", "_backward_Convolution_weight", {"relu2_backward0_output", "pool1_output"}, {32, 16, 3, 3},
       kConvWeight, "conv2", "conv2_weight"},
      {"conv2_backward2", "_backward_Convolution_bias", {"relu2_backward0_output"}, {32}, kConvBias, "conv2",
       "conv2_bias"},
      {"fc_backward1", "_backward_FullyConnected_weight", {"softmax_backward0_output", "flat_output"},
       {classes, 2048}, kFcWeight, "fc", "fc_weight"},
      {"fc_backward2", "_backward_FullyConnected_bias", {"softmax_backward0_output"}, {classes}, kFcBias, "fc",
       "fc_bias"},
  };
  for (const Step& s : chain) {
    const std::string out = std::string(s.name) + "_output";
    g.tensor(out, s.shape);
    g.backward(s.name, s.op, s.inputs, {out}, s.tdl, s.forward);
    g.gradient(s.grad_of, out);
  }
  sgd_updates(g,
              {{"conv1_weight", {16, 3, 3, 3}},
               {"conv1_bias", {16}},
               {"conv2_weight", {32, 16, 3, 3}},
               {"conv2_bias", {32}},
               {"fc_weight", {classes, 2048}},
               {"fc_bias", {classes}}},
              {"conv1_backward1_output", "conv1_backward2_output", "conv2_backward1_output", "conv2_backward2_output",
               "fc_backward1_output", "fc_backward2_output"});
}

}  // namespace embed
