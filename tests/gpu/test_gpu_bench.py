"""`autotile bench gpu` without a GPU: the PyTorch twins of the zoo's AlexNet and VGG-16 equal
autotile's forward layer for layer (same weights, on the CPU), the PyTorch timing loop runs on
the CPU and refuses GPU-only modes there, the autotile/PyTorch ratio table from injected
timings, and the host-cost table of the launch list on its stand-in (--sim)."""
import numpy as np
import pytest

import autotile as at
from autotile.bench import gpu as bench_gpu
from autotile.bench import gpu_host_cost, gpu_torch

torch = pytest.importorskip("torch")


def _params(sym, shapes, seed=0):
    rng = np.random.default_rng(seed)
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape(**shapes)[0]))
    return {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in arg_shapes.items() if k not in shapes}


@pytest.mark.parametrize("name,image,batch", [("alexnet", 67, 2), ("vgg16", 32, 1)])
def test_torch_twin_equals_the_zoo_model(name, image, batch):
    sym = (at.models.alexnet(batch=batch, classes=10, image=image) if name == "alexnet"
           else at.models.vgg(16, batch=batch, classes=10, image=image))
    shapes = {"data": (batch, 3, image, image), "softmax_label": (batch,)}
    params = _params(sym, shapes)
    x = np.random.default_rng(1).standard_normal(shapes["data"]).astype(np.float32)
    ref = at.backend.run(sym, inputs={"data": x, "softmax_label": np.zeros(batch, np.float32)}, params=params,
                         train=False)
    model = gpu_torch.torch_model(name, classes=10, image=image).eval()
    gpu_torch.load_params(model, params)
    with torch.no_grad():
        got = torch.softmax(model(torch.from_numpy(x)), dim=1).numpy()
    np.testing.assert_allclose(got, ref.outputs[0], rtol=1e-4, atol=1e-6)
    n_ours = sum(int(np.prod(v.shape)) for v in params.values())
    assert n_ours == sum(p.numel() for p in model.parameters())


def test_load_params_names_a_mismatch():
    model = gpu_torch.torch_model("alexnet", classes=10, image=67)
    sym = at.models.alexnet(batch=1, classes=10, image=67)
    params = _params(sym, {"data": (1, 3, 67, 67), "softmax_label": (1,)})
    del params["fc7_bias"]
    with pytest.raises(at.Error, match="fc7_bias"):
        gpu_torch.load_params(model, params)
    params = _params(sym, {"data": (1, 3, 67, 67), "softmax_label": (1,)})
    params["conv2_weight"] = params["conv2_weight"][:10]
    with pytest.raises(at.Error, match="conv2_weight"):
        gpu_torch.load_params(model, params)
    with pytest.raises(at.Error, match="resnet"):
        gpu_torch.torch_model("resnet")


def test_torch_timing_on_the_cpu():
    t = gpu_torch.time_steps("alexnet", 2, "fp32 eager", steps=2, device="cpu", image=67, classes=10, warmup=1)
    assert 0 < t < 60
    with pytest.raises(at.Error, match="needs a CUDA GPU"):
        gpu_torch.time_steps("alexnet", 2, "bf16 graph", device="cpu", image=67)
    with pytest.raises(at.Error, match="mode must be one of"):
        gpu_torch.time_steps("alexnet", 2, "fp16", device="cpu")


def test_ratio_table_from_injected_timings(capsys):
    autotile = {("alexnet", 1): 0.134, ("alexnet", 8): 0.207, ("vgg16", 1): 0.183,
                ("vgg16", 2): "failed: Error: out of memory"}
    ref = {("alexnet", "fp32 eager"): 0.0195, ("alexnet", "fp32 graph"): 0.0189, ("alexnet", "bf16 eager"): 0.0121,
           ("alexnet", "bf16 graph"): "failed: RuntimeError: capture", ("vgg16", "fp32 eager"): 0.0563}
    rows = gpu_torch.print_ratios(autotile, ref, [("alexnet", 128), ("vgg16", 32)], workers=(1, 2, 8))
    by = {(r["model"], r["workers"]): r for r in rows}
    assert by["alexnet", 1]["autotile/torch fp32 eager"] == pytest.approx(0.134 / 0.0195)
    assert by["alexnet", 1]["autotile/torch fp32 graph"] == pytest.approx(0.134 / 0.0189)
    assert by["alexnet", 8]["vs 1 worker"] == pytest.approx(0.207 / 0.134)
    assert by["alexnet", 2]["autotile s"] == "-" and by["alexnet", 2]["vs 1 worker"] == "-"
    assert by["vgg16", 2]["autotile s"].startswith("failed") and by["vgg16", 1]["autotile/torch fp32 graph"] == "-"
    assert by["alexnet", 1]["torch bf16 graph s"].startswith("failed")
    out = capsys.readouterr().out
    assert "autotile/torch fp32 eager" in out and "6.87" in out


def test_host_cost_table_on_the_stand_in():
    """The bench's stand-in runs the three modes (host_cost asserts each timed step ran in its
    mode: op by op, replayed, graph) and fills every column (the speed itself is the bench's
    table, not this test's)."""
    rows = gpu_host_cost.host_cost(models=[("alexnet", lambda: at.models.alexnet(batch=1, image=67, classes=10))],
                                   workers=(2,), steps=3)
    (name, k, ops, t_ops, t_replay, t_graph, *_rest), = rows
    assert name == "alexnet" and k == 2 and ops > 20
    assert all(isinstance(v, float) and v > 0 for v in rows[0][3:])


def test_bench_gpu_cli_without_a_gpu(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOTILE_BENCH_OUT", str(tmp_path))
    assert bench_gpu.main(["--only", "steps"]) == 0
    assert "nothing to measure" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench_gpu.main(["--workers", "1,x"])


def test_step_table_code_path_on_the_stand_in(monkeypatch, capsys):
    """The GPU step table's code (plan with momentum, op-by-op and launch-list runtimes, the
    columns, the k-workers ratios) on the host-cost stand-in with small models: it can only
    be timed on a GPU, but its bookkeeping runs here."""
    import autotile.backend.gpu_runtime as gr

    class FakeCupy:
        @staticmethod
        def get_default_memory_pool():
            class Pool:
                def free_all_blocks(self):
                    pass
            return Pool()

    monkeypatch.setattr(gr, "CupyDevices", lambda k, cupy=None, gpu_ids=None: gpu_host_cost.CostDevices(k))
    monkeypatch.setattr(bench_gpu, "bench_models", lambda quick: [
        ("alexnet", 2, lambda b: at.models.alexnet(batch=b, image=67, classes=10))])
    rows, by = bench_gpu.step_times(FakeCupy(), True, 2, workers=(1, 2))
    assert [r["workers"] for r in rows] == [1, 2] and set(by) == {("alexnet", 1), ("alexnet", 2)}
    assert all(r["mode"] == "graph" and r["captured"] == "yes" and r["op-by-op step s"] > 0 for r in rows)
    assert "alexnet: 2 workers / 1 worker step time" in capsys.readouterr().out
