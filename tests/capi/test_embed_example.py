"""examples/embed built against the INSTALLED package (autotile.get_cmake_dir()) as an outside
CMake project: its C++ program describes an MLP and a CNN training graph through the C API,
plans them for 8 devices and dumps graphs + plans as JSON. Oracles: the same graphs replanned
through the Python bindings (_core), and at.plan on the same models built by the Python front
end (the example must mirror what the Python lowering generates).

Skips when cmake or a C++ compiler is missing, or when autotile is an in-tree development build
(no CMake package: that comes with the wheel)."""
import json
import os
import subprocess

import pytest

import autotile as at
from autotile import _core

from capi_build import cmake_build, cmake_dir_or_skip, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "embed")
DEVICES = 8


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    cmake_dir = cmake_dir_or_skip()
    if not os.path.isdir(EXAMPLE):
        pytest.skip("examples/embed is not in this checkout")
    build = str(tmp_path_factory.mktemp("embed-build"))
    cmake_build(EXAMPLE, build, cmake_dir)
    exe = os.path.join(build, "embed")
    out_json = os.path.join(build, "graphs.json")
    stdout = run(exe, "--devices", DEVICES, "--json", out_json)
    with open(out_json) as f:
        doc = json.load(f)
    return {"stdout": stdout, "graphs": {g["name"]: g for g in doc["graphs"]}, "exe": exe}


def _core_graph(spec):
    """The example's graph rebuilt through the Python bindings, call for call."""
    g = _core.Graph()
    for t in spec["tensors"]:
        g.add_tensor(t["name"], t["shape"], "float32", t["is_param"])
    for op in spec["ops"]:
        nid = g.add_node(op["name"], op["op"], op["inputs"], op["outputs"], op["tdl"], op["role"])
        for k, v in op["attrs"].items():
            g.set_attr(nid, k, v)
        if op["backward_of"] >= 0:
            g.set_backward_of(nid, op["backward_of"])
    for tensor, grad in spec["gradients"]:
        g.set_gradient(tensor, grad)
    for t in spec["outputs"]:
        g.mark_output(t)
    return g


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_plan_and_exec_graph_equal_a_python_replan(example, name):
    spec = example["graphs"][name]
    g = _core_graph(spec)
    want = _core.plan_graph(g, DEVICES, "tofu")
    got = spec["plan"]
    assert got["factors"] == want["factors"] == [2, 2, 2]
    assert got["tensor_tilings"] == want["tensor_tilings"]
    assert got["node_strategies"] == want["node_strategies"]
    assert got["cut_costs"] == pytest.approx(want["cut_costs"], rel=1e-12)
    assert got["total_bytes"][0] == pytest.approx(want["total_bytes"], rel=1e-12)
    eg = _core.build_exec_graph(g, want["factors"], want["tensor_tilings"], want["node_strategies"])
    ex = spec["exec"]
    assert ex["num_ops"] == eg.num_ops and ex["num_buffers"] == eg.num_buffers
    assert ex["bytes_moved"] == eg.bytes_moved
    assert ex["arena_bytes"] == eg.arena_bytes
    kinds = [[eg.op(i)["kind"] for i in eg.schedule(d)] for d in range(DEVICES)]
    assert ex["compute_ops"] == [k.count("compute") for k in kinds]
    assert ex["fetch_ops"] == [k.count("fetch") for k in kinds]
    # Every device runs every training-graph op once (partition-n-reduce).
    assert ex["compute_ops"] == [len(spec["ops"])] * DEVICES


def _cnn_symbol(batch=32, classes=64):
    """The example's CNN, built with the Python front end."""
    from autotile.models._layers import conv, data_input, op, softmax_head

    x = data_input((batch, 3, 32, 32))
    x = conv(x, "conv1", 16, (3, 3), pad=(1, 1))
    x = op("Activation", x, act_type="relu", name="relu1")
    x = op("Pooling", x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = conv(x, "conv2", 32, (3, 3), pad=(1, 1))
    x = op("Activation", x, act_type="relu", name="relu2")
    x = op("Pooling", x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool2")
    x = op("Flatten", x, name="flat")
    x = op("FullyConnected", x, num_hidden=classes, name="fc")
    return softmax_head(x, (batch,))


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_plan_equals_the_python_front_end_plan(example, name):
    spec = example["graphs"][name]
    model = at.models.get("mlp", batch=64) if name == "mlp" else _cnn_symbol()
    plan = at.plan(model, devices=DEVICES, algorithm="tofu")
    names = [t["name"] for t in spec["tensors"]]
    got = dict(zip(names, spec["plan"]["tensor_tilings"]))
    params = [t["name"] for t in spec["tensors"] if t["is_param"]]
    assert sorted(params) == sorted(plan.param_names)
    for p in params:
        assert got[p] == plan.tensor_tilings[p], p
    assert spec["plan"]["total_bytes"][0] == pytest.approx(plan.comm_bytes, rel=1e-12)
    assert spec["plan"]["cut_costs"] == pytest.approx(plan.cut_costs, rel=1e-12)
    # Same graph, op for op: the Python lowering has exactly the example's tensors and ops.
    assert sorted(got) == sorted(plan.tensor_tilings)
    ops = {o["name"]: s for o, s in zip(spec["ops"], spec["plan"]["node_strategies"])}
    assert ops == plan.node_strategies


def test_example_prints_the_plan(example):
    out = example["stdout"]
    assert "== mlp:" in out and "== cnn:" in out
    for weight in ("fc1_weight", "fc4_bias", "conv1_weight", "fc_weight"):
        assert weight in out
    assert f"device {DEVICES - 1}:" in out


def test_example_reports_library_errors(example):
    res = subprocess.run([example["exe"], "--devices", "0"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "devices must be in 1.." in res.stderr and "AT_ERR_INVALID_ARGUMENT" in res.stderr


def test_installed_layout(example):
    inc = at.get_include()
    assert os.path.isfile(os.path.join(inc, "autotile", "c_api.h"))
    assert os.path.isfile(os.path.join(inc, "autotile", "autotile.hpp"))
    cmake_dir = at.get_cmake_dir()
    for f in ("autotileConfig.cmake", "autotileConfigVersion.cmake", "autotileTargets.cmake"):
        assert os.path.isfile(os.path.join(cmake_dir, f)), f
    lib = os.path.join(os.path.dirname(cmake_dir), "lib")
    assert any(n.startswith("libautotile_core") for n in os.listdir(lib))
