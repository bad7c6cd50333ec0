"""``--seq`` on plan/run/info reaches the zoo builders of sequence models and is refused, naming
the model, for models that take none."""
import pytest

from autotile import cli


def test_seq_sizes_a_sequence_model(capsys):
    assert cli.main(["info", "gpt2-small", "--batch", "2", "--seq", "16"]) == 0
    out = capsys.readouterr().out
    assert "inputs: data(2, 16)" in out and "parameters: 124,439,808" in out
    assert cli.main(["info", "gpt2-small", "--batch", "2", "--seq", "24"]) == 0
    assert "inputs: data(2, 24)" in capsys.readouterr().out


def test_seq_refused_for_models_without_one(capsys):
    assert cli.main(["info", "mlp-2-16", "--seq", "16"]) == 1
    assert "model 'mlp-2-16' takes no seq" in capsys.readouterr().err
    assert cli.main(["plan", "model.onnx", "--seq", "16"]) == 1
    assert "'model.onnx' is a file, whose shapes are its own" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # a usage error
        cli.main(["info", "gpt2-small", "--seq", "0"])
    assert e.value.code == 2 and "--seq: expected a positive integer, got 0" in capsys.readouterr().err
