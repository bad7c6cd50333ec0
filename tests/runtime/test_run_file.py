"""``autotile run FILE.onnx``: the file's own weights are trained (not random draws), a
classifier without a loss gets a softmax cross-entropy on its logits (and the run says so),
state carries between steps, and ``--inference`` runs partitioned forward passes. Oracle:
onnxruntime on the same inputs with the file's weights."""
import math
import os
import re
import sys

import numpy as np
import pytest

import autotile as at
from autotile import cli
from autotile.autodiff.objective import has_loss, training_objective

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontend"))
MOBILENET = os.path.join(HERE, "..", "fixtures", "onnx_torch", "mobilenet_ts17.onnx")

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _run(capsys, *argv):
    assert cli.main(list(argv)) == 0
    out = capsys.readouterr().out
    return out, [float(v) for v in re.findall(r"step \d+/\d+: (?:loss|output mean) (-?\d+\.\d+|nan)", out)]


def _ort_first_loss(path, batch, seed=0):
    """The first step's cross-entropy as onnxruntime computes it: the data and labels the CLI
    draws (synthetic_inputs of the model with its loss attached), the file's own weights."""
    from onnx_models import run_ort

    model = onnx.load(path)
    sym, _ = training_objective(at.onnx.load(path, batch_size=batch))
    values = cli.synthetic_inputs(sym, seed)
    feeds = {i.name: values[sym.onnx_names[i.name]] for i in model.graph.input
             if i.name not in {t.name for t in model.graph.initializer}}
    out = np.asarray(run_ort(model, feeds)[0], dtype=np.float64)
    if not np.allclose(out.sum(axis=1), 1.0, atol=1e-5):  # logits: softmax them
        out = np.exp(out - out.max(axis=1, keepdims=True))
        out /= out.sum(axis=1, keepdims=True)
    labels = values["softmax_label"].astype(int)
    return float(-np.mean(np.log(out[np.arange(len(labels)), labels]))), float(np.mean(run_ort(model, feeds)[0]))


def _bn_classifier(tmp_path):
    from test_inference import _onnx_cnn

    path = str(tmp_path / "cnn.onnx")
    onnx.save(_onnx_cnn(), path)
    return path


def test_run_onnx_classifier_trains_its_own_weights(capsys, tmp_path):
    path = _bn_classifier(tmp_path)  # ends in Softmax, BatchNormalization with its own running stats
    out, losses = _run(capsys, "run", path, "--devices", "2", "--steps", "3")
    assert "objective: softmax cross-entropy on the logits 'fc_output' (the input of its softmax, 4 x 7)" in out
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    want, _ = _ort_first_loss(path, 4)
    assert losses[0] == pytest.approx(want, rel=1e-5)
    _, single = _run(capsys, "run", path, "--devices", "1", "--steps", "3")
    assert single == pytest.approx(losses, rel=1e-5)


def test_run_torch_exported_mobilenet_on_2_devices(capsys):
    """A torchvision-style CNN (BatchNorm everywhere, logits out) exported by torch.onnx:
    finite, falling losses from its own weights; the first equals onnxruntime's."""
    out, losses = _run(capsys, "run", MOBILENET, "--devices", "2", "--steps", "3", "--batch", "4")
    assert "objective: softmax cross-entropy on the logits" in out and "(its output, 4 x 10)" in out
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    assert losses[0] > losses[1] > losses[2]
    want, _ = _ort_first_loss(MOBILENET, 4)
    assert losses[0] == pytest.approx(want, rel=1e-4)


def test_run_inference_flag_partitions_the_forward_pass(capsys, tmp_path):
    path = _bn_classifier(tmp_path)
    out, means = _run(capsys, "run", path, "--devices", "4", "--inference", "--steps", "2")
    assert "objective" not in out and "plan: 4 devices" in out
    _, want = _ort_first_loss(path, 4)  # the mean of the model's own output (softmax probabilities)
    assert means == pytest.approx([want, want], abs=1e-6)


def test_objective_of_models():
    # a model with a loss keeps it
    zoo = at.models.mlp(4, layers=2, hidden=8, classes=3)
    assert has_loss(zoo) and training_objective(zoo) == (zoo, "the model's own loss (SoftmaxOutput)")
    # logits get a softmax cross-entropy with labels of the batch's shape
    x = at.sym.Variable("data", shape=(5, 6))
    logits = at.sym.FullyConnected(x, num_hidden=3, name="fc")
    sym, text = training_objective(logits)
    assert sym.entries[0][0].op == "SoftmaxOutput" and sym.infer_shape()[1] == [(5, 3)]
    assert "labels 'softmax_label' of shape (5,)" in text
    # anything else trains the sum of its outputs, and says so
    seq = at.sym.Reshape(logits, shape=(5, 3, 1), name="r")
    same, text = training_objective(seq)
    assert same is seq and "sum of the model's outputs" in text
