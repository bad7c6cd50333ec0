"""Random small graphs for the DP-vs-bruteforce property: chains with residual adds,
multi-output (fan-out) nodes, windowed ops, reductions to a lower rank, weight gradients with
tied updates, and unrolled "cells" whose steps carry __timestep_group__ (shared strategies
and tied outputs). Built on graphs.Builder, so every node has TDL text and a MockProvider
spec; sizes are kept small enough for exhaustive enumeration of every cut."""
from __future__ import annotations

from hypothesis import strategies as st

from .graphs import Builder

DIMS = [2, 3, 4, 6, 8]


class RandomGraph:
    """Draws one graph from hypothesis `data`; `b` is the Builder."""

    def __init__(self, data, max_ops=8):
        self.data = data
        self.b = Builder()
        self.count = 0
        self.matrices = []  # produced or input tensors of rank 2
        B = self.draw(st.sampled_from(DIMS))
        U = self.draw(st.sampled_from(DIMS))
        self.matrices.append(self.b.tensor("x", (B, U)))
        if self.draw(st.booleans()):
            self.cell(steps=self.draw(st.integers(2, 3)))
        else:
            for _ in range(self.draw(st.integers(1, max_ops))):
                self.op()

    def draw(self, strategy):
        return self.data.draw(strategy)

    def name(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def shape(self, t):
        return self.b.g.tensor(t)["shape"]

    def pick(self):
        return self.matrices[self.draw(st.integers(0, len(self.matrices) - 1))]

    def node(self, name, ins, outs, tdl, spec, attrs=None, role="forward"):
        n = self.b.node(name, ins, outs, tdl, spec, role)
        for k, v in (attrs or {}).items():
            self.b.g.set_attr(n, k, v)
        return n

    # -- ops, each appends what it makes --------------------------------------------------
    def op(self, attrs=None, x=None, tag=None):
        kind = self.draw(st.sampled_from(["fc", "add", "fanout", "window", "rowsum"]))
        x = self.pick() if x is None else x
        B, U = self.shape(x)
        tag = tag or self.name(kind)
        if kind == "fc":
            O = self.draw(st.sampled_from(DIMS))
            W = self.b.tensor(f"{tag}_w", (O, U), is_param=True)
            y = self.b.tensor(f"{tag}_y", (B, O))
            self.node(f"fc#{tag}", [x, W], [y], "data, weight -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] }",
                      {"out": [["n", "o"]], "red": ["k"], "in": [["n", "k"], ["o", "k"]]}, attrs)
            self.matrices.append(y)
            if self.draw(st.booleans()):  # weight gradient and a tied SGD update
                dW = self.b.tensor(f"{tag}_dw", (O, U))
                self.node(f"fcbw#{tag}", [y, x], [dW], "dy, data -> dw: dw[o, k] = sum(n) { dy[n, o] * data[n, k] }",
                          {"out": [["o", "k"]], "red": ["n"], "in": [["n", "o"], ["n", "k"]]}, attrs)
                Wn = self.b.tensor(f"{tag}_w_next", (O, U))
                self.node(f"sgd#{tag}", [W, dW], [Wn], "w, g -> o: o[i, j] = f(w[i, j], g[i, j])",
                          {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i", "j"]]}, attrs, "update")
            return y
        if kind == "add":  # a residual connection to any earlier tensor of the same shape
            same = [t for t in self.matrices if self.shape(t) == (B, U)]
            other = same[self.draw(st.integers(0, len(same) - 1))]
            y = self.b.tensor(f"{tag}_y", (B, U))
            self.node(f"add#{tag}", [x, other], [y], "a, b -> c: c[i, j] = a[i, j] + b[i, j]",
                      {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i", "j"]]}, attrs)
            self.matrices.append(y)
            return y
        if kind == "fanout":  # one node, several outputs (SliceChannel / BatchNorm style)
            m = self.draw(st.integers(2, 4))
            outs = [self.b.tensor(f"{tag}_y{j}", (B, U)) for j in range(m)]
            names = ", ".join(f"y{j}" for j in range(m))
            body = "; ".join(f"y{j}[i, j] = f{j}(x[i, j])" for j in range(m))
            self.node(f"fan#{tag}", [x], outs, f"x -> {names}: {body}",
                      {"out": [["i", "j"]] * m, "red": [], "in": [["i", "j"]]}, attrs)
            self.matrices.extend(outs)
            return outs[-1]
        if kind == "window":  # a 3-tap stencil along dim 1 (halo exchange)
            y = self.b.tensor(f"{tag}_y", (B, U))
            self.node(f"win#{tag}", [x], [y], "x -> y: y[i, j] = sum(kx) { x[i, j + kx - 1] }",
                      {"out": [["i", "j"]], "red": [], "in": [["i", ("j", -1, 1)]]}, attrs)
            self.matrices.append(y)
            return y
        # rowsum then scale: a rank-1 tensor that may be partial, broadcast back
        s = self.b.tensor(f"{tag}_s", (B,))
        self.node(f"sum#{tag}", [x], [s], "x -> s: s[i] = sum(j) { x[i, j] }",
                  {"out": [["i"]], "red": ["j"], "in": [["i", "j"]]}, attrs)
        y = self.b.tensor(f"{tag}_y", (B, U))
        self.node(f"scale#{tag}", [x, s], [y], "x, s -> y: y[i, j] = x[i, j] * s[i]",
                  {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i"]]}, attrs)
        self.matrices.append(y)
        return y

    def cell(self, steps):
        """An unrolled cell: each step applies the same op kinds (drawn once per position)
        to the previous step's output; nodes of one position share a __timestep_group__."""
        kinds = [self.draw(st.sampled_from(["add", "fanout", "window", "rowsum"])) for _ in range(2)]
        h = self.matrices[0]
        for t in range(steps):
            for pos, kind in enumerate(kinds):
                h = self._cell_op(kind, h, {"__timestep_group__": f"cell:{pos}"}, f"t{t}_{pos}")
        return h

    def _cell_op(self, kind, x, attrs, tag):
        B, U = self.shape(x)
        if kind == "add":
            y = self.b.tensor(f"{tag}_y", (B, U))
            self.node(f"add#{tag}", [x, self.matrices[0]], [y], "a, b -> c: c[i, j] = a[i, j] + b[i, j]",
                      {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i", "j"]]}, attrs)
        elif kind == "fanout":
            outs = [self.b.tensor(f"{tag}_y{j}", (B, U)) for j in range(2)]
            self.node(f"fan#{tag}", [x], outs, "x -> y0, y1: y0[i, j] = f(x[i, j]); y1[i, j] = g(x[i, j])",
                      {"out": [["i", "j"]] * 2, "red": [], "in": [["i", "j"]]}, attrs)
            y = self.b.tensor(f"{tag}_y", (B, U))
            self.node(f"mul#{tag}", outs, [y], "a, b -> c: c[i, j] = a[i, j] * b[i, j]",
                      {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i", "j"]]}, attrs)
        elif kind == "window":
            y = self.b.tensor(f"{tag}_y", (B, U))
            self.node(f"win#{tag}", [x], [y], "x -> y: y[i, j] = sum(kx) { x[i, j + kx - 1] }",
                      {"out": [["i", "j"]], "red": [], "in": [["i", ("j", -1, 1)]]}, attrs)
        else:
            s = self.b.tensor(f"{tag}_s", (B,))
            self.node(f"sum#{tag}", [x], [s], "x -> s: s[i] = sum(j) { x[i, j] }",
                      {"out": [["i"]], "red": ["j"], "in": [["i", "j"]]}, attrs)
            y = self.b.tensor(f"{tag}_y", (B, U))
            self.node(f"scale#{tag}", [x, s], [y], "x, s -> y: y[i, j] = x[i, j] * s[i]",
                      {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i"]]}, attrs)
        self.matrices.append(y)
        return y
