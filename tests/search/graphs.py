"""Training graphs for search tests, built directly as core graphs.

Every node carries TDL text (for the real analysis) and an access spec for `MockProvider`,
a small independent region analysis: for each split variable, the slab of the output each of
the k workers computes and the input intervals it reads (with halos), or partial outputs
for reduction variables."""
from __future__ import annotations

from autotile import _core


class MockProvider:
    """Strategy provider for plan_graph(strategy_provider=...) from per-node access specs.

    spec: {"out": [[vars] per output], "red": [reduction vars],
           "in": [[dim access] per input] | "unread"} where a dim access is a var name, None
    (whole dim) or (var, lo, hi): index var+lo .. var+hi (a window)."""

    def __init__(self):
        self.specs = {}

    def __call__(self, node, in_shapes, out_shapes, k):
        spec = self.specs[node]
        ranges = {}
        for vars_, shape in zip(spec["out"], out_shapes):
            for v, n in zip(vars_, shape):
                ranges[v] = n
        for acc, shape in zip(spec["in"], in_shapes):
            if acc == "unread":
                continue
            for a, n in zip(acc, shape):
                if isinstance(a, str) and a not in ranges:
                    ranges[a] = n
        strategies = []
        for v in [x for o in spec["out"] for x in o] + list(spec["red"]):
            if v in [s["var"] for s in strategies] or ranges[v] % k:
                continue
            red = v in spec["red"]
            if not red and any(v not in o for o in spec["out"]):
                continue
            R = ranges[v]
            inputs = []
            for acc, shape in zip(spec["in"], in_shapes):
                if acc == "unread":
                    inputs.append("unread")
                    continue
                dims = [d for d, a in enumerate(acc) if a == v or (isinstance(a, tuple) and a[0] == v)]
                if not dims:
                    inputs.append(None)
                    continue
                d = dims[0]
                lo_off, hi_off = (0, 0) if acc[d] == v else acc[d][1:]
                ivs = []
                for j in range(k):
                    lo, hi = j * R // k + lo_off, (j + 1) * R // k - 1 + hi_off + 1
                    ivs.append((max(0, lo), min(shape[d], hi)))
                inputs.append((d, ivs))
            outputs = ["partial" if red else o.index(v) for o in spec["out"]]
            strategies.append({"var": v, "reduction": red, "inputs": inputs, "outputs": outputs})
        ew = (not spec["red"] and len(spec["out"]) == 1 and
              all(acc != "unread" and list(acc) == spec["out"][0][len(spec["out"][0]) - len(acc):] for acc in spec["in"]))
        return strategies, ew


class Builder:
    """Builds a core training graph plus its MockProvider specs."""

    def __init__(self):
        self.g = _core.Graph()
        self.mock = MockProvider()

    def tensor(self, name, shape, is_param=False):
        return self.g.add_tensor(name, shape, "float32", is_param)

    def node(self, name, ins, outs, tdl, spec, role="forward", forward=None):
        nid = self.g.add_node(name, name.split("#")[0], ins, outs, tdl, role)
        if forward is not None:
            self.g.set_backward_of(nid, forward)
        self.mock.specs[nid] = spec
        return nid

    def grad(self, t, dt):
        self.g.set_gradient(t, dt)

    def loss(self, y):
        """A scalar loss sum(f(y)) and its backward dy = g(y); returns dy."""
        shape = self.g.tensor(y)["shape"]
        vs = ["i", "j", "l", "m"][: len(shape)]
        iv = ", ".join(vs)
        loss = self.tensor("loss", ())
        f = self.node("loss#", [y], [loss], f"y -> l: l[] = sum({iv}) {{ f(y[{iv}]) }}",
                      {"out": [[]], "red": vs, "in": [vs]})
        dy = self.tensor("head_grad", shape)
        self.node("lossb#", [y], [dy], f"y -> dy: dy[{iv}] = g(y[{iv}])",
                  {"out": [vs], "red": [], "in": [vs]}, "backward", f)
        self.grad(y, dy)
        return dy

    # -- layers: each returns what the next layer needs -------------------------------------
    def fc(self, name, x, dx_needed, out_units, y_grad_of=None):
        """y = x . W^T; returns (y, fwd node, W). The backward is added by fc_backward."""
        B, I = self.g.tensor(x)["shape"]
        W = self.tensor(f"{name}_w", (out_units, I), is_param=True)
        y = self.tensor(f"{name}_y", (B, out_units))
        f = self.node(f"fc#{name}", [x, W], [y], "data, weight -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] }",
                      {"out": [["n", "o"]], "red": ["k"], "in": [["n", "k"], ["o", "k"]]})
        return y, f, W

    def fc_backward(self, name, f, x, W, dy, dx_needed, sgd=True):
        B, I = self.g.tensor(x)["shape"]
        O = self.g.tensor(W)["shape"][0]
        dx = None
        if dx_needed:
            dx = self.tensor(f"{name}_dx", (B, I))
            self.node(f"fcbd#{name}", [dy, W], [dx], "dy, weight -> dx: dx[n, k] = sum(o) { dy[n, o] * weight[o, k] }",
                      {"out": [["n", "k"]], "red": ["o"], "in": [["n", "o"], ["o", "k"]]}, "backward", f)
            self.grad(x, dx)
        dW = self.tensor(f"{name}_dw", (O, I))
        self.node(f"fcbw#{name}", [dy, x], [dW], "dy, data -> dw: dw[o, k] = sum(n) { dy[n, o] * data[n, k] }",
                  {"out": [["o", "k"]], "red": ["n"], "in": [["n", "o"], ["n", "k"]]}, "backward", f)
        self.grad(W, dW)
        if sgd:
            self.sgd(name, W, dW)
        return dx

    def sgd(self, name, W, dW):
        shape = self.g.tensor(W)["shape"]
        Wn = self.tensor(f"{name}_w_next", shape)
        vs = ["i", "j", "l", "m"][: len(shape)]
        iv = ", ".join(vs)
        self.node(f"sgd#{name}", [W, dW], [Wn], f"w, g -> o: o[{iv}] = f(w[{iv}], g[{iv}])",
                  {"out": [vs], "red": [], "in": [vs, vs]}, "update")
        return Wn

    def relu(self, name, x):
        shape = self.g.tensor(x)["shape"]
        vs = ["i", "j", "l", "m"][: len(shape)]
        iv = ", ".join(vs)
        y = self.tensor(f"{name}_a", shape)
        f = self.node(f"relu#{name}", [x], [y], f"x -> y: y[{iv}] = relu(x[{iv}])", {"out": [vs], "red": [], "in": [vs]})
        return y, f

    def relu_backward(self, name, f, x, dy):
        shape = self.g.tensor(x)["shape"]
        vs = ["i", "j", "l", "m"][: len(shape)]
        iv = ", ".join(vs)
        dx = self.tensor(f"{name}_dx", shape)
        self.node(f"relub#{name}", [dy, x], [dx], f"dy, x -> dx: dx[{iv}] = g(dy[{iv}], x[{iv}])",
                  {"out": [vs], "red": [], "in": [vs, vs]}, "backward", f)
        self.grad(x, dx)
        return dx

    def conv(self, name, x, co):
        """1-D convolution, kernel 3, pad 1 (halo 1 along the length)."""
        B, C, L = self.g.tensor(x)["shape"]
        w = self.tensor(f"{name}_w", (co, C, 3), is_param=True)
        y = self.tensor(f"{name}_y", (B, co, L))
        f = self.node(f"conv#{name}", [x, w], [y],
                      "x, w -> y: y[n, co, l] = sum(ci, kx) { x[n, ci, l + kx - 1] * w[co, ci, kx] }",
                      {"out": [["n", "co", "l"]], "red": ["ci"], "in": [["n", "ci", ("l", -1, 1)], ["co", "ci", None]]})
        return y, f, w

    def conv_backward(self, name, f, x, w, dy, dx_needed):
        B, C, L = self.g.tensor(x)["shape"]
        co = self.g.tensor(w)["shape"][0]
        dx = None
        if dx_needed:
            dx = self.tensor(f"{name}_dx", (B, C, L))
            self.node(f"convbd#{name}", [dy, w], [dx],
                      "dy, w -> dx: dx[n, ci, l] = sum(co, kx) { dy[n, co, l - kx + 1] * w[co, ci, kx] }",
                      {"out": [["n", "ci", "l"]], "red": ["co"], "in": [["n", "co", ("l", -1, 1)], ["co", "ci", None]]},
                      "backward", f)
            self.grad(x, dx)
        dw = self.tensor(f"{name}_dw", (co, C, 3))
        self.node(f"convbw#{name}", [dy, x], [dw],
                  "dy, x -> dw: dw[co, ci, kx] = sum(n, l) { dy[n, co, l] * x[n, ci, l + kx - 1] }",
                  {"out": [["co", "ci", "kx"]], "red": ["n", "l"], "in": [["n", "co", "l"], ["n", "ci", ("l", -1, 1)]]},
                  "backward", f)
        self.grad(w, dw)
        self.sgd(name, w, dw)
        return dx


def mlp(layers, batch, units, in_units=None, data_grad=False, relu=False):
    """FC chain with backward and SGD; the head gradient is a graph input."""
    b = Builder()
    x = b.tensor("data", (batch, in_units or units))
    stack = []
    for l in range(layers):
        y, f, W = b.fc(f"l{l}", x, None, units)
        stack.append(("fc", f"l{l}", f, x, W))
        x = y
        if relu and l < layers - 1:
            a, rf = b.relu(f"r{l}", x)
            stack.append(("relu", f"r{l}", rf, x, None))
            x = a
    dy = b.loss(x)
    for kind, name, f, xin, W in reversed(stack):
        first = xin == 0
        if kind == "fc":
            dy = b.fc_backward(name, f, xin, W, dy, dx_needed=data_grad or not first)
        else:
            dy = b.relu_backward(name, f, xin, dy)
    return b


def conv_net(batch, channels, length, layers=2):
    b = Builder()
    x = b.tensor("data", (batch, channels, length))
    stack = []
    for l in range(layers):
        y, f, w = b.conv(f"c{l}", x, channels)
        stack.append((f"c{l}", f, x, w))
        x = y
    dy = b.loss(x)
    for name, f, xin, w in reversed(stack):
        dy = b.conv_backward(name, f, xin, w, dy, dx_needed=xin != 0)
    return b


def residual(batch, units):
    """z = fc(x) + x with the input x used twice; its gradient is summed by a gradient-sum node."""
    b = Builder()
    x = b.tensor("data", (batch, units))
    y, f1, W1 = b.fc("l1", x, None, units)
    z = b.tensor("z", (batch, units))
    b.node("add#res", [y, x], [z], "a, b -> c: c[i, j] = a[i, j] + b[i, j]",
           {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i", "j"]]})
    dz = b.loss(z)
    b.grad(y, dz)  # the add passes its gradient through to both summands
    dx1 = b.fc_backward("l1", f1, x, W1, dz, dx_needed=True)
    dx = b.tensor("data_grad_sum", (batch, units))
    b.node("sum#x", [dx1, dz], [dx], "a, b -> c: c[i, j] = a[i, j] + b[i, j]",
           {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["i", "j"]]}, "backward")
    b.grad(x, dx)
    return b
