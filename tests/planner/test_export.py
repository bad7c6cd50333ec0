"""Plans exported as DTensor placements, JAX PartitionSpecs and layout rules (planner/export.py).

Oracle: the execution graph autotile builds from the plan holds, on every device, a tile of
each parameter and input (eg.core.tile). The box an exported layout gives that device,
computed here from the placements alone (the device's row-major mesh coordinates, shards
major-first), must equal that tile's box. With JAX installed (CI installs it), the same is
checked on a real 8-device CPU mesh with NamedSharding; with PyTorch (CI installs the CPU
wheel), DTensor's own local shape/offset computation is compared for every tensor of every
plan, and 4 gloo processes distribute_tensor with the exported mesh and placements."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autotile as at

_spec = importlib.util.spec_from_file_location(
    "execgraph_models", os.path.join(os.path.dirname(__file__), "..", "execgraph", "models.py"))
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)


def shard_box(shape, mesh_shape, coords, per_dim_axes):
    """[lo, hi) per dim of the shard at mesh `coords`; per_dim_axes[d] = mesh dims splitting
    dim d, major first."""
    lo, hi = [0] * len(shape), list(shape)
    for d, axes in per_dim_axes.items():
        for m in axes:
            size = (hi[d] - lo[d]) // mesh_shape[m]
            lo[d] += coords[m] * size
            hi[d] = lo[d] + size
    return lo, hi


def plans():
    sym, shapes, _ = models.cnn()
    yield "cnn-free-8", sym, at.plan(sym, devices=8, shapes=shapes)
    sym, shapes, _ = models.mlp()
    yield "mlp-free-4", sym, at.plan(sym, devices=4, shapes=shapes)
    yield "mlp-mesh", sym, at.plan(sym, mesh={"batch": 2, "model": 4}, shapes=shapes,
                                   layout={"fc*_weight": {0: "model"}, "data": {0: "batch"}})
    yield "mlp-mixed", sym, at.plan(sym, mesh={"x": 4}, shapes=shapes,
                                    layout={"fc1_weight": {0: "x"}, "fc2_weight": {1: "x"}})


@pytest.mark.parametrize("label, sym, plan", list(plans()), ids=lambda v: v if isinstance(v, str) else "")
def test_dtensor_and_jax_boxes_equal_the_execution_graph_tiles(label, sym, plan):
    eg = at.transform(sym, plan)
    dt = plan.to_dtensor()
    jx = plan.to_jax()
    mesh_shape = dt["mesh"]["shape"]
    assert int(np.prod(mesh_shape)) == plan.devices
    assert jx["mesh"]["shape"] == mesh_shape and jx["mesh"]["axis_names"] == dt["mesh"]["dim_names"]
    names = dt["mesh"]["dim_names"]
    assert set(dt["placements"]) >= set(plan.param_names)
    for tensor, placements in dt["placements"].items():
        shape = plan.tensor_shapes[tensor]
        per_dim = {}
        for m, p in enumerate(placements):
            assert p in ("Replicate()", "Partial()") or p.startswith("Shard(")
            if p.startswith("Shard("):
                per_dim.setdefault(int(p[6:-1]), []).append(m)
        spec = jx["specs"][tensor]
        assert len(spec) == len(shape)
        for d, entry in enumerate(spec):
            want = [names[m] for m in per_dim.get(d, [])]
            got = [] if entry is None else ([entry] if isinstance(entry, str) else list(entry))
            assert got == want, (tensor, d)
        tid = eg.tensor_id[tensor]
        for dev in range(plan.devices):
            coords = np.unravel_index(dev, mesh_shape)
            lo, hi = shard_box(shape, mesh_shape, coords, per_dim)
            buf = eg.buffers[eg.core.tile(tid, dev)]
            assert (list(buf["lo"]), list(buf["hi"])) == (lo, hi), f"{label}: {tensor} on device {dev}"


def test_cut_granularity_when_an_axis_splits_two_dims():
    sym, shapes, _ = models.mlp()
    plan = at.plan(sym, mesh={"x": 4}, shapes=shapes, layout={"fc1_weight": {0: "x"}})
    plan.tensor_tilings["fc1_weight"] = ["split(0)", "split(1)"]  # not expressible over axis x
    dt = plan.to_dtensor()
    assert dt["mesh"]["dim_names"] == ["x.0", "x.1"] and dt["note"]
    assert dt["placements"]["fc1_weight"] == ["Shard(0)", "Shard(1)"]
    with pytest.raises(at.Error, match="tensor 'fc1_weight' splits different dimensions over one mesh axis"):
        plan.to_jax(granularity="axis")
    rules = plan.to_mesh_tf()
    assert "fc1_weight" in rules["unexpressed"]


@pytest.mark.parametrize("label, sym, plan", list(plans()), ids=lambda v: v if isinstance(v, str) else "")
def test_mesh_tf_rules_reproduce_the_plan(label, sym, plan):
    rules = plan.to_mesh_tf()
    assert rules["mesh"] == plan.mesh
    shapes = plan.input_shapes
    again = at.plan(sym, mesh=rules["mesh"], shapes=shapes, layout=rules["layout"])
    for tensor in rules["layout"]:
        assert again.tensor_tilings[tensor] == plan.tensor_tilings[tensor], tensor
    assert again.comm_bytes == pytest.approx(plan.comm_bytes) or again.comm_bytes >= plan.comm_bytes


def test_export_round_trips_through_json():
    sym, shapes, _ = models.mlp()
    plan = at.plan(sym, mesh={"batch": 2, "model": 2}, shapes=shapes, layout={"data": {0: "batch"}})
    again = at.Plan.from_json(plan.to_json())
    assert again.mesh == {"batch": 2, "model": 2} and again.cut_axes == plan.cut_axes
    assert again.to_dtensor() == plan.to_dtensor() and again.to_jax() == plan.to_jax()


_JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax
    from jax.sharding import Mesh, NamedSharding
    import autotile as at
    sys.path.insert(0, sys.argv[1])
    import models
    sym, shapes, classes = models.cnn()
    plan = at.plan(sym, mesh={"batch": 2, "model": 4}, shapes=shapes,
                   layout={"data": {0: "batch"}, "conv*_weight": {0: "model"}})
    eg = at.transform(sym, plan)
    export = plan.to_jax(objects=True)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(export["mesh"]["shape"]), export["mesh"]["axis_names"])
    checked = 0
    for name, spec in export["specs"].items():
        value = np.zeros(plan.tensor_shapes[name], np.float32)
        arr = jax.device_put(value, NamedSharding(mesh, spec))
        tid = eg.tensor_id[name]
        for shard in arr.addressable_shards:
            dev = list(np.array(jax.devices()[:8])).index(shard.device)
            buf = eg.buffers[eg.core.tile(tid, dev)]
            lo = [s.start or 0 for s in shard.index]
            hi = [s.stop if s.stop is not None else n for s, n in zip(shard.index, value.shape)]
            assert (lo, hi) == (list(buf["lo"]), list(buf["hi"])), (name, dev, lo, hi, buf)
            checked += 1
    print("checked", checked)
""")


def test_jax_named_sharding_places_autotile_tiles():
    pytest.importorskip("jax", reason="jax is not installed (pip install jax; CI installs it)")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "execgraph")
    proc = subprocess.run([sys.executable, "-c", _JAX_SCRIPT, here], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split("checked")[1]) >= 8


def _dtensor_local_and_offset():
    """DTensor's own shard arithmetic, in its plain-data form (no process group needed)."""
    pytest.importorskip("torch", reason="torch is not installed (optional: DTensor export objects; CI installs it)")
    try:
        from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset
    except ImportError:
        pytest.skip("this torch has no torch.distributed.tensor._utils._compute_local_shape_and_global_offset")
    return _compute_local_shape_and_global_offset


def uneven_plans():
    """Free searches where a split need not divide evenly (batch 6, widths 10 and 6)."""
    x = at.sym.Variable("data")
    h = at.sym.FullyConnected(x, num_hidden=10, name="fc1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.FullyConnected(h, num_hidden=6, name="fc2")
    sym = at.sym.SoftmaxOutput(h, name="softmax")
    for devices in (3, 4, 8):
        yield f"mlp-uneven-{devices}", sym, at.plan(sym, devices=devices, shapes={"data": (6, 12), "softmax_label": (6,)})


@pytest.mark.parametrize("label, sym, plan", list(plans()) + list(uneven_plans()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_dtensor_local_shapes_match_autotile_tiles(label, sym, plan):
    """Every tensor of the plan (tensors="all", partial sums included), on every device."""
    import torch
    local_and_offset = _dtensor_local_and_offset()
    eg = at.transform(sym, plan)
    dt = plan.to_dtensor(objects=True, tensors="all")
    mesh_shape = dt["mesh"]["shape"]
    checked = 0
    for name, placements in dt["placements"].items():
        tid = eg.tensor_id[name]
        for dev in range(plan.devices):
            coords = [int(c) for c in np.unravel_index(dev, mesh_shape)]
            local, offset = local_and_offset(torch.Size(plan.tensor_shapes[name]), mesh_shape, coords, placements)
            buf = eg.buffers[eg.core.tile(tid, dev)]
            assert list(offset) == list(buf["lo"]), (label, name, dev)
            assert [o + s for o, s in zip(offset, local)] == list(buf["hi"]), (label, name, dev)
            checked += 1
    assert checked >= plan.devices * len(plan.param_names)


def test_dtensor_distribute_tensor_over_gloo_holds_autotile_tiles():
    """The export used for real: 4 gloo processes build the exported DeviceMesh, distribute_tensor
    each parameter and input with the exported placements, and each process's local shard must
    be the tile autotile's execution graph gives that device (values, not only boxes)."""
    pytest.importorskip("torch", reason="torch is not installed (optional: DTensor export objects; CI installs it)")
    sym, shapes, _ = models.cnn()
    plan = at.plan(sym, mesh={"batch": 2, "model": 2}, shapes=shapes,
                   layout={"data": {0: "batch"}, "conv*_weight": {0: "model"}, "fc_weight": {1: "model"}})
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor

    import autotile.torch as att

    eg = at.transform(sym, plan)
    dt = plan.to_dtensor(objects=True)

    def check(rank):
        mesh = init_device_mesh("cpu", tuple(dt["mesh"]["shape"]), mesh_dim_names=tuple(dt["mesh"]["dim_names"]))
        for name, placements in dt["placements"].items():
            whole = torch.arange(int(np.prod(plan.tensor_shapes[name])), dtype=torch.float64)
            whole = whole.reshape(plan.tensor_shapes[name])
            local = distribute_tensor(whole, mesh, placements).to_local()
            buf = eg.buffers[eg.core.tile(eg.tensor_id[name], rank)]
            box = tuple(slice(lo, hi) for lo, hi in zip(buf["lo"], buf["hi"]))
            assert torch.equal(local, whole[box]), (name, rank, placements, buf["lo"], buf["hi"], tuple(local.shape))
        return len(dt["placements"])

    checked = att.run_local(check, 4, timeout=300)  # a failing rank is named, the others stopped
    assert checked == [len(plan.to_dtensor()["placements"])] * 4 and checked[0] >= len(plan.param_names)
