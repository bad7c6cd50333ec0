"""``autotile.jax.training_step`` on hostile arguments (issue 31): labels outside the class
range, integer or string parameters, parameters passed as a list, float64 weights under
``JAX_ENABLE_X64``. Each must be refused as exactly autotile.Error naming the argument, or
give what ``autotile.backend.run`` gives for the same arguments (the oracle: autotile's
NumPy step on one device).

The JAX side runs in one child process per environment: the host device count (and x64)
must be set before jax is first imported."""
import json
import os

import pytest

from subprocess_util import run_python

pytest.importorskip("jax", reason="jax is not installed (pip install 'autotile[jax]'; CI installs it)")

#: the child: a 4-class FullyConnected head (and a small CNN) planned on 4 devices; prints
#: {case: {"error": type and message} or results}
_CHILD = r"""
import json, sys
import numpy as np
import autotile as at
import autotile.jax as atj

out = {}
rng = np.random.default_rng(0)


def fc(**so):
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax", **so)


def attempt(name, fn):
    try:
        out[name] = fn()
    except Exception as e:  # the test asserts the exact type
        out[name] = {"error": type(e).__name__ + ": " + str(e)}


def err(a, b):
    return max(float(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)).max()) for k in b)


shapes = {"data": (8, 6), "softmax_label": (8,)}
x = rng.standard_normal((8, 6)).astype(np.float32)
params = {"fc_weight": rng.standard_normal((4, 6)).astype(np.float32), "fc_bias": np.zeros(4, np.float32)}


def labels(bad):
    lab = np.array([0, 1, 2, 3, 0, 1, 2, 3], np.float32)
    lab[5] = bad
    return lab


if sys.argv[1] == "x64":
    # float64 weights of a small CNN under JAX_ENABLE_X64: the step against backend.run's
    v = at.sym.Variable("data")
    v = at.sym.Convolution(v, num_filter=3, kernel=(3, 3), pad=(1, 1), name="conv0")
    v = at.sym.Convolution(v, num_filter=3, kernel=(3, 3), pad=(1, 1), name="conv")  # its data gradient too
    v = at.sym.Pooling(at.sym.Activation(v, act_type="relu"), kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = at.sym.SoftmaxOutput(at.sym.FullyConnected(at.sym.Flatten(v), num_hidden=4, name="fc"), name="softmax")
    cshapes = {"data": (8, 2, 6, 6), "softmax_label": (8,)}
    cparams = {"conv0_weight": rng.standard_normal((3, 2, 3, 3)) * 0.3, "conv0_bias": rng.standard_normal(3) * 0.1,
               "conv_weight": rng.standard_normal((3, 3, 3, 3)) * 0.3, "conv_bias": rng.standard_normal(3) * 0.1,
               "fc_weight": rng.standard_normal((4, 27)) * 0.3, "fc_bias": rng.standard_normal(4) * 0.1}
    plan = at.plan(net, devices=4, shapes=cshapes)
    step = atj.training_step(net, plan)
    for data in ("float32", "float64"):  # float32 data: the gradients are float32 (as in the registry)
        feeds = {"data": rng.standard_normal(cshapes["data"]).astype(data),
                 "softmax_label": rng.integers(0, 4, 8).astype(np.float32)}

        def x64(feeds=feeds):
            ref = at.backend.run(net, devices=1, inputs=feeds, params=cparams, train=True)
            _, new = step(cparams, feeds)
            return {"err": err(new, ref.params), "dtypes": sorted({str(np.asarray(v).dtype) for v in new.values()}),
                    "ref_dtypes": sorted({str(v.dtype) for v in ref.params.values()}),
                    "moved": err(new, cparams)}
        attempt(f"x64-{data}", x64)
    json.dump(out, sys.stdout)
    sys.exit(0)

plan = at.plan(fc(), devices=4, shapes=shapes)
step = atj.training_step(fc(), plan)
for bad in (99, -1, 4, float("nan"), float("inf")):
    attempt(f"label {bad}", lambda bad=bad: step(params, {"data": x, "softmax_label": labels(bad)}) and {"trained": True})
    try:
        at.backend.run(fc(), devices=1, inputs={"data": x, "softmax_label": labels(bad)}, params=params, train=True)
        out[f"label {bad}"]["run"] = "trained"
    except at.Error as e:
        out[f"label {bad}"]["run"] = str(e)

# ignored rows may carry any label (use_ignore), as in backend.run: same new parameters
ign = fc(use_ignore=True, ignore_label=-1)
ign_plan = at.plan(ign, devices=4, shapes=shapes)
lab = labels(-1)
ref = at.backend.run(ign, devices=1, inputs={"data": x, "softmax_label": lab}, params=params, train=True)
attempt("ignored -1", lambda: {"err": err(atj.training_step(ign, ign_plan)(params, {"data": x, "softmax_label": lab})[1],
                                          ref.params)})

# a label of a jitted caller's tracer has no value: the step still traces (no host check)
import jax
attempt("traced labels", lambda: {"shape": list(jax.jit(lambda p, i: step(p, i)[1]["fc_weight"])(
    params, {"data": x, "softmax_label": labels(1)}).shape)})

# integer parameters: backend.run casts them to the model's float32 and trains them
ints = {"fc_weight": (params["fc_weight"] * 10).astype(np.int32), "fc_bias": np.array([1, -2, 3, 0], np.int32)}
feeds = {"data": x, "softmax_label": labels(1)}
ref = at.backend.run(fc(), devices=1, inputs=feeds, params=ints, train=True)


def int_params():
    _, new = step(ints, feeds)
    return {"err": err(new, ref.params), "dtypes": sorted({str(np.asarray(v).dtype) for v in new.values()}),
            "moved": float(np.abs(np.asarray(new["fc_weight"], np.float64) - ints["fc_weight"]).max())}


attempt("int32 params", int_params)
attempt("params list", lambda: step([params["fc_weight"], params["fc_bias"]], feeds) and {"trained": True})
attempt("params str", lambda: step("fc_weight", feeds) and {"trained": True})
attempt("inputs list", lambda: step(params, [x, labels(1)]) and {"trained": True})
attempt("param of strings", lambda: step({**params, "fc_bias": np.array(["a", "b", "c", "d"])}, feeds) and {"trained": True})
attempt("param a string", lambda: step({**params, "fc_weight": "weights.npy"}, feeds) and {"trained": True})
attempt("input of objects", lambda: step(params, {**feeds, "data": np.full((8, 6), None, object)}) and {"trained": True})
attempt("param ragged", lambda: step({**params, "fc_bias": [[0.0], [0.0, 1.0], [0.0], [0.0]]}, feeds) and {"trained": True})
for name, kwargs in (("unconstrained int", {"unconstrained": 5}), ("devices int", {"devices": 3}),
                     ("devices of ints", {"devices": [0, 1, 2, 3]}), ("optimizer_args str", {"optimizer_args": "lr=0.1"})):
    attempt(name, lambda kwargs=kwargs: atj.training_step(fc(), plan, **kwargs) and {"built": True})
json.dump(out, sys.stdout, default=str)
"""


def _child(case: str, **env):
    e = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu", **env)
    proc = run_python(_CHILD, case, env=e, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def report():
    return _child("fc")


def _error(r):
    assert "error" in r, f"not refused: {r}"
    assert r["error"].startswith("Error: "), r["error"]  # exactly autotile.Error, not a raw exception
    return r["error"]


@pytest.mark.parametrize("bad", ["99", "-1", "4", "nan", "inf"])
def test_labels_outside_the_class_range_are_refused(report, bad):
    """backend.run refuses them (its SoftmaxOutput gradient kernel); the JAX step trained on
    them (99 and -1 as an all-zero target row)."""
    r = report[f"label {bad}"]
    msg = _error(r)
    assert "softmax_label" in msg and "[0, 4)" in msg and bad in msg, msg
    assert "out of range [0, 4)" in r["run"], r["run"]  # the oracle refuses them too


def test_ignored_labels_still_train_as_backend_run(report):
    assert report["ignored -1"]["err"] < 1e-6, report["ignored -1"]


def test_labels_of_a_jitted_caller_still_trace(report):
    assert report["traced labels"] == {"shape": [4, 6]}


def test_integer_parameters_train_as_backend_run(report):
    """backend.run casts integer parameters to the model's float32 and trains them; the JAX
    step returned int32 parameters with the update truncated to 0."""
    r = report["int32 params"]
    assert r["dtypes"] == ["float32"] and r["err"] < 1e-5 and r["moved"] > 1e-3, r


@pytest.mark.parametrize("case,names", [("params list", ["params", "dict", "list"]),
                                        ("params str", ["params", "dict", "str"]),
                                        ("inputs list", ["inputs", "dict", "list"]),
                                        ("param of strings", ["fc_bias"]),
                                        ("param a string", ["fc_weight"]),
                                        ("input of objects", ["data", "object"]),
                                        ("param ragged", ["fc_bias"]),
                                        ("unconstrained int", ["unconstrained", "int"]),
                                        ("devices int", ["devices", "int"]),
                                        ("devices of ints", ["devices", "int"]),
                                        ("optimizer_args str", ["optimizer_args", "dict", "str"])])
def test_bad_argument_types_are_named(report, case, names):
    msg = _error(report[case])
    for n in names:
        assert n in msg, msg


def test_float64_cnn_weights_under_x64_equal_backend_run():
    """float64 weights with JAX_ENABLE_X64 (float32 or float64 data): XLA convolves equal
    dtypes only (float32 data against float64 weights was a TypeError), and the convolution
    gradients' vjp took no float32 cotangent against a float64 output. backend.run computes
    in the promoted dtype and casts back to the data's (gradients float32 with float32 data)."""
    r = _child("x64", JAX_ENABLE_X64="1")
    for data, tol in (("float32", 1e-6), ("float64", 1e-12)):
        res = r[f"x64-{data}"]
        assert "error" not in res, res
        assert res["dtypes"] == res["ref_dtypes"] == ["float64"] and res["err"] < tol and res["moved"] > 1e-3, res
