"""Multi-layer LSTM language model unrolled from primitive ops (Tofu Sec 7's RNN, after
Jozefowicz et al. 2016: L layers of H-unit LSTM cells, 20 steps).

Every node of layer l at step t carries the attributes ``__rnn_cell__="lstm{l}"`` and
``__timestep__="{t}"``; the weights of a layer are shared by all its timesteps, so the
planner can merge a layer's timesteps into one group (Tofu Sec 5.1).
"""
from __future__ import annotations

from typing import List

from ..symbol.symbol import Variable
from ._layers import check_positive, op


def lstm_cell(x, h, c, layer: int, t: int, hidden: int, weights: dict):
    """One LSTM step (MXNet's LSTMCell: gates i, f, g, o from i2h(x) + h2h(h)). `h`/`c` are
    None at the first step (zero initial state: the h2h product and the forget term vanish
    and are left out). Returns (h, c)."""
    attr = {"__rnn_cell__": f"lstm{layer}", "__timestep__": str(t)}
    name = f"lstm{layer}_t{t}"

    def apply(op_name, *args, suffix, **kw):
        return op(op_name, *args, name=f"{name}_{suffix}", attr=attr, **kw)

    gates = apply("FullyConnected", x, weight=weights["i2h_weight"], bias=weights["i2h_bias"],
                  num_hidden=4 * hidden, suffix="i2h")
    if h is not None:
        h2h = apply("FullyConnected", h, weight=weights["h2h_weight"], bias=weights["h2h_bias"],
                    num_hidden=4 * hidden, suffix="h2h")
        gates = apply("elemwise_add", gates, h2h, suffix="gates")
    sliced = apply("SliceChannel", gates, num_outputs=4, axis=1, suffix="slice")
    in_gate = apply("Activation", sliced[0], act_type="sigmoid", suffix="i")
    forget_gate = apply("Activation", sliced[1], act_type="sigmoid", suffix="f")
    in_transform = apply("Activation", sliced[2], act_type="tanh", suffix="g")
    out_gate = apply("Activation", sliced[3], act_type="sigmoid", suffix="o")
    new_c = apply("elemwise_mul", in_gate, in_transform, suffix="ig")
    if c is not None:
        kept = apply("elemwise_mul", forget_gate, c, suffix="fc")
        new_c = apply("elemwise_add", kept, new_c, suffix="c")
    c_act = apply("Activation", new_c, act_type="tanh", suffix="c_tanh")
    new_h = apply("elemwise_mul", out_gate, c_act, suffix="h")
    return new_h, new_c


def rnn(layers: int, hidden: int, steps: int = 20, batch: int = 32, vocab: int = 10000):
    """An LSTM language model: data (steps, batch) token ids -> Embedding(vocab, hidden) ->
    SliceChannel into steps -> `layers` LSTM layers (weights ``lstm{l}_i2h_weight`` (4H, H),
    ``lstm{l}_h2h_weight`` (4H, H) and biases, shared across steps) -> Concat of the last
    layer's outputs (steps*batch, hidden) -> FullyConnected ``pred`` (vocab) -> SoftmaxOutput
    with label ``softmax_label`` (steps*batch,), step-major like the Concat."""
    check_positive("rnn", layers=layers, hidden=hidden, steps=steps, batch=batch, vocab=vocab)
    # the batch is dim 1 of the token ids; the step-major labels have no batch dim (data
    # parallelism splits the batch where the inputs bind it: planner.data_batch_dims)
    data = Variable("data", shape=(steps, batch), batch_dim=1)
    embed = op("Embedding", data, input_dim=vocab, output_dim=hidden, name="embed")
    sliced = op("SliceChannel", embed, num_outputs=steps, axis=0, squeeze_axis=True, name="embed_slice")
    inputs: List = [sliced[t] for t in range(steps)]
    for layer in range(layers):
        weights = {k: Variable(f"lstm{layer}_{k}") for k in ("i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias")}
        h = c = None
        outputs = []
        for t in range(steps):
            h, c = lstm_cell(inputs[t], h, c, layer, t, hidden, weights)
            outputs.append(h)
        inputs = outputs
    merged = op("Concat", *inputs, dim=0, name="concat") if steps > 1 else inputs[0]
    pred = op("FullyConnected", merged, num_hidden=vocab, name="pred")
    label = Variable("softmax_label", shape=(steps * batch,), batch_dim="none")
    return op("SoftmaxOutput", pred, label, name="softmax")
