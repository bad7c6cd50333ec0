"""``autotile run FILE.onnx`` draws inputs of each input's kind (issue 22): token ids inside the
vocabulary of the table they index (found through the Reshape before the Gather), an
all-true boolean mask and all-ones integer mask, floats for float data. Oracle: onnxruntime's
cross-entropy on the same draws with the file's weights equals the first step's loss."""
import math
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile import cli  # noqa: E402
from autotile.autodiff.objective import training_objective  # noqa: E402

from onnx_models import make_model, run_ort  # noqa: E402

VOCAB, TYPES = 11, 3


def _masked_classifier():
    """ids -> Reshape -> Gather(wte) -> Reshape; + Gather(types table) by token_type_ids;
    where(mask, emb, -1e4) * int mask cast to float; mean over the sequence; logits."""
    rng = np.random.default_rng(0)
    inits = {"wte": rng.standard_normal((VOCAB, 6)).astype(np.float32),
             "tte": rng.standard_normal((TYPES, 6)).astype(np.float32),
             "W": rng.standard_normal((6, 4)).astype(np.float32),
             "flat": np.array([-1], np.int64), "back": np.array([2, 5, 6], np.int64),
             "last": np.array([-1], np.int64), "fill": np.array(-1e4, np.float32)}
    nodes = [helper.make_node("Reshape", ["input_ids", "flat"], ["ids1"]),
             helper.make_node("Gather", ["wte", "ids1"], ["e1"]),
             helper.make_node("Reshape", ["e1", "back"], ["emb"]),
             helper.make_node("Gather", ["tte", "token_type_ids"], ["temb"]),
             helper.make_node("Add", ["emb", "temb"], ["h"]),
             helper.make_node("Unsqueeze", ["mask", "last"], ["mask3"]),
             helper.make_node("Where", ["mask3", "h", "fill"], ["masked"]),
             helper.make_node("Cast", ["attention_mask"], ["am"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["am", "last"], ["am3"]),
             helper.make_node("Mul", ["masked", "am3"], ["kept"]),
             helper.make_node("ReduceMean", ["kept"], ["pooled"], axes=[1], keepdims=0),
             helper.make_node("MatMul", ["pooled", "W"], ["logits"])]
    dtypes = {"input_ids": TensorProto.INT64, "token_type_ids": TensorProto.INT64, "mask": TensorProto.BOOL,
              "attention_mask": TensorProto.INT64}
    return make_model(nodes, {"input_ids": (2, 5), "token_type_ids": (2, 5), "mask": (2, 5),
                              "attention_mask": (2, 5)}, ["logits"], inits, dtypes=dtypes)


def test_synthetic_inputs_are_of_each_inputs_kind():
    sym = at.onnx.load(_masked_classifier())
    values = cli.synthetic_inputs(sym, seed=0)
    ids, types = values["input_ids"], values["token_type_ids"]
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < VOCAB and len(np.unique(ids)) > 2
    assert types.dtype == np.int64 and types.min() >= 0 and types.max() < TYPES
    assert values["mask"].dtype == np.bool_ and values["mask"].all()
    assert values["attention_mask"].dtype == np.int64 and (values["attention_mask"] == 1).all()


def test_autotile_run_on_an_onnx_file_with_ids_and_masks(capsys, tmp_path):
    model = _masked_classifier()
    path = str(tmp_path / "masked.onnx")
    onnx.save(model, path)
    assert cli.main(["run", path, "--devices", "2", "--steps", "2"]) == 0
    losses = [float(v) for v in re.findall(r"step \d+/\d+: loss (-?\d+\.\d+|nan)", capsys.readouterr().out)]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
    # onnxruntime on the CLI's draws: softmax cross-entropy of the logits against its labels
    sym, _ = training_objective(at.onnx.load(path))
    values = cli.synthetic_inputs(sym, 0)
    feeds = {i.name: values[sym.onnx_names[i.name]] for i in model.graph.input}
    logits = np.asarray(run_ort(model, feeds)[0], np.float64)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = values["softmax_label"].astype(int)
    assert losses[0] == pytest.approx(float(-np.mean(np.log(p[np.arange(len(labels)), labels]))), rel=1e-4)
