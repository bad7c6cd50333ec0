"""A network of element-wise, broadcast, LeakyReLU, softmax and loss ops written by MXNet 1.9.1
as symbol JSON: it loads, runs and trains (gradients through every op) like MXNet."""
import numpy as np

import autotile as at
from fixtures_ew import case
from gradcheck import forward


def test_mxnet_json_network_forward_and_gradients():
    attrs, arr = case("json_net")
    sym = at.sym.load_json(attrs["symbol"])
    ops = {n.op for n in sym.topo_nodes() if not n.is_variable}
    assert {"LeakyReLU", "broadcast_add", "_mul_scalar", "_rminus_scalar", "clip", "softmax", "log", "elemwise_div",
            "add_n", "sigmoid", "SoftmaxOutput"} <= ops
    values = {k: arr[k] for k in ("data", "b", "softmax_label")}
    (y,) = forward(sym, values)
    np.testing.assert_allclose(y, arr["output"], rtol=1e-6, atol=1e-9)
    res = at.backend.training_step(sym, values, ["data", "b"], optimizer="sgd", optimizer_args={"lr": 0.0})
    np.testing.assert_allclose(res.grads["data"], arr["grad_data"], rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(res.grads["b"], arr["grad_b"], rtol=1e-5, atol=1e-9)
