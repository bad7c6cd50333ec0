"""Arguments that used to escape as Python's own OverflowError, ValueError, TypeError or
AttributeError, or as a traceback from a benchmark's child (issue #25), and a plan whose
budget the user never gave being reported as their argument. Each must be exactly
autotile.Error naming the argument (exit 2 for a usage error on the CLI)."""
import json

import numpy as np
import pytest

import autotile as at
from autotile.planner.plan import Plan
from autotile.planner.swap_search import genetic_schedule
from hostile_util import raises_naming
from subprocess_util import run_cli

SHAPES = {"data": (8, 6), "softmax_label": (8,)}


def _fc():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


@pytest.fixture(scope="module")
def plan():
    return at.plan(_fc(), devices=4, shapes=SHAPES)


@pytest.mark.parametrize("budget", ["1e309", "1e30GiB", 1e300, 2 ** 64])
def test_device_memory_beyond_any_device(plan, budget):
    raises_naming(lambda: at.plan(_fc(), devices=2, shapes=SHAPES, device_memory=budget), "device_memory",
                  "more than any device holds")
    raises_naming(lambda: at.transform(_fc(), plan, device_memory=budget), "device_memory")


def test_cli_memory_beyond_any_device_is_a_usage_error():
    proc = run_cli("plan", "mlp-2-16", "--devices", "2", "--memory", "1e309")
    assert proc.returncode == 2, proc.stderr
    assert "--memory" in proc.stderr and "1e309" in proc.stderr and "Traceback" not in proc.stderr


def test_tampered_cut_axes_naming_an_unknown_axis(plan):
    doc = json.loads(plan.to_json())
    raises_naming(lambda: Plan.from_json(json.dumps({**doc, "cut_axes": ["devices", "zz"]})), "cut_axes", "'zz'")
    raises_naming(lambda: Plan.from_json(None), "Plan.from_json", "NoneType")


@pytest.mark.parametrize("kwargs, name", [({"time_limit": "x"}, "time_limit"), ({"mutation": "x"}, "mutation"),
                                          ({"temperature": "x"}, "temperature"), ({"profile": None}, "profile"),
                                          ({"profile": "nope"}, "nope"), ({"seed": "x"}, "seed"),
                                          ({"mutation": float("nan")}, "mutation"), ({"time_limit": -1}, "time_limit")])
def test_genetic_schedule_arguments(plan, kwargs, name):
    raises_naming(lambda: genetic_schedule(_fc(), plan, budget=10 ** 6, generations=1, population=2, log=False,
                                           **kwargs), name)


@pytest.mark.parametrize("order", [5, "fc", 2.5])
def test_transform_order_that_is_not_a_list(plan, order):
    raises_naming(lambda: at.transform(_fc(), plan, order=order), "order")


@pytest.mark.parametrize("lr", ["x", None, float("nan"), float("inf"), 0, -1, True])
def test_train_learning_rate(lr):
    raises_naming(lambda: at.train("mlp", data="synthetic", lr=lr, epochs=1, out=False), "learning rate", repr(lr))


def test_train_other_arguments():
    raises_naming(lambda: at.train("mlp", data="synthetic", seed="x", epochs=1, out=False), "seed", "'x'")
    raises_naming(lambda: at.train("mlp", data="synthetic", plot=5, epochs=1, out=False), "plot", "int")


def test_bench_with_an_unknown_profile_is_a_usage_error_without_traceback():
    proc = run_cli("bench", "speedup", "--quick", "--profile", "nope")
    assert proc.returncode == 2, proc.stderr
    assert "--profile" in proc.stderr and "'nope'" in proc.stderr and "p2.8xlarge" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_error_is_one_line(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{")
    proc = run_cli("bench", "mlp", "--quick", "--profile", str(bad))
    assert proc.returncode == 2, proc.stderr
    assert str(bad) in proc.stderr and "not valid JSON" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("budget", [0, -5])
def test_swap_budget_zero_or_negative_is_refused_naming_the_field(plan, budget):
    doc = json.loads(plan.to_json())
    msg = raises_naming(lambda: Plan.from_json(json.dumps({**doc, "swap_budget": budget})), "swap_budget", str(budget))
    assert "device_memory" not in msg


def test_a_budget_from_the_plan_is_named_as_the_plans(plan):
    """A plan's own swap_budget that the graph cannot meet is reported as the plan's, not as a
    device_memory argument the user never passed."""
    tight = Plan.from_json(json.dumps({**json.loads(plan.to_json()), "swap_budget": 8}))
    msg = raises_naming(lambda: at.transform(_fc(), tight), "the plan's swap_budget")
    assert "device_memory" not in msg
    raises_naming(lambda: at.transform(_fc(), plan, device_memory=8), "device_memory=")


# ----------------------------------------------------------------------------- first round's leftovers

@pytest.mark.parametrize("data", ["a str", None, 5, ["x"]])
def test_nd_loads_of_what_is_not_bytes(data):
    raises_naming(lambda: at.nd.loads(data), "nd.loads", type(data).__name__)


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("value", [np.full((8, 6), "1.5"), "abc", np.full((8, 6), None, dtype=object),
                                   [[b"x"] * 6] * 8])
def test_string_or_object_data_to_backend_run(devices, value):
    params = {"fc_weight": np.zeros((4, 6), np.float32), "fc_bias": np.zeros(4, np.float32)}
    raises_naming(lambda: at.backend.run(_fc(), devices=devices, inputs={"data": value, "softmax_label": np.zeros(8)},
                                         params=params), "input 'data'", "not numbers")


@pytest.mark.parametrize("attrs, named", [({"kernel": (3, 3, 3, 3, 3)}, "'kernel'=(3, 3, 3, 3, 3)"),
                                          ({"kernel": (3, 3), "stride": (0, 0)}, "'stride'=(0, 0)")])
def test_bad_convolution_attributes_are_named_at_the_convolution(attrs, named):
    """Not at the Flatten after it, whose gradient lacks the shape the convolution never gave."""
    conv = at.sym.Convolution(at.sym.Variable("data"), num_filter=4, name="conv", **attrs)
    net = at.sym.SoftmaxOutput(at.sym.FullyConnected(at.sym.Flatten(conv, name="flat"), num_hidden=2, name="fc"),
                               name="softmax")
    msg = raises_naming(lambda: at.plan(net, devices=2, shapes={"data": (2, 3, 8, 8), "softmax_label": (2,)}),
                        "node 'conv'", "Convolution", named)
    assert "flat" not in msg


@pytest.mark.parametrize("kwargs, names", [({"dtypes": 5}, ["dtypes", "int"]),
                                           ({"optimizer_args": 5}, ["optimizer_args"]),
                                           ({"dtypes": {"data": "nope"}}, ["dtypes['data']", "'nope'"])])
def test_transform_dicts(plan, kwargs, names):
    raises_naming(lambda: at.transform(_fc(), plan, **kwargs), *names)


def test_save_paths_that_are_not_paths():
    raises_naming(lambda: at.nd.save(None, {"a": np.zeros(2)}), "nd.save", "NoneType")
    raises_naming(lambda: _fc().save(None), "sym.save", "NoneType")


def test_numpy_integers_are_counts_and_sizes():
    p = at.plan(_fc(), devices=np.int64(2), shapes=SHAPES, device_memory=np.int64(10 ** 9))
    assert p.devices == 2 and type(p.devices) is int and p.device_memory == 10 ** 9


@pytest.mark.parametrize("command", ["run", "train"])
def test_cli_negative_seed_is_a_usage_error(command):
    proc = run_cli(command, "mlp-2-16" if command == "run" else "mlp", "--seed", "-1")
    assert proc.returncode == 2 and "--seed" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
