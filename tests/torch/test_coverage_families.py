"""The PyTorch coverage table, a test per family (autotile.torch.families: torch.nn layers,
ResNet-18 and MobileNetV3 as small nn.Modules, Hugging Face models from tiny configs with
random weights): planned by autotile.torch.runnable.runnable_plan and trained one SGD step
on 4 and 8 gloo ranks, which must equal the plain module's step in the same process
(output, every gradient and every updated parameter, per parameter name:
autotile.torch.compare_step), or be refused at plan time by an autotile.Error naming the
module and the op.

Oracle: the plain module's own SGD step (torch autograd, one process). The default set runs
one family on 4 ranks (a 1-layer BERT); the rest are slow (minutes each on 2 cores)."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotile[torch]')")
pytest.importorskip("transformers", reason="the Hugging Face families need transformers")
pytest.importorskip("torch.distributed.tensor", reason="this torch has no torch.distributed.tensor")

from autotile.torch.coverage import check_family  # noqa: E402
from autotile.torch.families import FAMILIES  # noqa: E402

#: families whose step does not run as planned and is refused at plan time (the table's gaps)
GAPS = {}


def _check(family, devices):
    row = check_family(family, devices)
    if family in GAPS:
        assert row["status"] == "refused", row
        assert "module '" in row["reason"] and "op " in row["reason"], row["reason"]
        return row
    assert row["status"] == "pass", row.get("reason", row)
    # the step moved data where the plan does, and the plan planned it
    assert row["plan_bytes"] > 0 and row["dtensor_bytes"] > 0, row
    return row


def test_bert_on_4_gloo_ranks():
    row = _check("BERT", 4)
    assert row["params"] >= 20


@pytest.mark.slow
@pytest.mark.parametrize("devices", [4, 8])
@pytest.mark.parametrize("family", [f for f in FAMILIES])
def test_family(family, devices):
    if (family, devices) == ("BERT", 4):
        pytest.skip("in the default set: test_bert_on_4_gloo_ranks")
    _check(family, devices)
