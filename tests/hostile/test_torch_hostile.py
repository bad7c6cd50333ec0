"""Hostile inputs to autotile.torch (issue 31): tied parameters (an LM head sharing the
embedding's weight), one weight read in two orientations, buffers, ranks that raise, exit,
are killed or segfault under ``run_local``, arguments of the wrong kind.

Oracle: the plain (unparallelized) module's own SGD step in this process; every
parallelized step runs on 2 gloo ranks (``run_local``)."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]'; CI installs it)")
pytest.importorskip("onnx", reason="onnx is not installed (autotile.torch.export needs it)")
pytest.importorskip("torch.distributed.tensor", reason="this torch has no torch.distributed.tensor")

import torch.nn as nn  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402
from autotile.torch.step_check import placement_text  # noqa: E402
from hostile_util import raises_naming  # noqa: E402

TOL = 1e-5  # relative to the plain step's largest magnitude


class TiedLM(nn.Module):
    """An embedding, a hidden layer and an LM head whose weight is the embedding's."""

    def __init__(self, vocab=16, d=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mid = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.relu(self.mid(self.emb(ids))))


class TwoWays(nn.Module):
    """One weight read as stored and transposed (``x @ W`` then ``h @ W.T``)."""

    def __init__(self, d=8):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.b = nn.Parameter(torch.randn(d) / d)

    def forward(self, x):
        return torch.relu(x @ self.w + self.b) @ self.w.t()


class ReadsTransposed(nn.Module):
    """``x @ W`` with a non-square W: the import holds it as ``W_T`` (16 x 8), the module as 8 x 16."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 16) / 4)

    def forward(self, x):
        return torch.tanh(x @ self.w)


class Buffered(nn.Module):
    """A registered (untrained) scale and a BatchNorm1d (running statistics updated in the step)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)
        self.out = nn.Linear(8, 3)
        self.register_buffer("scale", torch.linspace(0.5, 2, 8))

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))) * self.scale)


def _plain_step(module, inputs, lr=0.1):
    """{parameter name (every owner): (gradient, updated value)} of the plain module's step,
    and {buffer: value after it}."""
    ref = copy.deepcopy(module)
    att.sgd_step(ref, inputs, lr)
    return ({n: (p.grad.numpy().copy(), p.detach().numpy().copy())
             for n, p in ref.named_parameters(remove_duplicate=False)},
            {n: b.numpy().copy() for n, b in ref.named_buffers()})


def _parallel_step(rank, module, plan, sym, inputs, lr=0.1):
    """The same step of `module` parallelized by `plan`: every owner's gradient and update
    (gathered), which owners share one tensor, and each parameter's placements and local shape."""
    mod = att.parallelize(copy.deepcopy(module), plan, sym)
    att.sgd_step(mod, inputs, lr)
    named = list(mod.named_parameters(remove_duplicate=False))
    state = mod.autotile
    return {"step": {n: (p.grad.full_tensor().numpy(), p.full_tensor().detach().numpy()) for n, p in named},
            "buffers": {n: b.full_tensor().numpy() for n, b in mod.named_buffers()},
            "params": dict(state.params), "transposed": sorted(state.transposed), "views": dict(state.views),
            "shared": sorted(sorted(n for n, q in named if q is p) for _, p in named),
            "layout": {n: ([placement_text(x) for x in p.placements], tuple(p.to_local().shape)) for n, p in named}}


def _check_against_plain(module, plan, sym, inputs, got):
    want, buffers = _plain_step(module, inputs)
    for rank_result in got:
        assert sorted(rank_result["buffers"]) == sorted(buffers)
        for name, value in buffers.items():
            assert np.allclose(rank_result["buffers"][name], value, rtol=1e-5, atol=1e-6), name
        assert sorted(rank_result["step"]) == sorted(want)
        for name, (grad, value) in want.items():
            g, v = rank_result["step"][name]
            scale = max(1.0, float(np.abs(grad).max()))
            assert np.abs(g - grad).max() <= TOL * scale, (name, float(np.abs(g - grad).max()), scale)
            assert np.abs(v - value).max() <= TOL * max(1.0, float(np.abs(value).max())), name


def test_tied_parameters_stay_one_tensor_and_train_on_the_summed_gradient():
    """The LM head's weight is the embedding's: parallelized, both owners hold one DTensor
    whose gradient is both uses' (was: two parameters, each on its own share: off by ~10
    where the gradient's scale is 13.5). compare_step reports both owners."""
    torch.manual_seed(0)
    m, ids = TiedLM(), torch.randint(0, 16, (4, 6))
    sym = att.export(m, ids)
    plan = at.plan(sym, devices=2, shapes={"ids": (4, 6)})
    assert "emb.weight" in plan.param_names and "head.weight" not in plan.param_names

    def job(rank):
        return _parallel_step(rank, m, plan, sym, (ids,)), att.compare_step(rank, m, plan, sym, (ids,))

    results = att.run_local(job, 2, timeout=120)
    got = [r[0] for r in results]
    for r in got:
        assert ["emb.weight", "head.weight"] in r["shared"]
        assert r["params"]["head.weight"] == r["params"]["emb.weight"] == "emb.weight"
        _laid_out_as_planned(plan, r)
    _check_against_plain(m, plan, sym, (ids,), got)
    for _, report in results:
        for k in ("output", "grad", "param"):
            assert report["diff"][k] <= TOL * max(1.0, report["scale"][k]), (k, report["diff"])


def test_compare_step_reports_an_untied_parameter_rather_than_failing_on_its_name():
    """A parallelizer that unties ``head.weight`` from ``emb.weight`` (as parallelize did)
    must show in compare_step's gradient difference, by the owner's name."""
    torch.manual_seed(0)
    m, ids = TiedLM(), torch.randint(0, 16, (4, 6))
    sym = att.export(m, ids)
    plan = at.plan(sym, devices=2, shapes={"ids": (4, 6)})

    def job(rank):
        import autotile.torch.parallel as par

        real = par.parallelize

        def untying(module, *args, **kwargs):
            out = real(module, *args, **kwargs)
            w = module.head.weight
            module.head.weight = nn.Parameter(w.detach().clone())  # its own tensor now
            return out

        par.parallelize = untying
        try:
            return att.compare_step(rank, m, plan, sym, (ids,))
        finally:
            par.parallelize = real

    report = att.run_local(job, 2, timeout=120)[0]
    assert report["diff"]["grad"] > 0.1 * report["scale"]["grad"], report
    assert report["worst"]["grad"] in ("emb.weight", "head.weight"), report["worst"]


def _laid_out_as_planned(plan, r):
    """Each module parameter's placements are its plan tensor's (``plan.to_dtensor()``; Shard(0)
    and Shard(1) swapped where the plan holds the weight transposed) and its local shape the
    plan's tile of that tensor; parameters the plan does not train are replicated."""
    expect = plan.to_dtensor()["placements"]
    for pname, (placements, local) in r["layout"].items():
        tensor = r["params"].get(pname)
        if tensor is None:
            assert set(placements) == {"Replicate()"}, pname
            continue
        row, tile = list(expect[tensor]), list(plan.tile_shape(tensor))
        if pname in r["transposed"]:
            row = [{"Shard(0)": "Shard(1)", "Shard(1)": "Shard(0)"}.get(x, x) for x in row]
            tile = tile[::-1]
        assert (list(placements), list(local)) == (row, tile), (pname, tensor)


def test_a_weight_read_in_two_orientations_and_buffers():
    """``x @ W`` and ``h @ W.T`` import as two plan tensors of one parameter (was: 'module
    parameter w matches two plan tensors'); ``x @ W`` alone holds a non-square W transposed
    (was: refused, 'has shape (8, 16) but plan tensor w_T has shape (16, 8)'); a registered
    buffer and BatchNorm1d's running statistics (were: trained by the plan and refused by
    parallelize, or a raw 'mixed torch.Tensor and DTensor' in rank 0's traceback). Each step
    equals the plain module's, buffers included; each parameter is laid out as planned."""
    torch.manual_seed(0)
    cases = []
    for module, kw in ((TwoWays(), {}), (ReadsTransposed(), {}), (Buffered(), {}),
                       (Buffered(), {"algorithm": "data"})):
        x = torch.randn(4, 8)
        sym = att.export(module, x)
        cases.append((module, at.plan(sym, devices=2, shapes={"x": (4, 8)}, **kw), sym, (x,)))
    buffered = cases[2][1]
    assert sorted(buffered.param_names) == sorted(n for n, _ in Buffered().named_parameters())

    def job(rank):
        return [_parallel_step(rank, *case) for case in cases]

    results = att.run_local(job, 2, timeout=120)
    for j, case in enumerate(cases):
        got = [r[j] for r in results]
        _check_against_plain(*case, got)
        for r in got:
            _laid_out_as_planned(case[1], r)
    # however the import holds W (as stored, transposed, or both: today 'w' and 'w_T' for TwoWays,
    # 'w_T' alone for ReadsTransposed), every plan tensor of it is W's, laid out as above
    for j in (0, 1):
        r, plan = results[0][j], cases[j][1]
        held = {t for t in plan.param_names if t != "b"}
        assert set(r["params"].values()) | set(r["views"]) >= held and r["params"]["w"] in held
        assert all(v[0] == "w" for v in r["views"].values())


def test_export_leaves_the_module_as_it_was_and_names_missing_inputs():
    """export ran the module once in training mode: BatchNorm's running statistics moved
    (num_batches_tracked 0 -> 1) before any step; each submodule's mode is restored as it was.
    export(module) without inputs was a raw error from the exporter."""
    torch.manual_seed(0)
    m = Buffered()
    m.bn.eval()  # a submodule in its own mode, under a module in training mode
    m.bn.train()
    m.out.eval()
    before = {n: b.clone() for n, b in m.named_buffers()}
    att.export(m, torch.randn(4, 8))
    for n, b in m.named_buffers():
        assert torch.equal(b, before[n]), n
    assert m.training and m.bn.training and not m.out.training
    raises_naming(lambda: att.export(m), "Buffered", "example inputs", "x")
    raises_naming(lambda: att.export(lambda x: x, torch.randn(2)), "nn.Module", "function")


def _fails_on_rank_1(how):
    """A function whose rank 1 fails (`how`) while rank 0 waits for it in an all-reduce."""

    def fn(rank):
        import ctypes
        import os
        import signal

        import torch.distributed as dist

        if rank == 1:
            if how == "raise":
                raise ValueError("boom on rank one")
            if how == "exit":
                os._exit(3)
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "segfault":
                ctypes.string_at(0)
        t = torch.ones(4)
        dist.all_reduce(t)
        return float(t.sum())

    return fn


@pytest.mark.parametrize("how, says", [
    ("raise", r"rank 1 of 2 raised ValueError: boom on rank one"),
    ("exit", r"rank 1 of 2 exited with code 3"),
    ("kill", r"rank 1 of 2 was killed by signal SIGKILL"),
    ("segfault", r"rank 1 of 2 was killed by signal SIGSEGV")])
def test_run_local_names_the_rank_that_failed_not_the_one_left_waiting(how, says):
    """Rank 0, waiting in an all-reduce, sees gloo's connection reset; the report was 'rank 0
    of 2 failed' with that traceback. It names rank 1 and what happened to it."""
    with pytest.raises(at.Error, match=says) as e:
        att.run_local(_fails_on_rank_1(how), 2, timeout=60)
    assert "rank 0 of 2" not in str(e.value).split("\n")[0], str(e.value)[:400]


def test_run_local_keeps_to_its_timeout_and_names_the_ranks_still_running():
    """timeout=4 with 3 ranks, rank 2 sleeping: was 21 s for timeout=8 (5 s joins per rank)."""
    import time

    def fn(rank):
        if rank == 2:
            time.sleep(120)
        return rank

    import torch._dynamo  # noqa: F401  (run_local's one-time imports, outside the clock)
    import torch.distributed.tensor  # noqa: F401

    start = time.monotonic()
    with pytest.raises(at.Error, match=r"rank 2 of 3 returned nothing within 4 s"):
        att.run_local(fn, 3, timeout=4)
    assert time.monotonic() - start < 4 + 3


@pytest.mark.parametrize("kw, names", [
    ({"nprocs": 0}, "nprocs"), ({"nprocs": -1}, "nprocs"), ({"nprocs": 1.5}, "nprocs"), ({"nprocs": "2"}, "nprocs"),
    ({"nprocs": True}, "nprocs"), ({"nprocs": 2, "timeout": -1}, "timeout"),
    ({"nprocs": 2, "timeout": float("nan")}, "timeout"), ({"nprocs": 2, "threads": 0}, "threads"),
    ({"nprocs": 2, "start_method": "thread"}, "start_method")])
def test_run_local_refuses_bad_arguments_by_name(kw, names):
    kw = dict(kw)
    nprocs = kw.pop("nprocs")
    raises_naming(lambda: att.run_local(lambda rank: rank, nprocs, **kw), names)


def test_run_local_returns_tensors():
    """A rank returning a torch tensor: was a FileNotFoundError in the parent (the tensor went
    through shared memory of a process that had exited)."""
    got = att.run_local(lambda rank: torch.full((3,), float(rank)), 2, timeout=60)
    assert [g.tolist() for g in got] == [[0.0] * 3, [1.0] * 3]


def test_measure_outside_a_process_group_and_beside_plan_with_a_bad_report():
    """Were a raw ValueError from torch.distributed ('Default process group has not been
    initialized') and KeyError / TypeError / AttributeError."""
    raises_naming(lambda: att.measure(lambda: 1), "measure", "process group")
    raises_naming(lambda: att.measure("not callable"), "measure", "callable")
    m, x = TiedLM(), torch.randint(0, 16, (4, 6))
    plan = at.plan(att.export(m, x), devices=2, shapes={"ids": (4, 6)})
    good = {"counts": {"all_reduce": 1}, "bytes": {"all-reduce": 8.0}, "total_bytes": 8.0}
    assert att.beside_plan(plan, good)["dtensor_bytes"] == 8.0
    for bad, names in (({}, ("report", "total_bytes")), (None, ("report", "NoneType")),
                       ({**good, "total_bytes": "8"}, ("report", "total_bytes")),
                       ({**good, "counts": [1]}, ("report", "counts")),
                       ({**good, "total_bytes": float("nan")}, ("report", "total_bytes"))):
        raises_naming(lambda: att.beside_plan(plan, bad), *names)
    raises_naming(lambda: att.beside_plan({"comm_bytes": 1}, good), "plan", "dict")
    raises_naming(lambda: att.beside_plan(plan, good, model="m.onnx"), "model", "str")


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gn = nn.GroupNorm(2, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(torch.relu(self.gn(self.fc(x))))


def test_group_norm_on_a_split_input_trains_as_the_plain_module():
    """DTensor's GroupNorm backward on a split input raised 'Expected dY.numel() == N * C *
    HxW' (torch 2.13) deep in each rank's traceback, under data parallelism and under a plan
    splitting the features: the call runs replicated and the step equals the plain module's."""
    torch.manual_seed(0)
    m, x = Grouped(), torch.randn(4, 8)
    sym = att.export(m, x)
    plans = [at.plan(sym, devices=2, shapes={"x": (4, 8)}, algorithm="data"),
             at.plan(sym, devices=2, shapes={"x": (4, 8)}, mesh={"model": 2}, layout={"fc.weight": {0: "model"}})]

    def job(rank):
        out = []
        for plan in plans:
            mod = att.parallelize(copy.deepcopy(m), plan, sym)
            step = _parallel_step(rank, m, plan, sym, (x,))
            mod(x)
            out.append((step, list(mod.autotile.gathered)))
            mod.autotile.remove()  # the replaced forward and the state it read come off
            assert not {"forward", "_autotile_name", "_autotile_state"} & set(mod.gn.__dict__), mod.gn.__dict__.keys()
        return out

    results = att.run_local(job, 2, timeout=120)
    for j, plan in enumerate(plans):
        _check_against_plain(m, plan, sym, (x,), [r[j][0] for r in results])
        assert [q for q, _ in results[0][j][1]] == ["gn"]


class Reflect(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.pad = nn.ReflectionPad1d(1)

    def forward(self, x):
        return self.pad(self.fc(x).unsqueeze(1))


def test_an_op_dtensor_cannot_run_is_an_error_naming_the_module():
    """DTensor has no sharding rule for reflection padding: was a raw NotImplementedError deep in
    rank 0's traceback; an Error naming the module call (ReflectionPad1d 'pad') and the op."""
    torch.manual_seed(0)
    m, x = Reflect(), torch.randn(4, 8)
    sym = att.export(m, x)
    plan = at.plan(sym, devices=2, shapes={"x": (4, 8)})

    def job(rank):
        from autotile.torch.names import forward_arg_names

        mod = att.parallelize(copy.deepcopy(m), plan, sym)
        assert forward_arg_names(mod) == ["x"]  # the wrapped forward keeps its signature
        try:
            mod(x)
        except at.Error as e:
            assert isinstance(e.__cause__, NotImplementedError)
            said = str(e)
        mod.fc.forward = lambda t: (_ for _ in ()).throw(ValueError("the module's own error"))
        with pytest.raises(ValueError, match="the module's own error"):  # not DTensor's: as it was
            mod(x)
        return said

    said = att.run_local(job, 2, timeout=60)
    for text in said:
        assert "ReflectionPad1d module 'pad' of the parallelized Reflect" in text, text
        assert "reflection_pad1d" in text


def test_parallelize_and_compare_step_refuse_arguments_of_the_wrong_kind():
    """A Symbol given as a path was silently ignored (the module re-exported); a plan or module
    of the wrong kind was an AttributeError; a bare tensor as compare_step's inputs was unpacked
    row by row into forward's arguments (a TypeError from forward)."""
    torch.manual_seed(0)
    m, x = TwoWays(), torch.randn(4, 8)
    sym = att.export(m, x)
    plan = at.plan(sym, devices=2, shapes={"x": (4, 8)})
    raises_naming(lambda: att.parallelize(m, "plan.json", sym), "plan", "str")
    raises_naming(lambda: att.parallelize(m, plan, "model.onnx"), "model", "str")
    raises_naming(lambda: att.parallelize("m", plan, sym), "module", "str")
    raises_naming(lambda: att.compare_step(0, m, plan, sym, x), "compare_step", "inputs", "Tensor")
    raises_naming(lambda: att.sgd_step(m, x, 0.1), "sgd_step", "inputs", "Tensor")


def test_run_local_a_failure_beside_a_rank_that_never_joins_a_collective():
    """Rank 1 raises while rank 0 sleeps outside any collective: rank 1 is named at once and
    rank 0 stopped 2 s later, not at the 60 s timeout, and not said to have run out of it."""
    import time

    def fn(rank):
        if rank == 1:
            raise KeyError("rank one's own")
        time.sleep(60)

    start = time.monotonic()
    with pytest.raises(at.Error) as e:
        att.run_local(fn, 2, timeout=60)
    assert time.monotonic() - start < 10
    first = str(e.value).splitlines()[:2]
    assert first == ["rank 1 of 2 raised KeyError: \"rank one's own\"", "rank 0 of 2 still running 2 s after that "
                                                                         "(stopped)"], first


def test_parallelize_twice_and_run_local_with_a_closure_under_spawn():
    """A second parallelize of the same module was a raw error from its DTensor parameters'
    conversion to NumPy; a closure under start_method='spawn' a raw PicklingError."""
    torch.manual_seed(0)
    m, x = TwoWays(), torch.randn(4, 8)
    sym = att.export(m, x)
    plan = at.plan(sym, devices=2, shapes={"x": (4, 8)})

    def twice(rank):
        mod = att.parallelize(copy.deepcopy(m), plan, sym)
        try:
            att.parallelize(mod, plan, sym)
        except at.Error as e:
            return str(e)

    for text in att.run_local(twice, 2, timeout=60):
        assert text is not None and "already distributed" in text and "TwoWays" in text, text
    raises_naming(lambda: att.run_local(lambda rank: rank, 2, timeout=60, start_method="spawn"),
                  "start_method='spawn'", "pickle")


def _killed_while_sending(rank):
    """Rank 1 returns 64 MB and is SIGKILLed while the bytes are on their way to the parent."""
    import os
    import signal
    import sys
    import threading
    import time

    if rank == 0:
        return "small"
    main = threading.main_thread().ident

    def kill_mid_send():
        while True:
            f, names = sys._current_frames().get(main), set()
            while f is not None:
                names.add(f.f_code.co_name)
                f = f.f_back
            if names & {"_send", "_send_bytes", "send_bytes"}:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.0005)

    threading.Thread(target=kill_mid_send, daemon=True).start()
    return b"x" * (64 << 20)


def test_run_local_a_rank_killed_while_sending_its_result():
    """The parent read every rank's message from one queue whose write end it held itself: a
    rank killed half-way through its result left the parent waiting for the rest forever (no
    timeout applied). Each rank's result now comes on a pipe only that rank writes, so a death
    mid-message is an end of file: rank 1 is named as killed, within the 30 s timeout."""
    import threading

    out = {}

    def call():
        try:
            out["result"] = att.run_local(_killed_while_sending, 2, timeout=30)
        except at.Error as e:
            out["error"] = str(e)

    th = threading.Thread(target=call, daemon=True)
    th.start()
    th.join(90)
    assert not th.is_alive(), "run_local still waiting for the rest of a dead rank's result"
    assert "error" in out, out
    assert out["error"].startswith("rank 1 of 2 was killed by signal SIGKILL"), out["error"][:300]
