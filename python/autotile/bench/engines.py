"""Plans taken to JAX: the bytes the plan says a training step moves (``plan.comm_bytes``)
against the collectives of the step XLA compiles from it (``autotile.jax.training_step``,
jitted on a Mesh from the plan), on 8 host devices, in the same accounting (ring
collectives, bytes received summed over devices), and the compiled step's largest
difference from autotile's 1-device step. "compiled" is the default lowering (each node a
shard_map of its kernel, the plan's collectives written out: jax/node_map.py); "global
view" the same step traced on whole arrays with every tensor constrained to the plan's
layout, re-layouts left to XLA's partitioner. "differences" names, per row, the tensors
whose compiled bytes differ most from the plan's, with the cause (``--detail``: every
tensor that differs).

    autotile bench engines [--quick] [--detail]
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from . import common

DEVICES = 8
#: collective kinds as the table abbreviates them
SHORT = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS", "all-to-all": "A2A",
         "collective-permute": "CP"}


def host_devices() -> None:
    """8 host devices: XLA reads the flag when jax is first imported (the benchmark runs as
    its own process; importing this module changes nothing)."""
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={DEVICES}").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def readme_mlp():
    import autotile as at

    data = at.sym.Variable("data")
    fc1 = at.sym.FullyConnected(data, num_hidden=512, name="fc1")
    act = at.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = at.sym.FullyConnected(act, num_hidden=10, name="fc2")
    return at.sym.SoftmaxOutput(fc2, name="softmax"), {"data": (256, 784), "softmax_label": (256,)}


def gpt2_fixture():
    """The ONNX GPT-2 fixture of a source checkout (tests/fixtures/onnx_torch/gpt2_ts17):
    (Symbol, input shapes, inputs), or None (installed package, or no onnx)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.normpath(os.path.join(here, "..", "..", "..", "tests", "fixtures", "onnx_torch", "gpt2_ts17.onnx"))
    if not os.path.isfile(path) or importlib.util.find_spec("onnx") is None:
        return None
    return load_fixture(path)


def load_fixture(path: str):
    """An ONNX fixture (`path`, with its .npz of inputs beside it) at its inputs' shapes:
    (Symbol, input shapes, inputs), keyed by autotile's names."""
    import autotile as at

    npz = np.load(path[:-5] + ".npz")
    inputs = {k[3:]: npz[k] for k in npz.files if k.startswith("in.")}
    shapes = {k: tuple(v.shape) for k, v in inputs.items()}
    sym = at.onnx.load(path, batch_size=shapes["input_ids"][0], shapes=shapes)
    feeds = {sym.onnx_names[k]: v for k, v in inputs.items()}
    return sym, {k: tuple(v.shape) for k, v in feeds.items()}, feeds


def models(quick: bool):
    """(name, Symbol, input shapes, layout rules of the mesh plan or None, inputs or None)."""
    import autotile as at

    net, shapes = readme_mlp()
    yield "mlp (README)", net, shapes, {"fc1_weight": {0: "model"}, "data": {0: "batch"}}, None
    if quick:
        return
    cnn = at.models.get("cnn-digits", batch=64)
    yield "cnn-digits", cnn, {"data": (64, 1, 8, 8), "softmax_label": (64,)}, \
        {"fc1_weight": {0: "model"}, "data": {0: "batch"}}, None
    tr = at.models.get("transformer", batch=8, layers=1, d_model=32, heads=4, d_ff=64, seq=16, vocab=64)
    rng = np.random.default_rng(0)
    yield "transformer 1x32", tr, {"data": (8, 16), "softmax_label": (8, 16)}, \
        {"layer0_ffn_fc1_weight": {0: "model"}, "data": {0: "batch"}}, \
        {"data": rng.integers(0, 64, (8, 16)).astype(np.float32),
         "softmax_label": rng.integers(0, 64, (8, 16)).astype(np.float32)}
    gpt2 = gpt2_fixture()
    if gpt2 is not None:
        yield "gpt2 (ONNX fixture)", gpt2[0], gpt2[1], None, gpt2[2]


def plans(sym, shapes, rules):
    import autotile as at

    yield "tofu", lambda: at.plan(sym, devices=DEVICES, shapes=shapes)
    yield "data", lambda: at.plan(sym, devices=DEVICES, shapes=shapes, algorithm="data")
    if rules is not None:
        yield "rules 2x4", lambda: at.plan(sym, mesh={"batch": 2, "model": DEVICES // 2}, shapes=shapes,
                                           layout=rules)


def values(sym, shapes, rng):
    """Inputs and parameters of the step: class labels in range, the rest small normals (the
    model's own weights where it has them)."""
    from autotile.symbol.infer import infer_entry_shapes

    entry = infer_entry_shapes(sym, shapes)
    out = {}
    for node in sym.topo_nodes():
        if not node.is_variable:
            continue
        shape = entry[(id(node), 0)]
        if node.name == "softmax_label":
            out[node.name] = rng.integers(0, 10, shape).astype(np.float32)
        else:
            out[node.name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if node.name in (getattr(sym, "params", None) or {}):
            out[node.name] = np.asarray(sym.params[node.name])
    return out


def measure(sym, shapes, make_plan, given) -> dict:
    import autotile as at
    import autotile.jax as atj
    from autotile.jax.attribution import compiled_bytes_by_tensor, differences, plan_bytes_by_tensor

    plan = make_plan()
    step = atj.training_step(sym, plan)
    vals = {**values(sym, shapes, np.random.default_rng(0)), **(given or {})}
    params = {n: vals[n] for n in step.param_names + step.aux_names}
    inputs = {n: vals[n] for n in step.data_names}
    ref = at.backend.run(sym, devices=1, inputs=inputs, params=params, train=True)
    _, new_params = step(params, inputs)
    err = max(float(np.abs(np.asarray(new_params[k]) - ref.params[k]).max()) for k in step.param_names)
    found = atj.collectives(step.lower(params, inputs).compile().as_text(), DEVICES)
    by_kind = {}
    for c in found:
        by_kind[c["kind"]] = by_kind.get(c["kind"], 0) + c["bytes"]
    compiled = sum(by_kind.values())
    diffs = differences(plan_bytes_by_tensor(step.exec_graph), compiled_bytes_by_tensor(found, step.scope_names),
                        step)
    glob = atj.training_step(sym, plan, lowering="global")
    global_bytes = atj.collective_bytes(glob.lower(params, inputs).compile().as_text(), DEVICES)
    return {"ok": True, "plan_bytes": plan.comm_bytes, "compiled_bytes": compiled, "max_param_diff": err,
            "by_kind": by_kind, "global_view_bytes": global_bytes, "differences": diffs,
            "global_nodes": step.global_nodes}


def _diff_line(d) -> str:
    return f"{d['tensor']} {d['plan']}->{d['compiled']}: {d['short']}"


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="autotile bench engines", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="the README MLP only")
    p.add_argument("--detail", action="store_true", help="every tensor whose compiled bytes differ from the plan's")
    args = p.parse_args(argv)
    host_devices()
    try:
        import jax
    except ImportError as e:
        print(f"autotile bench engines needs jax (pip install 'autotile[jax]'): {e}")
        return 1
    if jax.device_count() < DEVICES:
        print(f"JAX sees {jax.device_count()} devices; this benchmark needs {DEVICES} (XLA_FLAGS was set "
              "after jax was imported?)")
        return 1
    t0 = time.perf_counter()
    raw, rows, detail = [], [], []
    for model, sym, shapes, rules, given in models(args.quick):
        for name, make in plans(sym, shapes, rules):
            try:
                r = measure(sym, shapes, make, given)
            except Exception as e:  # a row that cannot be built says why; the others still run
                r = {"ok": False, "error": common.error_text(e, 90)}
            raw.append({"model": model, "plan": name, **r})
            if r["ok"]:
                kinds = " ".join(f"{SHORT[k]} {v / 1e3:.0f}K" for k, v in sorted(r["by_kind"].items()))
                plan_bytes = max(r["plan_bytes"], 1)
                big = r["differences"]  # largest first
                rows.append((model, name, int(r["plan_bytes"]), r["compiled_bytes"],
                             f"{r['compiled_bytes'] / plan_bytes:.2f}x", r["global_view_bytes"],
                             f"{r['global_view_bytes'] / plan_bytes:.2f}x", f"{r['max_param_diff']:.1e}", kinds,
                             "; ".join(_diff_line(d) for d in big[:3]) + (f"; +{len(big) - 3} more" if len(big) > 3
                                                                          else "") or "-"))
                for d in r["differences"] if args.detail else ():
                    detail.append((model, name, d["tensor"], d["plan"], d["compiled"],
                                   " ".join(f"{SHORT[k]} {v}" for k, v in sorted(d["kinds"].items())) or "-",
                                   d["cause"]))
            else:
                rows.append((model, name, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", r["error"]))
            print(f"  {model} {name}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    text = (f"plan bytes against XLA's compiled collectives, {DEVICES} host devices (jax {jax.__version__}); "
            "ring accounting, bytes received summed over devices\n"
            + common.table(("model", "plan", "plan bytes", "compiled bytes", "ratio", "global view", "ratio",
                            "max |dparam|", "compiled by kind (K = 1000 B)", "largest differences (tensor plan->compiled B: cause)"),
                           rows))
    if detail:
        text += ("\n\nper tensor, where the compiled step moves other bytes than the plan's execution graph\n"
                 + common.table(("model", "plan", "tensor", "plan B", "compiled B", "compiled by kind", "cause"), detail))
    print(text)
    path = common.write_json("engines.json", {"devices": DEVICES, "jax": jax.__version__, "results": raw,
                                              "table": text})
    print(f"{time.perf_counter() - t0:.0f}s; raw numbers in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run_main(main))
