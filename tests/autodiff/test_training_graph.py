"""Training graph construction: gradients vs finite differences of an explicit loss, the
optimizer update vs its formula, and completeness of the maps the planner uses."""
import numpy as np
import pytest

import autotile as at
from autotile.autodiff import training_graph
from autotile.backend import training_step

from fd import check_grads, forward_outputs


def _mlp_with_residual():
    """fc1 -> tanh (a) -> fc2 -> + a (a used twice) -> b * b (b used twice)."""
    x = at.sym.Variable("data", shape=(3, 4))
    a = at.sym.Activation(at.sym.FullyConnected(x, num_hidden=5, name="fc1"), act_type="tanh", name="act1")
    b = at.sym.elemwise_add(at.sym.FullyConnected(a, num_hidden=5, name="fc2"), a, name="res")
    return at.sym.elemwise_mul(b, b, name="sq")


def _values(sym, seed=0, scale=0.5, shapes=None):
    shapes = shapes or {}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    rng = np.random.default_rng(seed)
    names = sym.list_arguments() + sym.list_auxiliary_states()
    return {n: scale * rng.standard_normal(s) for n, s in zip(names, arg_shapes + aux_shapes)}


def _params(sym):
    return [a for a in sym.list_arguments() if a != "data" and not a.endswith("label")]


def _check_maps(tg):
    """Every op node of the training graph is a forward node, a backward node of a forward
    node, a gradient sum of a forward entry, or the update of a parameter; every parameter
    has a gradient and an update."""
    forward = set(tg.forward_nodes)
    fwd_entries = set()
    for node in tg.forward.topo_nodes():
        fwd_entries.update(node.output_names())
    for node in tg.symbol.topo_nodes():
        if node.is_variable:
            assert node.name in set(tg.forward.list_inputs()) | set(tg.state_names) | set(tg.head_grad_names)
            continue
        homes = [node.name in forward, node.name in tg.backward_of, node.name in tg.grad_sum_of,
                 node.name in tg.update_nodes]
        assert sum(homes) == 1, f"node {node.name} belongs to {homes}"
        assert tg.group_of(node.name) is not None
    assert set(tg.backward_of.values()) <= forward
    assert set(tg.grad_sum_of.values()) <= fwd_entries
    assert set(tg.gradient_of.values()) <= fwd_entries
    assert sorted(tg.update_nodes.values()) == sorted(tg.param_names)
    assert len(tg.grad_names) == len(tg.param_names) == len(tg.updated_names)
    for p, g in zip(tg.param_names, tg.grad_names):
        assert tg.gradient_entry[p] == g and tg.gradient_of[g] == p
    n = len(tg.output_names)
    assert tg.symbol.list_outputs() == tg.output_names + tg.grad_names + tg.updated_names + tg.new_state_names
    assert n == len(tg.forward.entries)


def test_residual_gradients_match_finite_differences():
    sym = _mlp_with_residual()
    values = _values(sym)
    head = np.random.default_rng(5).standard_normal((3, 5))
    params = _params(sym)
    res = training_step(sym, {**values, "sq_output_head_grad": head}, params)

    def loss(v):  # the loss a head gradient hg stands for: <output, hg>
        return float(np.sum(forward_outputs(sym, v)[0] * head))

    check_grads(loss, values, res.grads, params)


def test_tensor_used_twice_gets_an_explicit_sum_in_its_group():
    tg = training_graph(_mlp_with_residual())
    _check_maps(tg)
    assert sorted(tg.grad_sum_of.values()) == ["act1_output", "res_output"]
    for sum_node, entry in tg.grad_sum_of.items():
        node = next(n for n in tg.symbol.topo_nodes() if n.name == sum_node)
        assert node.op in ("add_n", "elemwise_add") and len(node.inputs) == 2
        assert tg.gradient_of[node.output_names()[0]] == entry
        assert tg.gradient_entry[entry] == node.output_names()[0]
    # the gradients of the activations are reported too, not only the params'
    assert {"act1_output", "fc1_output", "res_output", "sq_output"} <= set(tg.gradient_entry)
    assert tg.head_grad_names == ["sq_output_head_grad"]


def test_default_head_gradient_is_ones():
    sym = _mlp_with_residual()
    values = _values(sym, seed=1)
    res = training_step(sym, values, _params(sym))
    check_grads(lambda v: float(np.sum(forward_outputs(sym, v)[0])), values, res.grads, ["fc1_weight", "fc2_bias"])


def _softmax_ce(sym, label):
    def loss(v):
        p = forward_outputs(sym, {**v, "softmax_label": label})[0]
        return float(-np.sum(np.log(p[np.arange(len(label)), label.astype(int)])))
    return loss


def test_softmax_output_mlp_gradients_are_cross_entropy_gradients():
    sym = at.models.mlp(4, layers=3, hidden=6, classes=5, input_dim=7)
    values = _values(sym, seed=2)
    label = np.array([0, 3, 4, 1], dtype=np.float64)
    values["softmax_label"] = label
    tg = training_graph(sym)
    assert tg.head_grad_names == []  # SoftmaxOutput ignores its head gradient (MXNet)
    assert tg.data_names == ["data", "softmax_label"]
    _check_maps(tg)
    res = training_step(sym, values, _params(sym))
    params = _params(sym)
    assert sorted(res.grads) == sorted(params)
    del values["softmax_label"]
    check_grads(_softmax_ce(sym, label), values, res.grads, params)


def test_cnn_gradients_match_finite_differences():
    x = at.sym.Variable("data", shape=(2, 2, 6, 6))
    h = at.sym.Convolution(x, num_filter=3, kernel=(3, 3), pad=(1, 1), name="conv1")
    h = at.sym.Activation(h, act_type="tanh", name="act1")
    h = at.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="pool1")
    h = at.sym.Flatten(h, name="flat")
    h = at.sym.FullyConnected(h, num_hidden=4, name="fc1")
    sym = at.sym.SoftmaxOutput(h, at.sym.Variable("softmax_label", shape=(2,)), name="softmax")
    values = _values(sym, seed=3)
    label = np.array([1.0, 3.0])
    values["softmax_label"] = label
    tg = training_graph(sym, optimizer="momentum")
    _check_maps(tg)
    res = training_step(sym, values, _params(sym))
    del values["softmax_label"]
    check_grads(_softmax_ce(sym, label), values, res.grads, _params(sym))


def test_lstm_gradients_match_finite_differences_and_timesteps_are_marked():
    sym = at.models.rnn(layers=2, hidden=3, steps=3, batch=2, vocab=5)
    rng = np.random.default_rng(4)
    values = _values(sym, seed=4)
    values["data"] = rng.integers(0, 5, size=(3, 2)).astype(np.float64)
    label = rng.integers(0, 5, size=6).astype(np.float64)
    values["softmax_label"] = label
    tg = training_graph(sym)
    _check_maps(tg)
    by_name = {n.name: n for n in tg.symbol.topo_nodes()}
    for bwd, fwd in tg.backward_of.items():
        for key in ("__timestep__", "__rnn_cell__"):
            assert by_name[bwd].attrs.get(key) == by_name[fwd].attrs.get(key), (bwd, fwd, key)
    # the shared weights get one gradient: the sum over timesteps
    assert tg.grad_sum_of.get("lstm0_h2h_weight_grad_sum") == "lstm0_h2h_weight"
    res = training_step(sym, values, _params(sym))
    data, label_v = values.pop("data"), values.pop("softmax_label")
    params = _params(sym)

    def loss(v):
        return _softmax_ce(sym, label_v)({**v, "data": data})

    check_grads(loss, values, res.grads, params)


def test_long_gradient_sums_are_chains_of_capped_add_n(monkeypatch):
    """A weight shared by 12 timesteps gets its gradient from add_n nodes of at most
    GRAD_SUM_CAP inputs, each after the first adding the next pieces to the running sum (so
    the pieces die as they are added), 12 pieces in all, and the step equals the one with a
    single add_n over all 12 pieces (cap lifted) and the finite differences of the loss."""
    import autotile.autodiff.graph as graph

    sym = at.models.rnn(layers=1, hidden=3, steps=12, batch=2, vocab=5)
    rng = np.random.default_rng(5)
    values = _values(sym, seed=5)
    values["data"] = rng.integers(0, 5, size=(12, 2)).astype(np.float64)
    values["softmax_label"] = rng.integers(0, 5, size=24).astype(np.float64)
    tg = training_graph(sym)
    _check_maps(tg)
    by_name = {n.name: n for n in tg.symbol.topo_nodes()}
    links = [n for n, w in tg.grad_sum_of.items() if w == "lstm0_i2h_weight"]
    cap = graph.GRAD_SUM_CAP
    assert len(links) == 1 + -(-(12 - cap) // (cap - 1))  # cap pieces, then cap - 1 more per link
    assert links[-1] == "lstm0_i2h_weight_grad_sum"  # in chain order, the total last
    pieces = set()
    for j, name in enumerate(links):
        node = by_name[name]
        assert node.op == "add_n" and len(node.inputs) <= cap
        ins = [src.name for src, _ in node.inputs]
        assert j == 0 or ins[0] == links[j - 1]  # the running sum comes first
        pieces.update(i for i in ins if i not in links)
    assert len(pieces) == 12
    chained = training_step(sym, dict(values), _params(sym))
    monkeypatch.setattr(graph, "GRAD_SUM_CAP", 1000)
    assert len([n for n, w in training_graph(sym).grad_sum_of.items() if w == "lstm0_i2h_weight"]) == 1
    single = training_step(sym, dict(values), _params(sym))
    for k, g in single.grads.items():
        np.testing.assert_allclose(chained.grads[k], g, rtol=1e-12, atol=1e-12, err_msg=k)
    data, label_v = values.pop("data"), values.pop("softmax_label")

    def loss(v):
        return _softmax_ce(sym, label_v)({**v, "data": data})

    check_grads(loss, values, chained.grads, _params(sym))


def test_batchnorm_aux_states_get_no_gradient_and_are_updated():
    x = at.sym.Variable("data", shape=(4, 3))
    h = at.sym.FullyConnected(x, num_hidden=3, name="fc1")
    h = at.sym.BatchNorm(h, fix_gamma=False, name="bn1")
    sym = at.sym.FullyConnected(h, num_hidden=2, name="fc2")
    tg = training_graph(sym)
    _check_maps(tg)
    assert tg.aux_names == ["bn1_moving_mean", "bn1_moving_var"]
    assert not set(tg.aux_names) & set(tg.param_names)
    assert not set(tg.aux_names) & set(tg.update_nodes.values())
    values = _values(sym, seed=6)
    values["bn1_moving_var"] = np.abs(values["bn1_moving_var"]) + 1
    head = np.random.default_rng(7).standard_normal((4, 2))
    res = training_step(sym, {**values, "fc2_output_head_grad": head}, None)
    assert sorted(res.aux) == ["bn1_moving_mean", "bn1_moving_var"]
    hidden = values["data"] @ values["fc1_weight"].T + values["fc1_bias"]
    mom = 0.9  # MXNet's default BatchNorm momentum
    np.testing.assert_allclose(res.aux["bn1_moving_mean"],
                               mom * values["bn1_moving_mean"] + (1 - mom) * hidden.mean(axis=0), rtol=1e-6)
    params = [p for p in sym.list_arguments() if p != "data"]
    check_grads(lambda v: float(np.sum(forward_outputs(sym, v)[0] * head)), values, res.grads, params,
                rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_update_equals_optimizer_formula(optimizer):
    sym = _mlp_with_residual()
    values = _values(sym, seed=8)
    params = _params(sym)
    rng = np.random.default_rng(9)
    args = {"lr": 0.05, "wd": 0.01}
    if optimizer == "momentum":
        args["momentum"] = 0.8
    states = {}
    if optimizer == "momentum":
        states = {f"{p}_mom": rng.standard_normal(values[p].shape) for p in params}
    if optimizer == "adam":
        states = {f"{p}_{s}": np.abs(rng.standard_normal(values[p].shape)) for p in params for s in ("mean", "var")}
    res = training_step(sym, {**values, **states}, params, optimizer=optimizer, optimizer_args=args)
    plain = training_step(sym, values, params)  # gradients do not depend on the optimizer
    for p in params:
        w, g = values[p], plain.grads[p]
        np.testing.assert_allclose(res.grads[p], g, rtol=1e-12)
        g = g + args["wd"] * w
        if optimizer == "sgd":
            want = w - args["lr"] * g
        elif optimizer == "momentum":
            mom = args["momentum"] * states[f"{p}_mom"] - args["lr"] * g
            want = w + mom
            np.testing.assert_allclose(res.stats["optimizer_states"][f"{p}_mom"], mom, rtol=1e-10)
        else:
            mean = 0.9 * states[f"{p}_mean"] + 0.1 * g
            var = 0.999 * states[f"{p}_var"] + 0.001 * g * g
            want = w - args["lr"] * mean / (np.sqrt(var) + 1e-8)
            np.testing.assert_allclose(res.stats["optimizer_states"][f"{p}_mean"], mean, rtol=1e-10)
            np.testing.assert_allclose(res.stats["optimizer_states"][f"{p}_var"], var, rtol=1e-10)
        np.testing.assert_allclose(res.params[p], want, rtol=1e-10, atol=1e-12)


def test_optimizer_states_start_at_zero():
    sym = _mlp_with_residual()
    values = _values(sym, seed=10)
    params = _params(sym)
    res = training_step(sym, values, params, optimizer="momentum", optimizer_args={"lr": 0.1})
    for p in params:  # first momentum step from zero state: w - lr * g
        np.testing.assert_allclose(res.params[p], values[p] - 0.1 * res.grads[p], rtol=1e-10, atol=1e-12)


def test_explicit_params_freeze_the_rest_and_lr_mult_scales():
    x = at.sym.Variable("data", shape=(3, 4))
    w = at.sym.Variable("fc1_weight", lr_mult=0.5)
    sym = at.sym.FullyConnected(x, weight=w, num_hidden=2, name="fc1")
    tg = training_graph(sym, params=["fc1_weight"])
    assert tg.param_names == ["fc1_weight"] and "fc1_bias" in tg.data_names
    values = _values(sym, seed=11)
    res = training_step(sym, values, ["fc1_weight"], optimizer_args={"lr": 0.2})
    assert list(res.params) == ["fc1_weight"]
    np.testing.assert_allclose(res.params["fc1_weight"], values["fc1_weight"] - 0.1 * res.grads["fc1_weight"])


def test_param_not_reaching_the_loss_gets_zero_gradient():
    x = at.sym.Variable("data", shape=(3, 4))
    a = at.sym.FullyConnected(x, num_hidden=2, name="fc1")
    b = at.sym.BlockGrad(at.sym.FullyConnected(x, num_hidden=2, name="fc2"), name="stop")
    sym = at.sym.elemwise_add(a, b, name="out")
    values = _values(sym, seed=12)
    tg = training_graph(sym)
    _check_maps(tg)
    res = training_step(sym, values, None)
    assert np.all(res.grads["fc2_weight"] == 0) and np.all(res.params["fc2_weight"] == values["fc2_weight"])
    assert np.any(res.grads["fc1_weight"] != 0)


def test_training_symbol_infers_shapes_on_its_own():
    tg = training_graph(at.models.mlp(8, layers=2, hidden=4, classes=3), optimizer="adam")
    arg_shapes, out_shapes, _ = tg.symbol.infer_shape()
    shapes = dict(zip(tg.symbol.list_outputs(), out_shapes))
    assert shapes[tg.grad_names[0]] == (4, 4)  # fc1_weight (hidden, input_dim)
    assert dict(zip(tg.symbol.list_arguments(), arg_shapes))["fc2_weight_var"] == (3, 4)


def test_training_symbol_round_trips_through_json():
    tg = training_graph(at.models.rnn(2, 4, steps=3, batch=2, vocab=5), optimizer="momentum")
    loaded = at.sym.load_json(tg.symbol.tojson())
    assert loaded.list_outputs() == tg.symbol.list_outputs()
    assert sorted(loaded.list_inputs()) == sorted(tg.symbol.list_inputs())
    node = next(n for n in loaded.topo_nodes() if n.name == "lstm1_t2_h_backward0")
    assert node.attrs["__timestep__"] == "2" and node.attrs["__rnn_cell__"] == "lstm1"


def test_backend_run_train_uses_the_training_step():
    sym = _mlp_with_residual()
    values = _values(sym, seed=13)
    params = {p: values[p] for p in _params(sym)}
    res = at.backend.run(sym, inputs={"data": values["data"]}, params=params, train=True)
    direct = training_step(sym, values, list(params))
    for p in params:
        np.testing.assert_allclose(res.params[p], direct.params[p], rtol=1e-12)
        np.testing.assert_allclose(res.grads[p], direct.grads[p], rtol=1e-12)


def test_bad_input_raises_named_errors():
    sym = _mlp_with_residual()
    with pytest.raises(at.Error, match="unknown optimizer 'rmsprop'"):
        training_graph(sym, optimizer="rmsprop")
    with pytest.raises(at.Error, match="unknown arguments \\['lrr'\\]"):
        training_graph(sym, optimizer_args={"lrr": 0.1})
    with pytest.raises(at.Error, match="'nope'"):
        training_graph(sym, params=["fc1_weight", "nope"])
    w = at.sym.Variable("w", shape=(2, 3))
    no_grad = at.sym.create("_backward_Activation", at.sym.Variable("data", shape=(2, 3)), w,
                            act_type="relu", name="odd")
    with pytest.raises(at.Error, match="node 'odd' \\(op _backward_Activation\\) has no gradient"):
        training_graph(no_grad)
    clash = at.sym.Activation(at.sym.FullyConnected(at.sym.Variable("data"), num_hidden=2, name="fc1"),
                              act_type="relu", name="fc1_weight_update")
    with pytest.raises(at.Error, match="fc1_weight_update"):
        training_graph(clash)
