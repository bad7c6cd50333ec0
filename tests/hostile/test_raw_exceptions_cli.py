"""Issue 31, section 4 (the CLI's and the planner's items): errors that misled or escaped.
Each is exactly autotile.Error naming the field, argument or path at fault, or on the command
line a usage error (exit 2) naming the option; a closed pipe ends a benchmark quietly."""
import json
import math
import os
import subprocess
import sys

import pytest

import autotile as at
from autotile import cli
from autotile.planner.plan import Plan
from hostile_util import raises_naming

SHAPES = {"data": (8, 6), "softmax_label": (8,)}


def _fc():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


@pytest.fixture(scope="module")
def doc():
    return json.loads(at.plan(_fc(), devices=4, shapes=SHAPES).to_json())


def _usage_error(argv, option, capsys, *words):
    """cli.main(argv) exits 2 naming `option` (argparse's 'argument --x:' or the command's usage)."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


# ----------------------------------------------------------------------------- Plan.from_json

def test_plan_json_without_a_tensors_shape_names_the_tensor(doc):
    """It used to load, then tile_shape and to_jax raised KeyError: 'fc_weight'."""
    d = json.loads(json.dumps(doc))
    del d["tensor_shapes"]["fc_weight"]
    raises_naming(lambda: Plan.from_json(json.dumps(d)), "fc_weight", "tensor_shapes")


@pytest.mark.parametrize("field, value", [("comm_bytes", math.nan), ("comm_bytes", -1.0), ("comm_bytes", math.inf),
                                          ("cut_costs", [-128.0, 320.0]), ("cut_costs", [math.nan, 64.0]),
                                          ("cut_costs", [192.0]), ("search_seconds", math.nan),
                                          ("search_seconds", -1.0), ("weighted_cost", math.inf),
                                          ("bandwidths", [0.0, 1e9]), ("optimality_gaps", [-1.0, 0.0])])
def test_plan_json_costs_must_be_finite_and_non_negative(doc, field, value):
    """NaN comm_bytes and negative cut costs used to load (json reads NaN and Infinity)."""
    raises_naming(lambda: Plan.from_json(json.dumps({**doc, field: value})), field)


def test_plan_json_comm_bytes_is_the_sum_of_the_cut_costs(doc):
    raises_naming(lambda: Plan.from_json(json.dumps({**doc, "comm_bytes": doc["comm_bytes"] + 1000})),
                  "comm_bytes", "cut_costs")
    assert Plan.from_json(json.dumps(doc)).comm_bytes == doc["comm_bytes"]


# ----------------------------------------------------------------------------- meshes

@pytest.mark.parametrize("mesh", [{"model": 4, "model.0": 2}, {"model.1": 2, "model": 4}, "model=4,model.0=2"])
def test_mesh_axis_named_as_another_axis_cut_is_refused(mesh):
    """The exports name the cuts of an axis split twice 'model.0', 'model.1': an axis of that
    name gave a mesh with two dimensions called 'model.0'."""
    raises_naming(lambda: at.plan(_fc(), mesh=mesh, shapes=SHAPES), "model", "mesh")


def test_mesh_axis_named_as_another_axis_cut_in_a_plan_json(doc):
    d = {**doc, "mesh": {"model": 2, "model.0": 2}, "cut_axes": ["model", "model.0"]}
    raises_naming(lambda: Plan.from_json(json.dumps(d)), "model.0", "mesh")


def test_cli_mesh_axis_named_as_another_axis_cut(capsys):
    _usage_error(["plan", "mlp-2-16", "--mesh", "model=4,model.0=2"], "--mesh", capsys, "model.0")


# ----------------------------------------------------------------------------- budgets, flags

@pytest.mark.parametrize("budget", [0.5, 0.999, "0.5B", "1e-3"])
def test_device_memory_below_one_byte_is_refused_not_floored(budget):
    """device_memory=0.5 was floored to 0 bytes, then refused as 'got 0' (not what was given)."""
    raises_naming(lambda: at.plan(_fc(), devices=2, shapes=SHAPES, device_memory=budget), "device_memory",
                  repr(budget), "one byte")


def test_cli_memory_below_one_byte_is_a_usage_error(capsys):
    """--memory 1e-3 exited 1 with 'device_memory ... got 0'; a bad flag value is exit 2 naming it."""
    _usage_error(["plan", "mlp-2-16", "--memory", "1e-3"], "argument --memory", capsys, "1e-3")


@pytest.mark.parametrize("flag", ["refine", "train", "replicate_fallback"])
@pytest.mark.parametrize("value", ["no", "False", 0.0, None])
def test_boolean_arguments_must_be_booleans(flag, value):
    """refine="no" was taken as True (a non-empty string)."""
    raises_naming(lambda: at.plan(_fc(), devices=2, shapes=SHAPES, **{flag: value}), flag, repr(value))


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf", "soon"])
def test_cli_run_timeout_must_be_positive(timeout, capsys):
    _usage_error(["run", "mlp-2-16", "--ctx", "mpi", "--timeout", timeout], "argument --timeout", capsys)


@pytest.mark.parametrize("timeout", [-1, 0, math.nan, "5"])
def test_mpi_runtime_timeout_must_be_positive(timeout):
    from autotile.backend.mpi_runtime import check_timeout

    raises_naming(lambda: check_timeout(timeout), "timeout", repr(timeout))
    assert check_timeout(None, env={"AUTOTILE_MPI_TIMEOUT": "12"}) == 12.0
    raises_naming(lambda: check_timeout(None, env={"AUTOTILE_MPI_TIMEOUT": "-3"}), "AUTOTILE_MPI_TIMEOUT", "-3")


# ----------------------------------------------------------------------------- bench memory --budget-gb

@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf", "lots"])
def test_bench_memory_budget_must_be_positive(value, capsys, monkeypatch):
    """0 fell back to the default budget silently, -1 and nan planned for no memory."""
    from autotile.bench import memory_fit

    def ran(*a, **k):
        raise AssertionError("the benchmark ran with --budget-gb " + value)

    monkeypatch.setattr(memory_fit, "budget_table", ran)
    with pytest.raises(SystemExit) as e:
        memory_fit.main(["--budget-gb", value])
    assert e.value.code == 2
    assert "argument --budget-gb" in capsys.readouterr().err


# ----------------------------------------------------------------------------- output files

def test_cli_plan_output_that_cannot_be_written_names_the_file_and_option(capsys, tmp_path):
    """--dtensor /dev/full said only '[Errno 28] No space left on device'."""
    full = "/dev/full" if os.path.exists("/dev/full") else None
    for option in ("--dtensor", "--json"):
        target = full or str(tmp_path / "no-such-dir" / "x.json")
        assert cli.main(["plan", "mlp-2-16", "--devices", "2", "--no-compare", option, target]) == 1
        err = capsys.readouterr().err
        assert option in err and target in err and "Traceback" not in err, err


def test_train_plot_format_that_matplotlib_cannot_write(capsys):
    pytest.importorskip("matplotlib")
    _usage_error(["train", "mlp", "--plot", "c.xyz"], "argument --plot", capsys, "xyz")
    raises_naming(lambda: at.train("mlp-2-16", data="synthetic", epochs=1, plot="c.xyz", out=False), "plot", "c.xyz")


def test_train_plot_and_save_on_one_path(capsys, tmp_path):
    path = str(tmp_path / "out.png")
    _usage_error(["train", "mlp", "--plot", path, "--save", path], "--plot", capsys, "--save")
    raises_naming(lambda: at.train("mlp-2-16", data="synthetic", epochs=1, plot=path, save=path, out=False),
                  "plot", "save", path)


def test_train_plot_to_a_full_device_is_not_written(tmp_path, monkeypatch):
    """--plot /dev/full said 'plot written': savefig's own file writer lost the error."""
    pytest.importorskip("matplotlib")
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    from autotile.training import History, EpochStats, plot_history

    hist = History(model="m", data="d", devices=1, batch=2, lr=0.1)
    hist.epochs.append(EpochStats(1, 1.0, 0.5, 1.0, 0.5, 0.1))
    raises_naming(lambda: plot_history(hist, "/dev/full"), "/dev/full")
    plot_history(hist, str(tmp_path / "ok.png"))
    assert (tmp_path / "ok.png").read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------- closed pipes, memory

def test_bench_into_a_closed_pipe_exits_quietly():
    """`autotile bench ... | head -1`: the benchmark child died with a BrokenPipeError traceback."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(at.__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    script = ("import sys, subprocess\n"
              "p = subprocess.Popen([sys.executable, '-m', 'autotile.cli', 'bench', 'search', '--quick'],"
              " stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
              "p.stdout.readline(); p.stdout.close()\n"  # head -1: the reader goes after the first line
              "err = p.stderr.read().decode()\n"
              "print(p.wait()); print(err)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    code, _, err = out.stdout.partition("\n")
    assert code == "0" and "Traceback" not in err and "BrokenPipe" not in err, out.stdout


def test_run_out_of_memory_is_one_line(capsys, monkeypatch):
    """A MemoryError (NumPy's 'Unable to allocate ...') was a raw traceback: one line, exit 1,
    saying what to change."""
    import autotile.cli as c

    def no_memory(*a, **k):
        raise MemoryError("Unable to allocate 256. MiB for an array with shape (8192, 8192) and data type float32")

    monkeypatch.setattr(c, "synthetic_inputs", no_memory)
    assert cli.main(["run", "mlp-2-16", "--ctx", "mpi"]) == 1
    err = capsys.readouterr().err
    assert "out of memory" in err and "Unable to allocate 256. MiB" in err and "--devices" in err, err


# ----------------------------------------------------------------------------- the smallest budget

def _small_cnn():
    """Issue 31's 'Also': 2 convolutions and an FC layer; batch 8 of 3x16x16 needs 433.5 KB per
    device on 2 devices."""
    x = at.sym.Variable("data")
    c1 = at.sym.Activation(at.sym.Convolution(x, num_filter=16, kernel=(3, 3), pad=(1, 1), name="conv1"),
                           act_type="relu", name="r1")
    c2 = at.sym.Activation(at.sym.Convolution(c1, num_filter=16, kernel=(3, 3), pad=(1, 1), name="conv2"),
                           act_type="relu", name="r2")
    fc = at.sym.FullyConnected(at.sym.Flatten(c2, name="flat"), num_hidden=10, name="fc")
    return at.sym.SoftmaxOutput(fc, name="softmax")


def test_no_plan_error_says_the_smallest_budget_that_works_and_why():
    """Capped at half its need, the CNN gets no plan; the error used to give only the peaks found.
    It now says the smallest budget that works (to within 0.5%), which a bisection over at.plan's
    budgets confirms, and where swapping stopped."""
    shapes = {"data": (8, 3, 16, 16), "softmax_label": (8,)}
    need = max(at.transform(_small_cnn(), at.plan(_small_cnn(), devices=2, shapes=shapes)).core.arena_bytes)
    assert need == 433536

    def fits(budget):
        try:
            at.plan(_small_cnn(), devices=2, shapes=shapes, device_memory=budget)
            return True
        except at.Error:
            return False

    msg = raises_naming(lambda: at.plan(_small_cnn(), devices=2, shapes=shapes, device_memory=need // 2),
                        "the smallest budget that works is", "fc_weight_update", "fc_weight")
    least = int(msg.split("the smallest budget that works is ")[1].split("(")[1].split(" bytes")[0])
    assert fits(least)
    lo, hi = need // 2, need  # bisection over budgets: lo fails, hi fits
    while hi - lo > 64:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    assert lo < least <= hi * 1.005, (least, lo, hi)  # the boundary is in (lo, hi]
    assert not fits(int(least * 0.99))
