"""The shape, reduction, matmul and embedding ops inside a whole training graph (autodiff
through their registered backward ops) against finite differences of the loss."""
import os
import sys

import numpy as np

import autotile as at
from autotile.backend import training_step

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "autodiff"))
from fd import check_grads, forward_outputs  # noqa: E402


def _model():
    data = at.sym.Variable("data", shape=(2, 3))
    e = at.sym.Embedding(data, input_dim=5, output_dim=4, name="emb")            # (2, 3, 4)
    t = at.sym.transpose(e, axes=(0, 2, 1), name="tp")                          # (2, 4, 3)
    b = at.sym.batch_dot(t, e, name="bd")                                       # (2, 4, 4)
    f = at.sym.Reshape(b, shape=(0, -1), name="rs")                             # (2, 16)
    h = at.sym.FullyConnected(f, num_hidden=6, name="fc")                       # (2, 6)
    p = at.sym.split(h, num_outputs=2, axis=1, name="sp")                       # 2 x (2, 3)
    sl = at.sym.slice_axis(f, axis=1, begin=2, end=5, name="sa")                # (2, 3)
    c = at.sym.Concat(p[1], p[0], sl, dim=1, name="cat")                        # (2, 9)
    m = at.sym.max(c, axis=1, keepdims=True, name="mx")  # (2, 1); c has no ties (FD-safe)
    d = at.sym.dot(c, at.sym.Variable("w2", shape=(9, 2)), name="dt")           # (2, 2)
    out = at.sym.elemwise_add(d, at.sym.broadcast_to(m, shape=(2, 2), name="bt"), name="out")
    s = at.sym.mean(at.sym.expand_dims(c, axis=0, name="ed"), axis=(0, 1), name="mn")  # (9,)
    return at.sym.Group([out, s])


def test_training_graph_gradients_match_finite_differences():
    sym = _model()
    rng = np.random.default_rng(0)
    arg_shapes, _, _ = sym.infer_shape()
    values = {n: 0.5 * rng.standard_normal(s) for n, s in zip(sym.list_arguments(), arg_shapes)}
    values["data"] = np.array([[0.0, 3.0, 3.0], [1.0, 0.0, 3.0]])  # repeated indices
    params = [n for n in sym.list_arguments() if n != "data"]
    res = training_step(sym, values, params)
    assert sorted(res.grads) == sorted(params)

    def loss(v):  # head gradients default to ones: the loss is the sum of every output
        return float(sum(np.sum(o) for o in forward_outputs(sym, v)))

    check_grads(loss, {k: v for k, v in values.items()}, res.grads, params)
