"""Statically empty tensors (issue 31): TorchScript exports of Phi-3 slice ``q[..., rotary_dim:]``,
empty when the rotary factor is 1, and concatenate it back. The importer carries such an empty
Slice (or Split part) as an empty constant that Concat drops; any other reader would compute on
an empty tensor, which is an Error naming the node, the tensor and the reader. Oracles:
onnxruntime, and the same training step on 1 device (float64)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("autotile._core")

from onnx import helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402
from k_device_arbiter import assert_same_float64_step  # noqa: E402
from onnx_models import assert_matches_ort, make_model  # noqa: E402

RNG = np.random.default_rng(31)
INT64_MAX = np.iinfo(np.int64).max
HEAD = 8  # head_dim; rotary_dim = HEAD (partial_rotary_factor 1.0)
mk = helper.make_node


def _i(*v):
    return np.array(v, np.int64)


def _phi3_rotary(batch=2, reader="Concat"):
    """q = x . Wq; q_rot = q[..., :rotary_dim]; q_pass = q[..., rotary_dim:] (empty);
    q_embed = cat(q_rot * cos + rotate_half(q_rot) * sin, q_pass); y = q_embed . Wo.
    `reader` other than Concat puts that op on q_pass instead (which must be refused)."""
    half = HEAD // 2
    inits = {"Wq": RNG.standard_normal((HEAD, HEAD)).astype(np.float32) * 0.5,
             "Wo": RNG.standard_normal((HEAD, 3)).astype(np.float32) * 0.5,
             "cos": RNG.uniform(-1, 1, (1, HEAD)).astype(np.float32),
             "sin": RNG.uniform(-1, 1, (1, HEAD)).astype(np.float32),
             "zero": _i(0), "rot": _i(HEAD), "half": _i(half), "end": _i(INT64_MAX), "last": _i(-1)}
    nodes = [mk("MatMul", ["x", "Wq"], ["q"]),
             mk("Slice", ["q", "zero", "rot", "last"], ["q_rot"], name="slice_rot"),
             mk("Slice", ["q", "rot", "end", "last"], ["q_pass"], name="slice_pass"),
             mk("Slice", ["q_rot", "zero", "half", "last"], ["x1"]),
             mk("Slice", ["q_rot", "half", "end", "last"], ["x2"]),
             mk("Neg", ["x2"], ["nx2"]), mk("Concat", ["nx2", "x1"], ["rh"], axis=-1),
             mk("Mul", ["q_rot", "cos"], ["a"]), mk("Mul", ["rh", "sin"], ["b"]), mk("Add", ["a", "b"], ["emb"])]
    if reader == "Concat":
        nodes.append(mk("Concat", ["emb", "q_pass"], ["q_embed"], axis=-1, name="cat_back"))
    else:
        nodes += [mk(reader, ["q_pass"], ["p2"], name="reads_empty"),
                  mk("Concat", ["emb", "p2"], ["q_embed"], axis=-1, name="cat_back")]
    nodes.append(mk("MatMul", ["q_embed", "Wo"], ["y"]))
    return make_model(nodes, {"x": (batch, 5, HEAD)}, ["y"], inits)


def test_empty_rotary_tail_equals_onnxruntime():
    assert_matches_ort(_phi3_rotary(), {"x": RNG.standard_normal((2, 5, HEAD)).astype(np.float32)})


def test_empty_rotary_tail_with_symbolic_batch_equals_onnxruntime():
    assert_matches_ort(_phi3_rotary(batch="batch"), {"x": RNG.standard_normal((3, 5, HEAD)).astype(np.float32)})


def test_empty_rotary_tail_trains_on_2_devices_as_on_1():
    sym = at.onnx.load(_phi3_rotary())
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {sym.onnx_names["x"]: RNG.standard_normal((2, 5, HEAD))}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    assert ref.grads
    assert_same_float64_step(ref, res)


@pytest.mark.parametrize("op", ["Neg", "Relu"])
def test_an_op_computing_on_the_empty_tail_is_refused_naming_it(op):
    with pytest.raises(Error) as e:
        at.onnx.load(_phi3_rotary(reader=op))
    msg = str(e.value)
    for word in ("slice_pass", "q_pass", "reads_empty", op, "empty"):
        assert word in msg, msg


def test_an_empty_split_part_read_by_concat_equals_onnxruntime():
    nodes = [mk("Split", ["x", "s"], ["a", "b"], axis=1), mk("Relu", ["b"], ["rb"]),
             mk("Concat", ["rb", "a"], ["y"], axis=1)]
    model = make_model(nodes, {"x": (2, 5)}, ["y"], {"s": _i(0, 5)})
    assert_matches_ort(model, {"x": RNG.standard_normal((2, 5)).astype(np.float32)})


def test_an_empty_split_part_read_by_another_op_is_refused():
    nodes = [mk("Split", ["x", "s"], ["a", "b"], axis=1, name="sp"), mk("Relu", ["a"], ["ra"], name="act"),
             mk("Concat", ["ra", "b"], ["y"], axis=1)]
    model = make_model(nodes, {"x": (2, 5)}, ["y"], {"s": _i(0, 5)})
    with pytest.raises(Error, match=r"sp.*'a'.*act.*Relu"):
        at.onnx.load(model)


def test_torchscript_export_of_phi3_style_attention_at_rotary_factor_1():
    """PyTorch's TorchScript exporter on Phi-3's attention (rotary on q[..., :rotary_dim], the
    empty q[..., rotary_dim:] concatenated back): equals PyTorch and trains on 2 devices as on 1."""
    torch = pytest.importorskip("torch")
    import io

    import onnx

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)

    class Attention(torch.nn.Module):
        def __init__(self, d=16, heads=2):
            super().__init__()
            self.h, self.hd = heads, d // heads
            self.rd = self.hd  # partial_rotary_factor 1.0
            self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            f = torch.outer(torch.arange(6).float(), 1.0 / 10000 ** (torch.arange(0, self.rd, 2).float() / self.rd))
            self.register_buffer("cos", torch.cat((f, f), -1).cos())
            self.register_buffer("sin", torch.cat((f, f), -1).sin())

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.h, self.hd).transpose(1, 2) for z in self.qkv(x).split(d, dim=-1))
            q = torch.cat((q[..., :self.rd] * self.cos + rotate_half(q[..., :self.rd]) * self.sin,
                           q[..., self.rd:]), dim=-1)
            k = torch.cat((k[..., :self.rd] * self.cos + rotate_half(k[..., :self.rd]) * self.sin,
                           k[..., self.rd:]), dim=-1)
            a = torch.softmax(q @ k.transpose(-1, -2) / self.hd ** 0.5, -1) @ v
            return self.o(a.transpose(1, 2).reshape(b, t, d))

    torch.manual_seed(0)
    module, x = Attention().eval(), torch.randn(2, 6, 16)
    buf = io.BytesIO()
    torch.onnx.export(module, (x,), buf, input_names=["x"], output_names=["y"], dynamo=False, opset_version=17)
    model = onnx.load_from_string(buf.getvalue())
    assert any(n.op_type == "Slice" for n in model.graph.node)
    sym = at.onnx.load(model)
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {sym.onnx_names["x"]: x.numpy().astype(np.float64)}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    np.testing.assert_allclose(ref.outputs[0], module(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    assert ref.grads
    assert_same_float64_step(ref, res)


def test_an_empty_initializer_concatenated_equals_onnxruntime():
    """An exporter's empty constant (shape (2, 0)) joined to data: Concat drops it."""
    nodes = [mk("Concat", ["nothing", "x", "nothing"], ["c"], axis=1), mk("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": (2, 5)}, ["y"], {"nothing": np.zeros((2, 0), np.float32)})
    assert_matches_ort(model, {"x": RNG.standard_normal((2, 5)).astype(np.float32)})


def test_the_shape_of_an_empty_tail_folds():
    """Shape(q_pass) is (2, 5, 0): its last dim, cast and added, adds 0 (as in onnxruntime)."""
    model = _phi3_rotary()
    g = model.graph
    g.node.extend([mk("Shape", ["q_pass"], ["pass_shape"]), mk("Gather", ["pass_shape", "last"], ["pass_len"]),
                   mk("Cast", ["pass_len"], ["pass_len_f"], to=1), mk("Add", ["y", "pass_len_f"], ["y2"])])
    g.output[0].name = "y2"
    assert_matches_ort(model, {"x": RNG.standard_normal((2, 5, HEAD)).astype(np.float32)})


@pytest.mark.parametrize("steps", [None, (1, 1), (1, 2)])
def test_the_shape_of_an_empty_slice_of_several_axes_counts_every_slice(steps):
    """x[0:2, 6:] of a (4, 6) x has shape (2, 0): the empty constant was made of the input's
    dims but the empty one, so Shape read (4, 0) where onnxruntime gives (2, 0)."""
    names, inits = ["x", "s", "e", "a"], {"s": _i(0, 6), "e": _i(2, 6), "a": _i(0, 1)}
    if steps is not None:
        names, inits["st"] = names + ["st"], _i(*steps)
    nodes = [mk("Slice", names, ["y"]), mk("Shape", ["y"], ["z"]), mk("Cast", ["z"], ["zf"], to=1),
             mk("Add", ["zf", "v"], ["out"])]
    model = make_model(nodes, {"x": (4, 6), "v": (2,)}, ["out"], inits)
    assert_matches_ort(model, {"x": RNG.standard_normal((4, 6)).astype(np.float32), "v": np.zeros(2, np.float32)})
