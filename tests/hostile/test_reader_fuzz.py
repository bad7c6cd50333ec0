"""Fuzz the file readers (issue #13 item 13, issue #18 "Readers"): symbol JSON, `.params`
and plan JSON, mutated by truncation, bit flips, huge or negative numbers, deep nesting and
values of the wrong type. Each reader must either read the file or raise autotile.Error;
any other exception, a crash or a runaway allocation fails. The fuzzing runs in a child
process under a 3 GiB address-space limit, so a reader that allocates what a header claims
dies there (and fails this test) instead of taking the machine down."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotile as at
from autotile.errors import Error
from autotile.planner.plan import Plan

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY_LIMIT = 3 << 30
EXAMPLES = int(os.environ.get("AUTOTILE_FUZZ_EXAMPLES", "150"))

_ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                        st.text(max_size=8), st.just([]), st.just({}), st.just([[-1, 0, 0]]),
                        st.just("[" * 50 + "]" * 50), st.just(2 ** 63), st.just(-1))


def _net():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


_SHAPES = {"data": (4, 6), "softmax_label": (4,)}
_SYMBOL = _net().tojson().encode()
_PARAMS = at.nd.dumps({"fc_weight": np.arange(24, dtype=np.float32).reshape(4, 6),
                       "fc_bias": np.zeros(4, np.float64), "step": np.array(3, np.int32)})
_PLAN = at.plan(_net(), devices=2, shapes=_SHAPES).to_json().encode()


def _mutate_bytes(data: bytes, draw) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "splice"]))
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data)))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    at_ = draw(st.integers(0, len(data)))
    if kind == "overwrite":  # a huge or negative little-endian integer where a field was
        value = draw(st.sampled_from([2 ** 63 - 1, -1, -2 ** 31, 2 ** 62, 2 ** 32, 0x7FFFFFFF, 33]))
        width = draw(st.sampled_from([4, 8]))
        raw = (value % (1 << (8 * width))).to_bytes(width, "little")
        return data[:at_] + raw + data[at_ + width:]
    return data[:at_] + draw(st.binary(max_size=16)) + data[at_:]


def _paths(doc):
    """Every (container, key) in a parsed JSON document."""
    stack, out = [doc], []
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k))
            stack.append(v)
    return out


def _mutate_json(data: bytes, draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "value", "nest", "drop"]))
    if kind == "bytes":
        return _mutate_bytes(data, draw)
    doc = json.loads(data)
    if kind == "nest":
        depth = draw(st.sampled_from([10, 1000, 100_000]))
        return ('{"nodes": ' + "[" * depth + "]" * depth + ', "heads": [], "format": "autotile-plan-1"}').encode()
    paths = _paths(doc)
    container, key = paths[draw(st.integers(0, len(paths) - 1))]
    if kind == "drop":
        del container[key]
    else:
        container[key] = draw(_ODD_VALUES)
    return json.dumps(doc).encode()


def _only_errors(read, data: bytes):
    try:
        read(data)
    except Error:
        pass


def _read_symbol(data: bytes):
    with tempfile.NamedTemporaryFile("wb", suffix="-symbol.json", delete=False) as f:
        f.write(data)
    try:
        sym = at.sym.load(f.name)
    finally:
        os.unlink(f.name)
    sym.list_arguments()
    sym.infer_shape(data=(4, 6))


def _read_plan(data: bytes):
    plan = Plan.from_json(data.decode("utf-8", errors="replace"))
    plan.summary()
    at.transform(_net(), plan)


FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.data())
def fuzz_symbol_json(data):
    _only_errors(_read_symbol, _mutate_json(_SYMBOL, data.draw))


@FUZZ
@given(st.data())
def fuzz_params(data):
    _only_errors(lambda b: at.nd.loads(b, "fuzz.params"), _mutate_bytes(_PARAMS, data.draw))


@FUZZ
@given(st.data())
def fuzz_plan_json(data):
    _only_errors(_read_plan, _mutate_json(_PLAN, data.draw))


def _child(name: str):
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    globals()[name]()


@pytest.mark.parametrize("target", ["fuzz_symbol_json", "fuzz_params", "fuzz_plan_json"])
def test_reader_fuzz_raises_only_autotile_error(target):
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_reader_fuzz as t; t._child({target!r})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(HERE, "..", "..", "python"),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"{target} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
