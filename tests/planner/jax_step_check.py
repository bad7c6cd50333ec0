"""Run by tests/planner/test_jax_step.py in a subprocess with 8 host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=8 must be set before jax is imported):
the README MLP's JAX step under several plans against autotile's 1-device step, the
compiled program's collective bytes, and the byte accounting on programs whose
collectives are known. Prints one JSON object."""
import json
import sys

import numpy as np

import autotile as at
import autotile.jax as atj


def readme_mlp():
    from autotile.bench.engines import readme_mlp as net_and_shapes

    net = net_and_shapes()[0]
    rng = np.random.default_rng(0)
    inputs = {"data": rng.standard_normal((256, 784), dtype=np.float32),
              "softmax_label": rng.integers(0, 10, 256).astype(np.float32)}
    params = {"fc1_weight": rng.standard_normal((512, 784), dtype=np.float32) * 0.01,
              "fc1_bias": rng.standard_normal(512, dtype=np.float32) * 0.01,
              "fc2_weight": rng.standard_normal((10, 512), dtype=np.float32) * 0.01,
              "fc2_bias": rng.standard_normal(10, dtype=np.float32) * 0.01}
    return net, inputs, params


def plans(net):
    shapes = {"data": (256, 784), "softmax_label": (256,)}
    yield "tofu", at.plan(net, devices=8, shapes=shapes)
    yield "data", at.plan(net, devices=8, shapes=shapes, algorithm="data")
    yield "rules", at.plan(net, mesh={"batch": 2, "model": 4}, shapes=shapes,
                           layout={"fc1_weight": {0: "model"}, "data": {0: "batch"}})


def zoo_models():
    """(name, Symbol, inputs, params) of a CNN and a Transformer (token ids as float inputs)."""
    from autotile.symbol.infer import infer_entry_shapes

    rng = np.random.default_rng(1)
    cnn = at.models.get("cnn-digits", batch=16)
    tr = at.models.get("transformer", batch=8, layers=1, d_model=32, heads=4, d_ff=64, seq=16, vocab=64)
    for name, sym, shapes in (("cnn", cnn, {"data": (16, 1, 8, 8), "softmax_label": (16,)}),
                              ("transformer", tr, {"data": (8, 16), "softmax_label": (8, 16)})):
        entry = infer_entry_shapes(sym, shapes)
        values = {n.name: (rng.standard_normal(entry[(id(n), 0)]) * 0.1).astype(np.float32)
                  for n in sym.topo_nodes() if n.is_variable}
        values["softmax_label"] = rng.integers(0, 10, shapes["softmax_label"]).astype(np.float32)
        if name == "transformer":
            values["data"] = rng.integers(0, 64, shapes["data"]).astype(np.float32)
        inputs = {k: values.pop(k) for k in shapes}
        yield name, sym, shapes, inputs, values


def onnx_gpt2(fixtures: str):
    """The ONNX GPT-2 fixture (TorchScript exporter): Symbol, shapes and inputs by its names."""
    import os

    from autotile.bench.engines import load_fixture

    return load_fixture(os.path.join(fixtures, "gpt2_ts17.onnx"))


def known_programs():
    """(name, autotile-accounting bytes computed by hand, bytes parsed from the compiled HLO)."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("a", "b"))
    x = np.ones((64, 1000), np.float32)
    out = []
    # sum over a dim split 8 ways, result replicated: one all-reduce of 1000 floats over 8
    f = jax.jit(lambda v: v.sum(axis=0), in_shardings=NamedSharding(mesh, P(("a", "b"), None)),
                out_shardings=NamedSharding(mesh, P(None)))
    out.append(("all-reduce 8", 2 * 7 * 4000, atj.collective_bytes(f.lower(x).compile().as_text(), 8)))
    # the same over mesh axis b only (2 groups of 4)
    f = jax.jit(lambda v: v.sum(axis=0), in_shardings=NamedSharding(mesh, P("b", None)),
                out_shardings=NamedSharding(mesh, P(None)))
    out.append(("all-reduce 2x4", 2 * 2 * 3 * 4000, atj.collective_bytes(f.lower(x).compile().as_text(), 8)))
    # split rows gathered to every device: each of 8 receives 7/8 of 256,000 bytes
    f = jax.jit(lambda v: v * 2, in_shardings=NamedSharding(mesh, P(("a", "b"), None)),
                out_shardings=NamedSharding(mesh, P(None, None)))
    out.append(("all-gather 8", 7 * 256000, atj.collective_bytes(f.lower(x).compile().as_text(), 8)))
    return out


def step_report(step, plan, params, feeds, ref) -> dict:
    """One jitted step of `step` against the 1-device Result `ref`: the largest parameter
    difference and magnitude, the plan's, its execution graph's and the compiled program's
    bytes, the per-tensor differences with their causes, and the nodes left to the global view."""
    _, new_params = step(params, feeds)
    text = step.lower(params, feeds).compile().as_text()
    by_plan = atj.plan_bytes_by_tensor(step.exec_graph)
    by_compiled = atj.compiled_bytes_by_tensor(atj.collectives(text, 8), step.scope_names)
    return {"param_err": max(float(np.abs(np.asarray(new_params[k]) - ref.params[k]).max()) for k in step.param_names),
            "scale": max(float(np.abs(ref.params[k]).max()) for k in step.param_names),
            "plan_bytes": plan.comm_bytes, "graph_bytes": sum(by_plan.values()),
            "compiled_bytes": atj.collective_bytes(text, 8),
            "differences": [(d["tensor"], d["plan"], d["compiled"], d["short"])
                            for d in atj.differences(by_plan, by_compiled, step)],
            "global_nodes": step.global_nodes, "mapped": len(step.mapped), "nodes": len(plan.node_strategies)}


def onnx_fixture_steps(fixtures: str, tags):
    """The JAX step of ONNX fixtures under tofu's 8-device plan against autotile's 1-device
    step: {tag: {param_err, scale, global}} (global: the nodes the step leaves to XLA's view)."""
    import os

    out = {}
    for tag in tags:
        path = os.path.join(fixtures, tag + ".onnx")
        npz = np.load(path[:-5] + ".npz")
        sym = at.onnx.load(path)
        feeds = {sym.onnx_names[k[3:]]: npz[k] for k in npz.files if k.startswith("in.")}
        shapes = {k: v.shape for k, v in feeds.items()}
        ref = at.backend.run(sym, devices=1, inputs=feeds, train=True)
        plan = at.plan(sym, devices=8, shapes=shapes)
        step = atj.training_step(sym, plan)
        params = {n: sym.params[n] for n in step.param_names + step.aux_names}
        out[tag] = {**step_report(step, plan, params, feeds, ref), "global": len(step.global_nodes),
                    "global_ops": sorted(n.op for n in step.tg.symbol.topo_nodes() if n.name in step.global_nodes)}
    return out


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--onnx":  # --onnx <fixtures dir> <tag>...
        json.dump(onnx_fixture_steps(sys.argv[2], sys.argv[3:]), sys.stdout)
        return
    net, inputs, params = readme_mlp()
    ref = at.backend.run(net, devices=1, inputs=inputs, params=params, train=True)
    report = {"plans": {}, "known": known_programs()}
    for name, plan in plans(net):
        step = atj.training_step(net, plan)
        outputs, new_params = step(params, inputs)
        text = step.lower(params, inputs).compile().as_text()
        report["plans"][name] = {
            "outputs": list(outputs),
            "output_err": float(np.abs(np.asarray(outputs["softmax_output"]) - ref.outputs[0]).max()),
            "param_err": max(float(np.abs(np.asarray(new_params[k]) - ref.params[k]).max()) for k in params),
            "constrained": len(step.constrained), "tensors": len(plan.tensor_tilings),
            "plan_bytes": plan.comm_bytes, "compiled_bytes": atj.collective_bytes(text, 8),
            "kinds": sorted({c["kind"] for c in atj.collectives(text, 8)}),
            "plan_by_tensor": atj.plan_bytes_by_tensor(step.exec_graph),
            "compiled_by_tensor": atj.compiled_bytes_by_tensor(atj.collectives(text, 8), step.scope_names),
        }
        report["plans"][name]["differences"] = [
            (d["tensor"], d["plan"], d["compiled"], d["short"]) for d in atj.differences(
                report["plans"][name]["plan_by_tensor"], report["plans"][name]["compiled_by_tensor"], step)]
        free = atj.training_step(net, plan, unconstrained="gradients")
        outputs, new_params = free(params, inputs)
        report["plans"][name]["free_param_err"] = max(
            float(np.abs(np.asarray(new_params[k]) - ref.params[k]).max()) for k in params)
        report["plans"][name]["free_bytes"] = atj.collective_bytes(free.lower(params, inputs).compile().as_text(), 8)
        report["plans"][name]["free_constrained"] = len(free.constrained)
        glob = atj.training_step(net, plan, lowering="global")
        outputs, new_params = glob(params, inputs)
        report["plans"][name]["global_param_err"] = max(
            float(np.abs(np.asarray(new_params[k]) - ref.params[k]).max()) for k in params)
        report["plans"][name]["global_mapped"] = len(glob.mapped)
        report["plans"][name]["mapped"] = len(step.mapped)
        report["plans"][name]["nodes"] = len(plan.node_strategies)
    for name, sym, shapes, inputs, params in zoo_models():
        ref = at.backend.run(sym, devices=1, inputs=inputs, params=params, train=True)
        for kind in ("tofu", "data"):
            plan = at.plan(sym, devices=8, shapes=shapes, algorithm=kind)
            report["plans"][f"{name}-{kind}"] = step_report(atj.training_step(sym, plan), plan, params, inputs, ref)
    if len(sys.argv) > 1:  # the ONNX fixtures' directory
        sym, shapes, feeds = onnx_gpt2(sys.argv[1])
        ref = at.backend.run(sym, devices=1, inputs=feeds, train=True)
        plan = at.plan(sym, devices=8, shapes=shapes)
        step = atj.training_step(sym, plan)
        report["plans"]["gpt2-tofu"] = step_report(step, plan, {n: sym.params[n] for n in step.param_names}, feeds,
                                                   ref)
    import jax
    report["bad_lowering"] = []
    for kwargs in ({"lowering": "spmd"}, {"granularity": "axis"}):
        try:
            atj.training_step(net, next(plans(net))[1], **kwargs)
            report["bad_lowering"].append("no error")
        except at.Error as e:
            report["bad_lowering"].append(str(e))
    try:
        atj.training_step(net, next(plans(net))[1], devices=jax.devices()[:4])
        report["too_few_devices"] = "no error"
    except at.Error as e:
        report["too_few_devices"] = str(e)
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
