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
    """One line on stderr for a phase that runs longer than `after` seconds (2): ``autotile:
    <label> ...`` once it has run that long, then `` Ns`` when it ends; nothing for a shorter
    phase, nor when :attr:`quiet` (``-q``) is set."""

    #: set by ``-q``: no progress lines at all
    quiet = False

    def __init__(self, label: str, enabled: Optional[bool] = None, after: float = 2.0):
        self.label = label
        self.enabled = (not Progress.quiet) if enabled is None else enabled
        self.after = after
        self._done = threading.Event()
        self._thread = None
        self._shown = False
        self._lock = threading.Lock()

    def __enter__(self):
        if self.enabled:
            self._start = time.perf_counter()
            self._thread = threading.Thread(target=self._announce, daemon=True)
            self._thread.start()
        return self

    def _announce(self):
        if self._done.wait(self.after):
            return
        with self._lock:
            if not self._done.is_set():
                sys.stderr.write(f"autotile: {self.label} ...")
                sys.stderr.flush()
                self._shown = True

    def __exit__(self, *exc):
        with self._lock:
            self._done.set()
        if self._thread is not None:
            self._thread.join()
            if self._shown:
                sys.stderr.write(f" {time.perf_counter() - self._start:.1f}s\n")
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


def shape_arg(text):
    """--shape: ``NAME=1x3x224x224``, an ONNX input's whole shape (exit 2 when malformed)."""
    name, eq, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        shape = ()
    if not eq or not name.strip() or not shape or any(d < 1 for d in shape):
        raise argparse.ArgumentTypeError(f"expected NAME=DIMS with positive dims joined by x, e.g. "
                                         f"input=1x3x224x224; got {text!r}")
    return name.strip(), shape


def model_help() -> str:
    """What MODEL may be: the zoo's names (``autotile.models.get``), or a model file."""
    from ..models.zoo import known_names

    return "a zoo name (" + "; ".join(known_names()) + "), an .onnx file or an MXNet -symbol.json file"


def model_args(sp, model_help_text: Optional[str] = None) -> None:
    """The MODEL positional, --batch, --seq and --shape (info, plan, run, train)."""
    sp.add_argument("model", metavar="MODEL", help=model_help_text or model_help())
    sp.add_argument("--batch", type=positive_int, default=None,
                    help="batch size (zoo models: 32; ONNX files: the first dim of every data input)")
    sp.add_argument("--seq", type=positive_int, default=None, help="sequence length (zoo sequence models)")
    add_shape_arg(sp)


def add_shape_arg(sp) -> None:
    """--shape NAME=DIMS (repeatable): ONNX inputs' shapes."""
    sp.add_argument("--shape", action="append", default=None, type=shape_arg, metavar="NAME=DIMS",
                    help="an ONNX input's shape, e.g. input=1x3x224x224 (repeatable; sets its symbolic dims)")


def add_quiet_arg(sp) -> None:
    """-q/--quiet: no progress lines on stderr."""
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr (results only)")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with each option's default, except where there is none (None, False)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or isinstance(action.default, list):
            return action.help
        return super()._get_help_string(action)


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
