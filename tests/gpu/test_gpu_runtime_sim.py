"""The GPU runtime (autotile.backend.gpu_runtime) driven on the CPU by SimDevices: the same
enqueue order, stream/event waits, fetch plans (kernel records, peer/memcpy paths, staging),
kernel selection and host fallback as on GPUs, with each stream's work deferred and run in
random interleavings. A training step must equal the single-device NumPy step."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.gpu_runtime import GpuRuntime, run_gpu
from autotile.execgraph import transform
from sim_devices import SimDevices


@pytest.mark.parametrize("model", ["mlp", "cnn", "residual", "concat", "lstm", "bn"])
@pytest.mark.parametrize("workers,n_gpus,peer", [(1, 1, True), (2, 2, True), (4, 2, False), (8, 8, True),
                                                 (8, 4, False), (8, 1, True)])
def test_step_matches_numpy(exec_models, fetch_emulation, model, workers, n_gpus, peer):
    sym, shapes, classes = exec_models.MODELS[model]()
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    dev = SimDevices(workers, fetch_emulation, n_gpus=n_gpus, peer=peer, seed=workers * 7 + n_gpus)
    res = run_gpu(sym, workers, vals, gpu_devices=dev)
    exec_models.assert_same_step(res, ref, f"{model} x{workers} on {n_gpus} GPUs (peer={peer})")
    paths = res.stats["fetch_paths"]
    if workers > 1 and res.stats["bytes"] > 0:
        if n_gpus == 1:
            assert set(paths) == {"local"}
        elif not peer:
            assert paths.get("memcpy", 0) > 0 and dev.memcpys > 0
        else:
            assert paths.get("peer", 0) > 0 and "memcpy" not in paths
    assert res.stats["kernels"]["gpu"], "the heavy ops have CuPy kernels"


@pytest.mark.parametrize("model", ["cnn", "bn", "lstm"])
def test_inference_matches_numpy(exec_models, fetch_emulation, model):
    """Partitioned inference (train=False: the forward graph planned alone) on the GPU runtime
    equals the single-device forward; BatchNorm statistics come back unchanged."""
    sym, shapes, classes = exec_models.MODELS[model]()
    vals = exec_models.values(sym, shapes, classes)
    ref = at.backend.run(sym, inputs=vals)
    res = run_gpu(sym, 4, vals, train=False, gpu_devices=SimDevices(4, fetch_emulation, n_gpus=2, peer=True))
    assert res.plan.train is False and not res.grads
    exec_models.assert_same_step(res, ref, f"{model} inference x4")


def test_host_fallback_and_kernel_report(exec_models, fetch_emulation):
    sym, shapes, classes = exec_models.MODELS["cnn"]()
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    dev = SimDevices(4, fetch_emulation, n_gpus=2, peer=True)
    res = run_gpu(sym, 4, vals, gpu_devices=dev, host_ops={"Convolution", "SoftmaxOutput"}, dispatch=False)
    exec_models.assert_same_step(res, ref, "cnn with host fallbacks")
    k = res.stats["kernels"]
    assert "Convolution" in k["host"] and "SoftmaxOutput" in k["host"] and "Flatten" in k["host"]
    assert "FullyConnected" in k["gpu"] and not k["dispatch"]


@pytest.mark.parametrize("seed", range(4))
def test_interleavings(exec_models, fetch_emulation, seed):
    """Different random interleavings of the streams give the same (right) step."""
    sym, shapes, classes = exec_models.MODELS["residual"]()
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    res = run_gpu(sym, 6, vals, gpu_devices=SimDevices(6, fetch_emulation, n_gpus=3, peer=seed % 2 == 0, seed=seed))
    exec_models.assert_same_step(res, ref, f"residual x6 seed {seed}")


def test_simulator_catches_a_missing_wait(exec_models, fetch_emulation, monkeypatch):
    """The stand-in has teeth: with the cross-stream waits dropped, some interleaving breaks the step."""
    sym, shapes, classes = exec_models.MODELS["mlp"]()
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    monkeypatch.setattr(SimDevices, "wait", lambda self, worker, stream, event: None)
    wrong = 0
    for seed in range(6):
        try:
            res = run_gpu(sym, 4, vals, gpu_devices=SimDevices(4, fetch_emulation, n_gpus=4, seed=seed))
            exec_models.assert_same_step(res, ref, "no waits")
        except AssertionError:
            wrong += 1
    assert wrong > 0


def test_enqueue_order_is_topological(exec_models, fetch_emulation):
    sym, shapes, _ = exec_models.MODELS["concat"]()
    plan = at.plan(sym, devices=4, shapes=shapes)
    eg = transform(sym, plan)
    rt = GpuRuntime(eg, devices=SimDevices(4, fetch_emulation, n_gpus=2))
    order = rt.enqueue_order()
    assert sorted(order) == list(range(len(eg.ops)))
    pos = {op: i for i, op in enumerate(order)}
    for i, op in enumerate(eg.ops):
        assert all(pos[j] < pos[i] for j in op["deps"])
    for d in range(4):
        assert [o for o in order if eg.ops[o]["device"] == d] == list(eg.schedule(d))


def test_uploads_land_before_the_first_kernel(exec_models, fetch_emulation, monkeypatch):
    """load() and the fetch record lists copy on the legacy default stream, which the workers'
    non-blocking streams do not wait for: the runtime synchronizes before it enqueues. The
    stand-in refuses work enqueued over unsynchronized uploads; without the synchronization
    the step fails."""
    sym, shapes, classes = exec_models.MODELS["cnn"]()
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    exec_models.assert_same_step(run_gpu(sym, 2, vals, gpu_devices=SimDevices(2, fetch_emulation)), ref, "synced")
    monkeypatch.setattr(SimDevices, "synchronize", lambda self: SimDevices._drain(self))
    with pytest.raises(Exception, match="uploads on the default stream may not have landed"):
        run_gpu(sym, 2, vals, gpu_devices=SimDevices(2, fetch_emulation))


class _MutatingOp:
    """An op kernel that writes its input and then fails the first time (on device arrays, as
    a NumPy kernel that mixes in a NumPy array can after an in-place step), then works."""
    name = "mutating_test_op"

    def __init__(self):
        self.calls = 0

    def forward(self, attrs, inputs, ctx):
        self.calls += 1
        inputs[0] += 1.0
        if self.calls == 1:
            raise TypeError("cannot mix device and host arrays")
        return [inputs[0] * 2.0]


def test_dispatch_probe_leaves_inputs_untouched(exec_models, fetch_emulation):
    """The first try of an op type's NumPy kernel on device arrays runs on copies: a kernel
    that writes an input and then raises leaves the real input as it was for the host kernel
    (the old code retried on the host with the input already changed)."""
    from autotile.backend.gpu_runtime import _GpuSubOps
    from autotile.ops.registry import KernelContext

    sym, shapes, _ = exec_models.MODELS["mlp"]()
    eg = transform(sym, at.plan(sym, devices=1, shapes=shapes))
    rt = GpuRuntime(eg, devices=SimDevices(1, fetch_emulation))
    runner = _GpuSubOps(eg, rt)
    x = np.arange(4.0)
    outs = runner.kernel(None, _MutatingOp(), {}, [x], KernelContext(is_train=True, xp=np))
    assert rt.kernel_paths["mutating_test_op"] == "host" and "cannot mix" in rt.no_dispatch["mutating_test_op"]
    np.testing.assert_array_equal(np.asarray(outs[0]), (np.arange(4.0) + 1.0) * 2.0)  # one +1, on the host


def test_large_contiguous_pieces_go_through_the_copy_engine(exec_models, fetch_emulation, monkeypatch):
    """Copied pieces that are one contiguous run of at least MEMCPY_MIN_BYTES take
    cudaMemcpyPeerAsync instead of the kernel (local and peer pairs alike); the step is unchanged."""
    from autotile.backend import gpu_fetch

    monkeypatch.setattr(gpu_fetch, "MEMCPY_MIN_BYTES", 64)
    sym, shapes, classes = exec_models.MODELS["cnn"]()
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    dev = SimDevices(4, fetch_emulation, n_gpus=2, peer=True)
    res = run_gpu(sym, 4, vals, gpu_devices=dev)
    exec_models.assert_same_step(res, ref, "copy engine for large pieces")
    assert res.stats["fetch_paths"].get("copy_engine", 0) > 0 and dev.memcpys > 0


def _dropout_mlp():
    x = at.sym.Variable("data")
    h = at.sym.Activation(at.sym.FullyConnected(x, num_hidden=16, name="fc1"), act_type="relu", name="relu1")
    h = at.sym.Dropout(h, p=0.5, name="drop")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(h, num_hidden=4, name="fc2"), name="softmax")


def test_host_kernels_draw_the_nodes_keyed_numbers(fetch_emulation):
    """An op sent to the host (Dropout, whose NumPy kernel mixes a NumPy mask into device
    arrays) keeps the node's key: its mask is the one every runtime draws, so the step equals
    the host runtime's (it drew from the worker's generator before)."""
    sym = _dropout_mlp()
    rng = np.random.default_rng(3)
    shapes = {"data": (8, 12), "softmax_label": (8,)}
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape(**shapes)[0]))
    vals = {k: (rng.integers(0, 4, size=s) if k == "softmax_label" else rng.standard_normal(s)).astype(np.float32)
            for k, s in arg_shapes.items()}
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    ref = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    res = run_gpu(sym, 2, vals, gpu_devices=SimDevices(2, fetch_emulation), host_ops={"Dropout"})
    assert "Dropout" in res.stats["kernels"]["host"]
    for p in ref.grads:
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-5, atol=1e-6, err_msg=p)
