"""A tampered plan JSON (issue #18, "Silent wrong results"): a split(7) tiling for a 2-D
tensor, devices=0 with factors [2, 2], a tensor the graph does not have. Plan.from_json
checks the plan against itself and transform against its graph, naming the tensor."""
import json

import pytest

import autotile as at
from autotile.errors import Error
from autotile.planner.plan import Plan


def _fc():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


@pytest.fixture(scope="module")
def doc():
    return json.loads(at.plan(_fc(), devices=4, shapes={"data": (8, 6), "softmax_label": (8,)}).to_json())


def _refused(doc, *names):
    text = json.dumps(doc)
    with pytest.raises(Error) as e:
        at.transform(_fc(), Plan.from_json(text))
    assert type(e.value) is Error
    for n in names:
        assert n in str(e.value), str(e.value)


def test_untampered_plan_round_trips(doc):
    eg = at.transform(_fc(), Plan.from_json(json.dumps(doc)))
    assert eg.stats()["pieces"] > 0


def test_split_of_a_dimension_the_tensor_lacks(doc):
    doc = json.loads(json.dumps(doc))
    doc["tensor_tilings"]["fc_weight"] = ["split(7)"] * len(doc["factors"])
    _refused(doc, "fc_weight", "split(7)", "2-D")


def test_zero_devices_with_factors(doc):
    _refused({**doc, "devices": 0, "factors": [2, 2]}, "devices", "0")
    _refused({**doc, "devices": 8}, "factors", "devices=8")
    _refused({**doc, "devices": "4"}, "devices")
    _refused({**doc, "factors": [4, 1], "devices": 4}, "factors")


def test_tiling_count_differs_from_cut_count(doc):
    doc = json.loads(json.dumps(doc))
    doc["tensor_tilings"]["fc_bias"] = ["replicate"] * (len(doc["factors"]) + 1)
    _refused(doc, "fc_bias", "one per cut")


def test_unknown_tensor_is_named(doc):
    doc = json.loads(json.dumps(doc))
    doc["tensor_tilings"]["ghost_tensor"] = ["replicate"] * len(doc["factors"])
    _refused(doc, "ghost_tensor")


def test_renamed_tensor_is_named(doc):
    doc = json.loads(json.dumps(doc))
    doc["tensor_tilings"]["fc_weigth"] = doc["tensor_tilings"].pop("fc_weight")
    _refused(doc, "fc_weigth")


@pytest.mark.parametrize("field,value", [("tensor_tilings", []), ("node_strategies", "x"),
                                         ("tensor_shapes", {"fc_weight": "ab"}), ("input_shapes", [1])])
def test_wrong_field_types(doc, field, value):
    _refused({**doc, field: value}, field if field != "tensor_shapes" else "fc_weight")
