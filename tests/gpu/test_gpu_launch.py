"""The launch list (autotile.backend.gpu_launch, issue 32 item 1) on the CPU stand-in: the
first step runs op by op, the second captures the step into a (simulated) CUDA graph, later
steps launch it. Over several training steps (updated params, optimizer states and BatchNorm
statistics fed back) every step equals the op-by-op GPU runtime's step and the host
runtime's. SimDevices runs every stream and every graph launch in random interleavings, and
refuses captures CUDA would refuse (a stream not forked into the capture or not joined back,
a wait on an event from outside, a host kernel inside a graph)."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.gpu_launch import LaunchList, train_steps
from autotile.backend.gpu_runtime import GpuRuntime
from autotile.backend.host_runtime import HostRuntime
from autotile.execgraph import transform
from sim_devices import SimDevices


def _graph(exec_models, model, workers, plan=None):
    sym, shapes, classes = exec_models.MODELS[model]()
    vals = exec_models.values(sym, shapes, classes)
    plan = plan or at.plan(sym, devices=workers, shapes=shapes)
    return sym, plan, vals


def assert_steps_equal(got, want, what, rtol=1e-4, atol=1e-5):
    assert len(got) == len(want)
    for s, ((g, ga, _), (w, wa, _)) in enumerate(zip(got, want)):
        assert sorted(g) == sorted(w) and sorted(ga) == sorted(wa), f"{what} step {s}: result names"
        for kind, a, b in (("result", g, w), ("aux", ga, wa)):
            for name in b:
                scaled = atol * max(1.0, float(np.max(np.abs(b[name]), initial=0.0)))
                np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=scaled,
                                           err_msg=f"{what} step {s}: {kind} {name}")


# the host runtime sums partials in another order; over several steps a gradient that is zero
# in exact arithmetic (a convolution bias before BatchNorm) differs by a few 1e-6
HOST_ATOL = 5e-5


def new_batches(vals, steps, seed=0):
    """A new batch each step: the data scaled per step, the labels rolled (a stale input tile
    then changes the step, where the same batch every step would hide it)."""
    out = []
    for s in range(steps):
        b = {}
        for k, v in vals.items():
            if k.endswith("label"):
                b[k] = np.roll(v, s)
            elif k == "data" and not np.all(v == np.round(v)):  # token ids stay ids
                b[k] = (v * (1.0 + 0.25 * s)).astype(v.dtype)
        out.append(b)
    return out


def run_three(sym, plan, vals, dev, steps=3, seeds=None, **kw):
    """(replayed steps, op-by-op steps on the stand-in, host runtime steps), a new batch each step."""
    batches = new_batches(vals, steps)
    rt = GpuRuntime(transform(sym, plan), devices=dev, **kw)
    got = train_steps(rt, vals, steps, seeds=seeds, batches=batches)
    fresh_dev = SimDevices(plan.devices, dev.lib, n_gpus=dev.n_gpus, peer=dev.peer, seed=99)
    fresh = train_steps(GpuRuntime(transform(sym, plan), devices=fresh_dev, replay=False, **kw), vals, steps,
                        seeds=seeds, batches=batches)
    host = train_steps(HostRuntime(transform(sym, plan)), vals, steps, seeds=seeds, batches=batches)
    return rt, got, fresh, host


@pytest.mark.parametrize("model", ["mlp", "cnn", "bn", "residual"])
@pytest.mark.parametrize("workers,n_gpus,peer", [(1, 1, True), (2, 2, True), (4, 2, False), (8, 1, True)])
def test_replayed_steps_equal_fresh_and_host(exec_models, fetch_emulation, model, workers, n_gpus, peer):
    sym, plan, vals = _graph(exec_models, model, workers)
    dev = SimDevices(workers, fetch_emulation, n_gpus=n_gpus, peer=peer, seed=workers * 5 + n_gpus)
    rt, got, fresh, host = run_three(sym, plan, vals, dev)
    what = f"{model} x{workers} on {n_gpus} GPUs"
    assert_steps_equal(got, fresh, what + " (replay vs op by op)")
    assert_steps_equal(got, host, what + " (replay vs host)", atol=HOST_ATOL)
    modes = [st["launch"]["mode"] for _, _, st in got]
    assert modes == ["ops", "graph", "graph"], modes
    assert all(st["capture"]["captured"] for _, _, st in got[1:])
    assert dev.captures == 1 and dev.graph_launches == 2
    assert len(rt.launch.records) == len(rt.eg.ops)
    # the parameters really move: a replay that ran nothing would fail the comparisons above,
    # unless the steps were all the same
    tg = rt.eg.training
    p, u = tg.param_names[0], tg.updated_names[0]
    assert not np.allclose(got[1][0][u], got[2][0][u]), f"{what}: {p} did not change between steps"


def test_accumulating_fetch_through_staging_replays(exec_models, fetch_emulation):
    """A plan whose fetches accumulate partial sums, on GPUs without peer access (pieces
    copied into staging buffers, then added by the kernel): replayed steps equal the host's."""
    sym, plan, vals = _graph(exec_models, "mlp", 4)
    eg = transform(sym, plan)
    assert any(o["kind"] == "fetch" and o["accumulate"] for o in eg.ops), "the plan must reduce partials"
    dev = SimDevices(4, fetch_emulation, n_gpus=4, peer=False, seed=3)
    rt, got, fresh, host = run_three(sym, plan, vals, dev, steps=4)
    assert_steps_equal(got, host, "mlp x4 no peer (replay vs host)", atol=HOST_ATOL)
    assert_steps_equal(got, fresh, "mlp x4 no peer (replay vs op by op)")
    assert sum(rt.staging_bytes) > 0 and got[-1][2]["launch"]["mode"] == "graph"


@pytest.mark.parametrize("name,workers", [("mlp", 1), ("cnn", 2), ("lstm", 2)])
def test_swapped_plan_replays(exec_models, swap_models, fetch_emulation, name, workers):
    """Swap-outs and swap-ins (swap stream, pinned host pool) in the launch list and the graph."""
    sym, shapes, classes = swap_models.MODELS[name]()
    plan = at.plan(sym, devices=workers, shapes=shapes)
    plan.swap_budget = max(transform(sym, plan).peak_memory(d) for d in range(workers)) // 2
    # small weights: the deep swap-test MLP diverges over several steps at the usual scale
    vals = {k: v if k.endswith("label") or k == "data" else v * 0.3
            for k, v in exec_models.values(sym, shapes, classes).items()}
    dev = SimDevices(workers, fetch_emulation, n_gpus=workers, seed=11)
    rt, got, fresh, host = run_three(sym, plan, vals, dev)
    assert rt.launch.describe("graph")["by_kind"].get("swap_out", 0) > 0
    assert_steps_equal(got, host, f"{name} x{workers} swapped (replay vs host)", atol=HOST_ATOL)
    assert_steps_equal(got, fresh, f"{name} x{workers} swapped (replay vs op by op)")
    assert got[2][2]["capture"]["captured"]
    assert all(np.isfinite(v).all() for full, _, _ in got for v in full.values())


def test_uncaptured_replay(exec_models, fetch_emulation):
    """capture=False: the records are enqueued one by one each step (the path a GPU takes
    when the step cannot be captured), with the same results."""
    sym, plan, vals = _graph(exec_models, "cnn", 4)
    dev = SimDevices(4, fetch_emulation, n_gpus=2, seed=5)
    _, got, fresh, host = run_three(sym, plan, vals, dev, capture=False)
    assert [st["launch"]["mode"] for _, _, st in got] == ["ops", "replay", "replay"]
    assert "capture is off" in got[1][2]["capture"]["reason"] and dev.captures == 0
    assert_steps_equal(got, host, "cnn x4 uncaptured (replay vs host)", atol=HOST_ATOL)
    assert_steps_equal(got, fresh, "cnn x4 uncaptured (replay vs op by op)")


def test_host_ops_prevent_capture_and_are_named(exec_models, fetch_emulation):
    """An op on the host path (inputs copied down, the stream synchronised) cannot be
    captured: the step replays uncaptured and stats['capture'] names the ops."""
    sym, plan, vals = _graph(exec_models, "cnn", 2)
    dev = SimDevices(2, fetch_emulation, n_gpus=2, seed=8)
    _, got, fresh, host = run_three(sym, plan, vals, dev, host_ops={"Convolution"})
    cap = got[1][2]["capture"]
    assert not cap["captured"] and cap["n_blocked"] > 0 and "on the host" in cap["reason"]
    assert all("(Convolution)" in b or "(_backward_Convolution" in b or "(Convolution" in b for b in cap["blocked_by"])
    assert any("(Convolution)" in b for b in cap["blocked_by"])
    assert dev.captures == 0 and got[2][2]["launch"]["mode"] == "replay"
    assert_steps_equal(got, host, "cnn with host convolutions (replay vs host)", atol=HOST_ATOL)


def test_stand_in_refuses_a_host_kernel_inside_a_graph(exec_models, fetch_emulation, monkeypatch):
    """The stand-in has teeth: were the host path captured anyway, its stream synchronisation
    inside the graph's work fails the step."""
    sym, plan, vals = _graph(exec_models, "cnn", 2)
    monkeypatch.setattr(LaunchList, "_launch", _launch_without_blockers(LaunchList._launch))
    rt = GpuRuntime(transform(sym, plan), devices=SimDevices(2, fetch_emulation, seed=1), host_ops={"Convolution"})
    with pytest.raises(at.Error, match="inside a CUDA graph"):
        train_steps(rt, vals, 2)


def _launch_without_blockers(launch):
    def patched(self, *a):
        out = launch(self, *a)
        self.blockers.clear()
        return out
    return patched


def test_capture_refused_falls_back_and_says_why(exec_models, fetch_emulation, monkeypatch):
    """A capture CUDA invalidates (an unforeseen synchronising call) is reported in
    stats['capture'] and the step still runs, uncaptured, right; later steps do not retry."""
    end_capture = SimDevices.end_capture

    def refuse(self, worker, stream):
        end_capture(self, worker, stream)  # the capture is over, as CUDA ends an invalidated one
        raise RuntimeError("cudaErrorStreamCaptureInvalidated: operation not permitted when stream is capturing")

    monkeypatch.setattr(SimDevices, "end_capture", refuse)
    sym, plan, vals = _graph(exec_models, "mlp", 2)
    dev = SimDevices(2, fetch_emulation, n_gpus=2, seed=2)
    _, got, _, host = run_three(sym, plan, vals, dev)
    assert [st["launch"]["mode"] for _, _, st in got] == ["ops", "replay", "replay"]
    assert all("StreamCaptureInvalidated" in st["capture"]["reason"] for _, _, st in got[1:])
    assert dev.captures == 1
    assert_steps_equal(got, host, "mlp x2 after a refused capture (replay vs host)", atol=HOST_ATOL)


@pytest.mark.parametrize("drop", ["fork", "join", "inputs"])
def test_stand_in_catches_a_missing_fork_join_or_input_wait(exec_models, fetch_emulation, monkeypatch, drop):
    """Without the fork (streams never join the capture), the join (streams not joined back)
    or the origin's wait for the inputs written on other workers' streams, the stand-in
    refuses the capture (the step then runs uncaptured, saying why) or some interleaving
    gives a wrong step."""
    sym, plan, vals = _graph(exec_models, "mlp", 4)
    host = train_steps(HostRuntime(transform(sym, plan)), vals, 3, batches=new_batches(vals, 3))
    wait, record = SimDevices.wait, SimDevices.record

    def patched_wait(self, worker, stream, event):
        if _ll and ((drop == "fork" and event is _ll[0].fork) or (drop == "inputs" and event in _ll[0].inputs_ready)):
            return None
        return wait(self, worker, stream, event)

    def patched_record(self, worker, event, stream):
        if _ll and drop == "join" and event in _ll[0].joins:
            return None
        return record(self, worker, event, stream)

    _ll = []
    build = LaunchList.__init__

    def init(self, *a, **k):
        build(self, *a, **k)
        _ll[:] = [self]
    monkeypatch.setattr(LaunchList, "__init__", init)
    monkeypatch.setattr(SimDevices, "wait", patched_wait)
    monkeypatch.setattr(SimDevices, "record", patched_record)
    failures = 0
    for seed in range(10):
        rt = GpuRuntime(transform(sym, plan), devices=SimDevices(4, fetch_emulation, n_gpus=4, seed=seed))
        try:
            # step 3 is the first whose inputs are written asynchronously (the list is built at step 2)
            got = train_steps(rt, vals, 3, batches=new_batches(vals, 3))
            assert got[2][2]["capture"]["captured"], got[2][2]["capture"]["reason"]
            assert_steps_equal(got, host, f"{drop} dropped", atol=HOST_ATOL)
        except (AssertionError, RuntimeError, at.Error):
            failures += 1
    assert failures > 0


def _dropout_mlp():
    x = at.sym.Variable("data")
    h = at.sym.Activation(at.sym.FullyConnected(x, num_hidden=16, name="fc1"), act_type="relu", name="relu1")
    h = at.sym.Dropout(h, p=0.5, name="drop")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(h, num_hidden=4, name="fc2"), name="softmax")


def test_a_graph_per_seed(fetch_emulation):
    """The node keys (Dropout's mask) are fixed in a captured graph: a step with another seed
    captures its own graph, and the steps equal the host runtime's step for step."""
    sym = _dropout_mlp()
    rng = np.random.default_rng(3)
    shapes = {"data": (8, 12), "softmax_label": (8,)}
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape(**shapes)[0]))
    vals = {k: (rng.integers(0, 4, size=s) if k == "softmax_label" else rng.standard_normal(s)).astype(np.float32)
            for k, s in arg_shapes.items()}
    plan = at.plan(sym, devices=2, shapes=shapes)
    seeds = [0, 1, 2, 1, 2]
    dev = SimDevices(2, fetch_emulation, n_gpus=2, seed=4)
    rt, got, fresh, host = run_three(sym, plan, vals, dev, steps=5, seeds=seeds)
    assert_steps_equal(got, host, "dropout mlp, seeds vary (replay vs host)", atol=HOST_ATOL)
    assert_steps_equal(got, fresh, "dropout mlp, seeds vary (replay vs op by op)")
    assert dev.captures == 2 and len(rt.launch.graphs) == 2  # seeds 1 and 2 (seed 0 ran op by op)


def test_replay_errors_name_the_input_or_the_node(exec_models, fetch_emulation):
    """A replayed step checks its inputs before anything is enqueued (a missing or misshapen
    input is an Error naming it), and a kernel failing in a replayed step is an Error naming
    its node and device."""
    sym, plan, vals = _graph(exec_models, "mlp", 2)
    rt = GpuRuntime(transform(sym, plan), devices=SimDevices(2, fetch_emulation, seed=0))
    train_steps(rt, vals, 2)
    from autotile.backend.tiles import step_inputs

    inputs = step_inputs(rt.eg, vals)
    name = rt.eg.training.param_names[0]
    with pytest.raises(at.Error, match=f"missing input '{name}'"):
        rt.load({k: v for k, v in inputs.items() if k != name})
    with pytest.raises(at.Error, match=f"input '{name}' has shape"):
        rt.load({**inputs, name: inputs[name][..., :1]})
    kernel = rt.runner.kernel

    def failing(node, opdef, attrs, ins, ctx):
        if opdef.name == "FullyConnected":
            raise ValueError("bad launch")
        return kernel(node, opdef, attrs, ins, ctx)

    rt.runner.kernel = failing
    rt.load(inputs)
    with pytest.raises(at.Error, match=r"node 'fc\d' \(FullyConnected\) on device \d failed in a replayed step: "
                                        r"ValueError: bad launch"):
        rt.run()
