"""``autotile.backend.run(symbol, devices=K)`` with no params and no inputs (issue 34 item 5):
the weights start as ``autotile run`` starts them (MXNet's initializers, the same arrays for
the same seed) and the data are synthetic, of the model's declared shapes; ``res.stats`` and
one log line say what was made. Before, such a call stopped at "missing inputs [...]" naming
every weight."""
import logging
import os
import re

import numpy as np
import pytest

import autotile as at
from autotile import cli
from autotile.training import softmax_loss
from autotile.training_init import xavier_scale

SEED = 5


def digits_mlp(batch=8):
    return at.models.get("mlp-digits", batch=batch)  # data (batch, 64), 3 layers of 128, 10 classes


def frozen(sym, **kw):
    """One training step with lr 0: the updated params are the step's initial params."""
    return at.backend.run(sym, train=True, optimizer_args={"lr": 0.0}, seed=SEED, **kw)


def test_a_zoo_symbol_trains_with_no_params_or_inputs(caplog):
    sym = digits_mlp()
    with caplog.at_level(logging.INFO, logger="autotile"):
        res = at.backend.run(sym, devices=2, train=True, seed=SEED)
    weights = [a for a in sym.list_arguments() if a not in ("data", "softmax_label")]
    assert sorted(res.stats["initialized"]) == sorted(weights)
    assert res.stats["initialized"]["fc1_weight"] == (128, 64)
    assert res.stats["synthetic_inputs"] == {"data": (8, 64), "softmax_label": (8,)}
    assert sorted(res.grads) == sorted(weights)
    assert all(np.all(np.isfinite(g)) and np.any(g != 0) for k, g in res.grads.items() if k.endswith("weight"))
    lines = [r for r in caplog.records if r.name == "autotile"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    message = lines[0].getMessage()
    assert "initialised 6 parameters" in message and "synthetic data (8, 64)" in message and "\n" not in message


def test_the_initialised_params_and_data_are_the_clis_for_the_same_seed():
    sym = digits_mlp()
    cli_values = cli.synthetic_inputs(sym, SEED)  # what `autotile run --seed 5` starts from
    res = frozen(sym)
    for name in res.stats["initialized"]:
        np.testing.assert_array_equal(res.params[name], cli_values[name], err_msg=name)
    # independently of the CLI: MXNet's rules, Xavier uniform weights and zero biases
    for name, w in res.params.items():
        if name.endswith("_bias"):
            assert not np.any(w), name
        else:
            s = xavier_scale(w.shape)
            assert np.abs(w).max() <= s and np.abs(w).max() > 0.9 * s, name
    # and the data: the forward on the CLI's own arrays is the one on the made ones
    mine = at.backend.run(sym, train=False, seed=SEED).outputs[0]
    theirs = at.backend.run(sym, train=False, seed=SEED, inputs={k: cli_values[k] for k in ("data", "softmax_label")},
                            params={k: v for k, v in cli_values.items() if k.endswith(("weight", "bias"))}).outputs[0]
    np.testing.assert_array_equal(mine, theirs)
    # another seed, other weights
    other = at.backend.run(sym, train=True, optimizer_args={"lr": 0.0}, seed=SEED + 1)
    assert not np.array_equal(other.params["fc1_weight"], res.params["fc1_weight"])


def test_the_first_step_loss_is_the_one_autotile_run_prints(capsys):
    assert cli.main(["run", "mlp-digits", "--batch", "8", "--steps", "1", "--seed", str(SEED)]) == 0
    printed = float(re.search(r"step 1/1: loss ([0-9.]+)", capsys.readouterr().out).group(1))
    sym = digits_mlp()
    out = at.backend.run(sym, train=False, seed=SEED).outputs[0]
    labels = cli.synthetic_inputs(sym, SEED)["softmax_label"]
    assert softmax_loss(out, labels)[0] == pytest.approx(printed, abs=1e-6)


def test_two_devices_equal_one_on_the_synthetic_step():
    sym = digits_mlp()
    one = at.backend.run(sym, devices=1, train=True, seed=SEED)
    two = at.backend.run(sym, devices=2, train=True, seed=SEED)
    assert one.stats["initialized"] == two.stats["initialized"]
    np.testing.assert_allclose(two.outputs[0], one.outputs[0], rtol=1e-5, atol=1e-6)
    assert sorted(two.grads) == sorted(one.grads)
    for name in one.grads:
        np.testing.assert_allclose(two.grads[name], one.grads[name], rtol=1e-4, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(two.params[name], one.params[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_batch_sizes_the_synthetic_data_and_given_inputs_size_the_weights():
    sym = digits_mlp()
    res = at.backend.run(sym, train=False, batch=3)
    assert res.outputs[0].shape == (3, 10) and res.stats["synthetic_inputs"]["data"] == (3, 64)
    x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    res = at.backend.run(sym, train=True, inputs={"data": x, "softmax_label": np.arange(5, dtype=np.float32)})
    assert res.stats["synthetic_inputs"] == {} and res.grads["fc1_weight"].shape == (128, 64)


def test_given_weights_are_kept_and_only_the_missing_ones_made():
    sym = digits_mlp()
    w = np.full((128, 64), 0.01, np.float32)
    sym.params = {"fc1_weight": w}  # a model carrying its own weights (ONNX initializers, .params)
    res = frozen(sym)
    np.testing.assert_array_equal(res.params["fc1_weight"], w)
    assert "fc1_weight" not in res.stats["initialized"] and "fc2_weight" in res.stats["initialized"]


def test_an_incomplete_inputs_or_params_is_still_an_error():
    # given inputs= or params= say "these are mine": a name left out of them is a mistake, not made up
    sym = digits_mlp()
    x = np.zeros((8, 64), np.float32)
    with pytest.raises(at.Error, match="softmax_label"):
        at.backend.run(sym, train=True, inputs={"data": x})
    with pytest.raises(at.Error, match="fc2_weight"):
        at.backend.run(sym, params={"fc1_weight": np.zeros((128, 64), np.float32)})


def test_a_shape_that_cannot_be_inferred_is_an_error_naming_the_input():
    data = at.sym.var("data")  # no shape declared
    sym = at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")
    with pytest.raises(at.Error, match=r"'data'.*batch=.*inputs="):
        at.backend.run(sym, devices=2, train=True)
    with pytest.raises(at.Error, match=r"'data'.*inputs="):
        at.backend.run(sym, batch=4)  # batch= needs a declared shape to resize
    with pytest.raises(at.Error, match="batch must be a positive integer"):
        at.backend.run(digits_mlp(), batch=0)


def test_the_readmes_first_python_block_is_the_bare_call():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "README.md")) as f:
        block = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    first = next(line for line in block.splitlines() if "at.backend.run(" in line)
    assert "inputs=" not in first.split("#")[0] and "params=" not in first.split("#")[0]
    scope = {"at": at}
    exec(first, scope)  # noqa: S102 - the README's own line
    assert scope["res"].stats["synthetic_inputs"] and scope["res"].stats["initialized"]
