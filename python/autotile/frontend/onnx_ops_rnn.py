"""ONNX LSTM and GRU, unrolled over their (static) sequence length into primitive ops.

Each direction's weights stay the model's own W, R, B tensors: the unrolled graph slices its
gates out of them, so training updates the initializers themselves. Gate layouts are ONNX's:
LSTM ``i, o, f, c`` (peepholes ``i, o, f``), GRU ``z, r, h``; ``Y`` is ``[seq, dirs, batch,
hidden]`` (``[batch, seq, dirs, hidden]`` with ``layout=1``) and ``Y_h``/``Y_c`` are
``[dirs, batch, hidden]`` (``[batch, dirs, hidden]`` with ``layout=1``).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from .onnx_registry import converter

_ACTIVATIONS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}


class _Rnn:
    """What both cells share: attributes, shapes, and per-direction weight slices."""

    def __init__(self, ctx, gates: int, default_acts: List[str]):
        self.ctx = ctx
        self.gates = gates
        self.hidden = int(ctx.attr("hidden_size"))
        self.layout = int(ctx.attr("layout", 0))
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"direction {direction!r} is not forward, reverse or bidirectional")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        acts = ctx.attr("activations") or default_acts * len(self.directions)
        per = len(default_acts)
        if len(acts) != per * len(self.directions):
            raise ctx.error(f"activations {acts} must list {per} functions per direction")
        unknown = [a for a in acts if a not in _ACTIVATIONS]
        if unknown:
            raise ctx.error(f"activations {unknown} are not supported (Sigmoid, Tanh, Relu)")
        self.acts = [[_ACTIVATIONS[a] for a in acts[d * per:(d + 1) * per]] for d in range(len(self.directions))]
        self.clip = ctx.attr("clip")
        shape = ctx.need_shape(0, "to unroll the sequence")
        if len(shape) != 3:
            raise ctx.error(f"X must be 3-D, got shape {shape}")
        self.seq, self.batch = (shape[0], shape[1]) if self.layout == 0 else (shape[1], shape[0])
        if ctx.has_input(4):
            lens = ctx.const(4, "sequence_lens")
            if not (np.asarray(lens) == self.seq).all():
                raise ctx.error(f"sequence_lens {np.asarray(lens).tolist()} differ from the sequence length "
                                f"{self.seq}; variable-length sequences are not supported")
        self.steps = [self._step_input(t) for t in range(self.seq)]

    # -- inputs
    def _step_input(self, t: int):
        x = self.ctx.op("slice_axis", self.ctx.input(0), axis=self.layout, begin=t, end=t + 1, suffix=f"x{t}")
        return self.ctx.op("squeeze", x, axis=(self.layout,), suffix=f"x{t}_2d")

    def direction_slice(self, i: int, d: int, tag: str):
        """Input i's slice for direction d, without its leading direction axis."""
        ctx = self.ctx
        x = ctx.input(i)
        if len(self.directions) > 1:
            x = ctx.op("slice_axis", x, axis=0, begin=d, end=d + 1, suffix=f"{tag}_d{d}")
        return ctx.op("squeeze", x, axis=(0,), suffix=f"{tag}{d}")

    def initial(self, i: int, d: int, tag: str):
        """initial_h / initial_c of direction d as (batch, hidden), or None when absent or zero."""
        ctx = self.ctx
        if not ctx.has_input(i):
            return None
        if ctx.is_const(i) and not np.any(ctx.const(i)):
            return None  # zeros (what exporters write): the first step has no recurrent term
        if self.layout == 0:
            return self.direction_slice(i, d, tag)
        x = ctx.op("slice_axis", ctx.input(i), axis=1, begin=d, end=d + 1, suffix=f"{tag}_d{d}")
        return ctx.op("squeeze", x, axis=(1,), suffix=f"{tag}{d}")

    def bias(self, d: int):
        """(Wb, Rb) of direction d, each (gates * hidden,), or (None, None) without B."""
        ctx = self.ctx
        if not ctx.has_input(3):
            return None, None
        b = self.direction_slice(3, d, "B")
        n = self.gates * self.hidden
        wb = ctx.op("slice_axis", b, axis=0, begin=0, end=n, suffix=f"Wb{d}")
        rb = ctx.op("slice_axis", b, axis=0, begin=n, end=2 * n, suffix=f"Rb{d}")
        return wb, rb

    # -- helpers
    def fc(self, x, w, bias, tag: str):
        kwargs = {"num_hidden": self.gates * self.hidden, "no_bias": bias is None, "flatten": False}
        args = (x, w) if bias is None else (x, w, bias)
        return self.ctx.op("FullyConnected", *args, suffix=tag, **kwargs)

    def split(self, gates, tag: str):
        out = self.ctx.op("SliceChannel", gates, num_outputs=self.gates, axis=1, suffix=tag)
        return [out[k] for k in range(self.gates)]

    def act(self, kind: str, x, tag: str):
        if self.clip is not None and kind != "relu":
            x = self.ctx.op("clip", x, a_min=-float(self.clip), a_max=float(self.clip), suffix=f"{tag}_clip")
        return self.ctx.op("Activation", x, act_type=kind, suffix=tag)

    def order(self, d: int) -> List[int]:
        return list(range(self.seq)) if self.directions[d] == "forward" else list(range(self.seq - 1, -1, -1))

    # -- outputs
    def outputs(self, per_dir_states: List[List], finals: List[List]):
        """[Y, Y_h, (Y_c)] from each direction's per-time-step H and its final states."""
        ctx = self.ctx
        wanted = [k < len(ctx.node.output) and ctx.node.output[k] != "" for k in range(1 + len(finals))]
        outs: List[Optional[object]] = [None] * (1 + len(finals))
        if wanted[0]:
            # Y[t, d] = H of direction d at step t: (1, 1, batch, hidden) pieces, layout 1 transposed.
            rows = []
            for t in range(self.seq):
                parts = [ctx.op("reshape", per_dir_states[d][t], shape=(1, 1, self.batch, self.hidden),
                                suffix=f"y{t}_{d}") for d in range(len(self.directions))]
                rows.append(parts[0] if len(parts) == 1 else
                            ctx.op("Concat", *parts, dim=1, num_args=len(parts), suffix=f"y{t}"))
            y = rows[0] if len(rows) == 1 else ctx.op("Concat", *rows, dim=0, num_args=len(rows), suffix="Y_seq")
            if self.layout == 1:
                y = ctx.op("transpose", y, axes=(2, 0, 1, 3), suffix="Y")
            outs[0] = y
        for k, states in enumerate(finals):
            if not wanted[k + 1]:
                continue
            axis = 0 if self.layout == 0 else 1
            parts = [ctx.op("expand_dims", s, axis=axis, suffix=f"final{k}_{d}") for d, s in enumerate(states)]
            outs[k + 1] = parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, dim=axis, num_args=len(parts),
                                                                     suffix=f"final{k}")
        return outs


@converter("LSTM")
def lstm(ctx):
    if ctx.attr("input_forget", 0):
        raise ctx.error("input_forget=1 (coupled input and forget gates) is not supported")
    rnn = _Rnn(ctx, 4, ["Sigmoid", "Tanh", "Tanh"])
    hs_all, h_final, c_final = [], [], []
    for d in range(len(rnn.directions)):
        f_act, g_act, h_act = rnn.acts[d]
        w, r = rnn.direction_slice(1, d, "W"), rnn.direction_slice(2, d, "R")
        wb, rb = rnn.bias(d)
        bias = None if wb is None else ctx.op("elemwise_add", wb, rb, suffix=f"bias{d}")
        peep = None
        if ctx.has_input(7) and not (ctx.is_const(7) and not np.any(ctx.const(7))):
            p = rnn.direction_slice(7, d, "P")
            peep = [ctx.op("slice_axis", p, axis=0, begin=k * rnn.hidden, end=(k + 1) * rnn.hidden,
                           suffix=f"P{d}_{g}") for k, g in enumerate("iof")]
        h, c = rnn.initial(5, d, "h0_"), rnn.initial(6, d, "c0_")
        hs = [None] * rnn.seq
        for t in rnn.order(d):
            tag = f"d{d}t{t}"
            gates = rnn.fc(rnn.steps[t], w, bias, f"xw_{tag}")
            if h is not None:
                gates = ctx.op("elemwise_add", gates, rnn.fc(h, r, None, f"hr_{tag}"), suffix=f"g_{tag}")
            i, o, f, g = rnn.split(gates, f"gates_{tag}")
            if peep is not None and c is not None:
                i = ctx.op("elemwise_add", i, ctx.op("broadcast_mul", c, peep[0], suffix=f"pi_{tag}"), suffix=f"ip_{tag}")
                f = ctx.op("elemwise_add", f, ctx.op("broadcast_mul", c, peep[2], suffix=f"pf_{tag}"), suffix=f"fp_{tag}")
            i, f = rnn.act(f_act, i, f"i_{tag}"), rnn.act(f_act, f, f"f_{tag}")
            g = rnn.act(g_act, g, f"c_{tag}")
            ig = ctx.op("elemwise_mul", i, g, suffix=f"ig_{tag}")
            c = ig if c is None else ctx.op("elemwise_add", ctx.op("elemwise_mul", f, c, suffix=f"fc_{tag}"), ig,
                                            suffix=f"C_{tag}")
            if peep is not None:
                o = ctx.op("elemwise_add", o, ctx.op("broadcast_mul", c, peep[1], suffix=f"po_{tag}"), suffix=f"op_{tag}")
            o = rnn.act(f_act, o, f"o_{tag}")
            h = ctx.op("elemwise_mul", o, rnn.act(h_act, c, f"tc_{tag}"), suffix=f"H_{tag}")
            hs[t] = h
        hs_all.append(hs)
        h_final.append(h)
        c_final.append(c)
    return rnn.outputs(hs_all, [h_final, c_final])


@converter("GRU")
def gru(ctx):
    rnn = _Rnn(ctx, 3, ["Sigmoid", "Tanh"])
    before_reset = bool(ctx.attr("linear_before_reset", 0))
    hs_all, h_final = [], []
    H = rnn.hidden
    for d in range(len(rnn.directions)):
        f_act, g_act = rnn.acts[d]
        w, r = rnn.direction_slice(1, d, "W"), rnn.direction_slice(2, d, "R")
        wb, rb = rnn.bias(d)
        # R's z/r rows and its h rows are used apart (the h rows see the reset gate first).
        r_zr = ctx.op("slice_axis", r, axis=0, begin=0, end=2 * H, suffix=f"Rzr{d}")
        r_h = ctx.op("slice_axis", r, axis=0, begin=2 * H, end=3 * H, suffix=f"Rh{d}")
        rb_zr = None if rb is None else ctx.op("slice_axis", rb, axis=0, begin=0, end=2 * H, suffix=f"Rbzr{d}")
        rb_h = None if rb is None else ctx.op("slice_axis", rb, axis=0, begin=2 * H, end=3 * H, suffix=f"Rbh{d}")
        h = rnn.initial(5, d, "h0_")
        hs = [None] * rnn.seq
        for t in rnn.order(d):
            tag = f"d{d}t{t}"
            xw = rnn.fc(rnn.steps[t], w, wb, f"xw_{tag}")  # (batch, 3H): z, r, h parts
            xz, xr, xh = rnn.split(xw, f"xgates_{tag}")
            if h is None:  # zero initial state: no recurrent term but the biases
                z_pre, r_pre = xz, xr
                if rb is not None:
                    zr_b = ctx.op("SliceChannel", ctx.op("reshape", rb_zr, shape=(1, 2 * H), suffix=f"rbzr_{tag}"),
                                  num_outputs=2, axis=1, suffix=f"rbzr2_{tag}")
                    z_pre = ctx.op("broadcast_add", xz, zr_b[0], suffix=f"zb_{tag}")
                    r_pre = ctx.op("broadcast_add", xr, zr_b[1], suffix=f"rb_{tag}")
            else:
                hzr = ctx.op("FullyConnected", *((h, r_zr) if rb_zr is None else (h, r_zr, rb_zr)), num_hidden=2 * H,
                             no_bias=rb_zr is None, flatten=False, suffix=f"hzr_{tag}")
                hz, hr_ = [ctx.op("SliceChannel", hzr, num_outputs=2, axis=1, suffix=f"hzr2_{tag}")[k] for k in (0, 1)]
                z_pre = ctx.op("elemwise_add", xz, hz, suffix=f"zpre_{tag}")
                r_pre = ctx.op("elemwise_add", xr, hr_, suffix=f"rpre_{tag}")
            z = rnn.act(f_act, z_pre, f"z_{tag}")
            rg = rnn.act(f_act, r_pre, f"r_{tag}")
            if h is None:  # zero state: (r * 0) R^T + Rbh = Rbh, r * (0 R^T + Rbh) = r * Rbh
                cand = xh
                if rb_h is not None:
                    rbh = ctx.op("reshape", rb_h, shape=(1, H), suffix=f"rbh_{tag}")
                    rec = ctx.op("broadcast_mul", rg, rbh, suffix=f"rrb_{tag}") if before_reset else rbh
                    cand = ctx.op("broadcast_add", xh, rec, suffix=f"hpre_{tag}")
            else:
                if before_reset:
                    hh = ctx.op("FullyConnected", *((h, r_h) if rb_h is None else (h, r_h, rb_h)), num_hidden=H,
                                no_bias=rb_h is None, flatten=False, suffix=f"hh_{tag}")
                    rec = ctx.op("elemwise_mul", rg, hh, suffix=f"rhh_{tag}")
                else:
                    rh = ctx.op("elemwise_mul", rg, h, suffix=f"rh_{tag}")
                    rec = ctx.op("FullyConnected", *((rh, r_h) if rb_h is None else (rh, r_h, rb_h)), num_hidden=H,
                                 no_bias=rb_h is None, flatten=False, suffix=f"rec_{tag}")
                cand = ctx.op("elemwise_add", xh, rec, suffix=f"hpre_{tag}")
            cand = rnn.act(g_act, cand, f"hc_{tag}")
            # H = (1 - z) * cand + z * h = cand + z * (h - cand)
            if h is None:
                h = ctx.op("elemwise_sub", cand, ctx.op("elemwise_mul", z, cand, suffix=f"zc_{tag}"), suffix=f"H_{tag}")
            else:
                diff = ctx.op("elemwise_sub", h, cand, suffix=f"hd_{tag}")
                h = ctx.op("elemwise_add", cand, ctx.op("elemwise_mul", z, diff, suffix=f"zd_{tag}"), suffix=f"H_{tag}")
            hs[t] = h
        hs_all.append(hs)
        h_final.append(h)
    return rnn.outputs(hs_all, [h_final])
