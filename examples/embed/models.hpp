// Two training graphs (forward + backward + SGD update) described through the C API the way
// autotile's Python front end lowers them: same tensors, ops, TDL texts and order.
#pragma once
#include <cstdint>

#include "recorder.hpp"

namespace embed {

/// \brief The zoo MLP (autotile.models.mlp): `layers` FullyConnected layers of `hidden`
/// units with ReLU between, SoftmaxOutput loss; data (batch, hidden).
void build_mlp(GraphRecorder& g, int64_t batch, int layers, int64_t hidden);

/// \brief A small CNN on (batch, 3, 32, 32): conv3x3(16)-relu-maxpool2 twice, flatten,
/// FullyConnected(classes), SoftmaxOutput.
void build_cnn(GraphRecorder& g, int64_t batch, int64_t classes);

}  // namespace embed
