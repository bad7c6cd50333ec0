"""Wrong types or values for the arguments of plan/transform/run (issue #18, "Arguments"):
each gets autotile.Error naming the argument, not Python's own TypeError/AttributeError
from deep inside, and nothing is silently truncated (8.5 is not planned as 8)."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from hostile_util import raises_naming


def _fc():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


SHAPES = {"data": (8, 6), "softmax_label": (8,)}


_raises = raises_naming


def _inputs():
    rng = np.random.default_rng(0)
    return {"data": rng.standard_normal((8, 6)).astype(np.float32), "softmax_label": np.zeros(8, np.float32)}


def _params():
    rng = np.random.default_rng(1)
    return {"fc_weight": rng.standard_normal((4, 6)).astype(np.float32), "fc_bias": np.zeros(4, np.float32)}


@pytest.mark.parametrize("plan", [None, "abc", {"devices": 2}, 3])
def test_transform_refuses_what_is_not_a_plan(plan):
    _raises(lambda: at.transform(_fc(), plan), "plan must be a Plan", type(plan).__name__)


def test_transform_refuses_device_memory_of_wrong_type():
    plan = at.plan(_fc(), devices=2, shapes=SHAPES)
    _raises(lambda: at.transform(_fc(), plan, device_memory="abc"), "device_memory")
    _raises(lambda: at.transform(_fc(), plan, device_memory=[1]), "device_memory")


@pytest.mark.parametrize("shapes,culprit", [
    ({"data": "abc"}, "shapes['data']"),
    ({"data": (8.5, 6)}, "8.5"),
    ({"data": (8, None)}, "None"),
    ({"data": (-8, 6)}, "-8"),
    ({"data": 8}, "shapes['data']"),
    ([("data", (8, 6))], "shapes must be a dict"),
])
def test_plan_refuses_shapes_that_are_not_integer_tuples(shapes, culprit):
    _raises(lambda: at.plan(_fc(), devices=2, shapes=shapes), culprit)


@pytest.mark.parametrize("bandwidths,culprit", [("fast", "bandwidths"), ([None], "bandwidths[0]"),
                                                ([-1.0], "bandwidths[0]"), (5, "bandwidths")])
def test_plan_refuses_bandwidths_of_wrong_type(bandwidths, culprit):
    _raises(lambda: at.plan(_fc(), devices=2, shapes=SHAPES, bandwidths=bandwidths), culprit)


@pytest.mark.parametrize("device_memory", ["abc", [1], -5, True])
def test_plan_refuses_device_memory_of_wrong_type(device_memory):
    _raises(lambda: at.plan(_fc(), devices=2, shapes=SHAPES, device_memory=device_memory), "device_memory")


@pytest.mark.parametrize("devices,kwargs,culprit", [
    (1, {"params": [1, 2]}, "params must be a dict"),
    (1, {"inputs": [1, 2]}, "inputs must be a dict"),
    (1, {"aux": "x"}, "aux must be a dict"),
    (2, {"plan": "x"}, "plan must be a Plan"),
    (True, {}, "devices"),
    (2.0, {}, "devices"),
    (1, {"seed": -1}, "seed must be a non-negative integer"),
    (2, {"seed": -1}, "seed must be a non-negative integer"),
    (1, {"seed": 1.5}, "seed must be a non-negative integer"),
    (1, {"seed": True}, "seed must be a non-negative integer"),
])
def test_run_refuses_arguments_of_wrong_type(devices, kwargs, culprit):
    args = {"inputs": _inputs(), "params": _params(), **kwargs}
    _raises(lambda: at.backend.run(_fc(), devices=devices, **args), culprit)


@pytest.mark.parametrize("devices", [1, 2])
def test_run_names_a_misspelled_param_on_every_device_count(devices):
    params = _params()
    params["fc_weigth"] = params.pop("fc_weight")
    _raises(lambda: at.backend.run(_fc(), devices=devices, inputs=_inputs(), params=params), "fc_weigth")
    extra = {**_params(), "fc2_bias": np.zeros(4, np.float32)}
    _raises(lambda: at.backend.run(_fc(), devices=devices, inputs=_inputs(), params=extra, train=True), "fc2_bias")
    _raises(lambda: at.backend.run(_fc(), devices=devices, inputs={**_inputs(), "dtaa": np.zeros(3)},
                                   params=_params()), "dtaa")
