"""Arguments the ``autotile`` subcommands share: argparse value types (a bad value is a usage
error, exit 2), the model positional with --batch/--seq, --init/--lr, loading the model, writing
an output file, and the progress indicator."""
from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from typing import List, Optional

from ..errors import Error


class Progress:
    """Shows '<label> ... Ns' on stderr when a step takes more than a second (TTY only)."""

    def __init__(self, label: str, enabled: Optional[bool] = None):
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._done = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.enabled:
            self._start = time.perf_counter()
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self):
        spinner = "|/-\\"
        i = 0
        if self._done.wait(1.0):
            return
        while not self._done.wait(0.2):
            elapsed = time.perf_counter() - self._start
            sys.stderr.write(f"\r{spinner[i % 4]} {self.label} {elapsed:.1f}s")
            sys.stderr.flush()
            i += 1

    def __exit__(self, *exc):
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        return False


def fmt_bytes(n: float) -> str:
    """A byte count as the plan summary writes it (``12.3 MB``)."""
    from ..planner.plan import _fmt_bytes as fmt

    return fmt(n)


def positive_int(text):
    """argparse type of counts (--devices, --batch, --steps, --epochs, --seq): a bad one is a
    usage error (exit 2), not a model error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text):
    """--lr: a positive finite number (a usage error, exit 2, like any bad flag value)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def seed_arg(text):
    """--seed: a non-negative integer (NumPy's generators take no negative seed; exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _checked(parse, text, *extra):
    """`parse(text, *extra)`, its Error turned into argparse's usage error (exit 2)."""
    try:
        return parse(text, *extra)
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def mesh_arg(text):
    """--mesh: named device axes, ``batch=4,model=8``."""
    from ..planner.layout_rules import check_mesh

    return _checked(check_mesh, text)


def memory_arg(text):
    """--memory: a per-device byte budget, ``16GiB``."""
    from ..planner.memory_fit import parse_bytes

    return _checked(parse_bytes, text, "--memory")


def layout_arg(text):
    """--layout: one rule ``PATTERN:DIM=AXIS``."""
    from ..planner.layout_rules import parse_rule

    return _checked(parse_rule, text)


def plot_arg(text):
    """--plot: a file whose format matplotlib writes (exit 2 before training otherwise)."""
    from ..training import check_plot_path

    return _checked(check_plot_path, text, "the plot")


def bandwidths_arg(text: str) -> List[float]:
    """--bandwidths: comma-separated numbers (a bad list is a usage error, exit 2)."""
    try:
        return [float(b) for b in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, e.g. 12.5e9,300e9; got {text!r}") from None


def write_output(option: str, path: str, text: str) -> None:
    """Write `text` to the file `path` of `option`; an Error names both (a full disk, a
    directory that does not exist), not only the errno's words."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise Error(f"{option}: cannot write '{path}': {e.strerror or e}") from None


DTYPES = ["float32", "bfloat16", "float16"]


def model_args(sp) -> None:
    """The MODEL positional, --batch and --seq (info, plan, run)."""
    sp.add_argument("model", help="zoo name (mlp, alexnet, vgg16, wresnet-152-10, rnn-10-8k), .onnx or -symbol.json")
    sp.add_argument("--batch", type=positive_int, default=None, help="batch size")
    sp.add_argument("--seq", type=positive_int, default=None, help="sequence length (zoo sequence models)")


def add_init_args(sp) -> None:
    """--init and --lr (``autotile run`` and ``autotile train``)."""
    from ..training_init import INITIALIZERS

    sp.add_argument("--init", default="xavier", choices=INITIALIZERS,
                    help="weight initializer (MXNet's: xavier = Xavier(uniform, avg, 3), normal = N(0, 0.01^2), "
                         "uniform = U(-0.07, 0.07)); biases 0, BatchNorm gamma 1")
    sp.add_argument("--lr", type=positive_float, default=0.1, help="SGD learning rate (gradients averaged over the batch)")


def add_dtype_arg(sp) -> None:
    """--dtype (``autotile run`` and ``autotile train``)."""
    sp.add_argument("--dtype", default="float32", choices=DTYPES,
                    help="mixed precision, fp32 master weights; float16 with loss scaling (docs/mixed-precision.md)")


def load_model(args):
    """The Symbol of ``args.model`` sized by --batch and, for zoo models with a sequence length
    (transformers), --seq; Error when --seq is given to a model that takes none."""
    from ..model_input import as_symbol

    seq = getattr(args, "seq", None)
    if seq is None:
        return as_symbol(args.model, batch=args.batch)
    import os

    from .. import models

    if os.path.exists(args.model) or args.model.endswith((".onnx", ".json")):
        raise Error(f"--seq sizes zoo models; '{args.model}' is a file, whose shapes are its own")
    try:
        return models.get(args.model, batch=args.batch, seq=seq)
    except TypeError as e:
        if "seq" not in str(e):
            raise
        raise Error(f"model '{args.model}' takes no sequence length (--seq is for sequence models such as "
                    f"gpt2-small, bert-base, llama-7b)") from None
