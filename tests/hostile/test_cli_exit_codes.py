"""CLI exit statuses (issue #18, "Arguments"): a count that is not a positive integer is a
usage error, exit 2 with argparse's message naming the option (the README: 0 success, 1 model
or plan error, 2 bad usage); `run --steps -1` used to exit 0 having done nothing."""
import pytest

from autotile import cli


@pytest.mark.parametrize("argv,option", [
    (["plan", "mlp", "--batch", "-5", "--devices", "2"], "--batch"),
    (["plan", "mlp", "--devices", "0"], "--devices"),
    (["plan", "mlp", "--devices", "two"], "--devices"),
    (["run", "mlp-2-16", "--steps", "-1", "--batch", "8"], "--steps"),
    (["run", "mlp-2-16", "--devices", "-2"], "--devices"),
    (["info", "mlp", "--batch", "0"], "--batch"),
])
def test_bad_counts_are_usage_errors(argv, option, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected a positive integer" in err


def test_a_model_error_is_exit_1(capsys):
    """An unknown model is a model error, not usage: exit 1, naming it."""
    assert cli.main(["plan", "no-such-model-xyz", "--devices", "2"]) == 1
    assert "no-such-model-xyz" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "train"])
@pytest.mark.parametrize("lr", ["-1", "0", "nan", "inf", "fast"])
def test_a_learning_rate_that_is_not_positive_is_a_usage_error(command, lr, capsys):
    """Like any bad flag value: exit 2 naming --lr, before a model is built."""
    with pytest.raises(SystemExit) as e:
        cli.main([command, "mlp-2-16", "--lr", lr])
    assert e.value.code == 2
    assert "argument --lr: expected a positive finite number" in capsys.readouterr().err
