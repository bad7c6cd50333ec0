"""``autotile train`` and ``autotile.train(...)``: train a zoo classifier on a real (or synthetic)
data set on k devices, with loss and accuracy per epoch, a plot and an MXNet checkpoint.

    import autotile as at
    hist = at.train("mlp", data="digits", devices=2, epochs=5, plot="curve.png", save="digits.params")
    hist.epochs[-1].test_accuracy

Every step runs through :func:`autotile.backend.run` (on k > 1 devices with one plan made before
the first step), with SGD on the gradient of the mean loss over the batch (:func:`batch_rescale`:
rescale_grad = 1/batch for MXNet's summing heads, as its Module sets it up) and parameters
initialised as MXNet's initializers do (:mod:`autotile.training_init`). Test-set figures come
from a forward pass on one device after each epoch. On ``--data digits``, ``mlp`` and ``cnn``
name the zoo's ``mlp-digits`` and ``cnn-digits``.
"""
from __future__ import annotations

import math
import numbers
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from .arguments import check_seed
from .errors import Error, install_hint


@dataclass
class EpochStats:
    """Figures of one epoch: mean loss and accuracy over its training steps (each step's outputs
    are computed before its update, as MXNet's Module.fit measures them) and on the test set."""

    epoch: int
    train_loss: float
    train_accuracy: float
    test_loss: float
    test_accuracy: float
    seconds: float


@dataclass
class History:
    """What :func:`train` returns: per-epoch figures, the loss of every step, final parameters."""

    model: str
    data: str
    devices: int
    batch: int
    lr: float
    epochs: List[EpochStats] = field(default_factory=list)
    step_losses: List[float] = field(default_factory=list)
    params: Dict[str, np.ndarray] = field(default_factory=dict)
    aux: Dict[str, np.ndarray] = field(default_factory=dict)

    def epoch_line(self, e: EpochStats, total: int) -> str:
        """``epoch i/N: train loss .. acc ..%  test loss .. acc ..%  Ts``."""
        return (f"epoch {e.epoch}/{total}: train loss {e.train_loss:.4f} acc {100 * e.train_accuracy:.1f}%  "
                f"test loss {e.test_loss:.4f} acc {100 * e.test_accuracy:.1f}%  {e.seconds:.1f}s")


#: loss heads whose gradient sums over the batch unless their ``normalization`` says otherwise
_NORMALIZED_HEADS = ("SoftmaxOutput", "MakeLoss")


def batch_rescale(sym, batch: int) -> float:
    """The ``rescale_grad`` that makes a step of `sym` train the mean of its loss over the
    batch, the one gradient convention of :func:`autotile.backend.run` (``loss=``), ``autotile
    run`` and ``autotile train`` (torch's ``reduction="mean"``): 1 when the loss heads already
    average (the losses :func:`autotile.losses.attach_loss` attaches, ``SoftmaxOutput`` or
    ``MakeLoss`` with ``normalization="batch"`` or ``"valid"``, and a graph whose outputs are
    single numbers: a loss reduced inside the model, as an ONNX export of a module that returns
    its loss), 1/batch when a head sums over
    the batch as MXNet's defaults do (``normalization="null"``, the regression outputs): the
    rescale MXNet's Module applies."""
    if getattr(sym, "loss", None) is not None:  # attach_loss: a mean by construction
        return 1.0
    heads = [node for node, _ in sym.entries if not node.is_variable]
    if heads and all(h.op in _NORMALIZED_HEADS and h.parsed_attrs().get("normalization", "null") != "null"
                     for h in heads):
        return 1.0
    if heads and batch > 1 and _outputs_are_reduced(sym):
        return 1.0
    return 1.0 / max(1, batch)


def _outputs_are_reduced(sym) -> bool:
    """Whether every output is one number (shape () or (1,)) of a graph with no MXNet loss
    head: a loss already reduced inside the graph (an ONNX export of ``F.mse_loss(fc(x), t)``,
    ``autotile.torch.plan``'s callable loss). Its head gradient of one trains that number
    itself, so it takes no 1/batch: the number is the model's own mean (or sum, if the model
    says so)."""
    if any(node.op in _NORMALIZED_HEADS or node.op.endswith("RegressionOutput")
           for node, _ in sym.entries if not node.is_variable):
        return False
    try:
        _, outs, _ = sym.infer_shape_partial()
    except Error:
        return False
    return all(s is not None and int(np.prod(s, dtype=np.int64)) == 1 for s in outs)


def sgd_args(lr: float, batch: int, sym=None) -> dict:
    """SGD arguments for a step that trains the mean loss over a batch of `batch`
    (:func:`batch_rescale`): the learning rate and rescale_grad, 1/batch for a head that
    sums over the batch (MXNet's SoftmaxOutput default, and any head when `sym` is not given,
    as MXNet's Module sets it), 1 for one that already averages."""
    check_lr(lr)
    return {"lr": float(lr), "rescale_grad": 1.0 / max(1, batch) if sym is None else batch_rescale(sym, batch)}


def check_lr(lr) -> float:
    """`lr` as a positive finite float; Error naming it otherwise (``lr='x'``, 0, inf)."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not math.isfinite(lr) or not lr > 0:
        raise Error(f"the learning rate must be positive, got {lr!r} (lr: a positive finite number)")
    return float(lr)


def check_finite_loss(loss: float, where: str, lr: float) -> None:
    """Error when a step's loss is NaN or infinite: training diverged at `where` (e.g. "step 3");
    the usual cause is a learning rate too large for the model."""
    if not math.isfinite(loss):
        raise Error(f"training diverged at {where} (loss {loss}): lower --lr (now {lr:g}), e.g. --lr {lr / 10:g}")


def softmax_loss(probs: np.ndarray, labels: np.ndarray):
    """(mean cross-entropy, accuracy) of softmax probabilities (rows) against class ids."""
    probs = probs.reshape(-1, probs.shape[-1])
    idx = np.asarray(labels).reshape(-1).astype(np.int64)[: probs.shape[0]]
    picked = probs[np.arange(len(idx)), idx]
    loss = float(-np.mean(np.log(np.maximum(picked, 1e-12))))
    return loss, float(np.mean(np.argmax(probs, axis=1) == idx))


class ProgressBar:
    """``label [#####.....] i/n loss x`` redrawn in place on stderr (a terminal only, unless forced)."""

    def __init__(self, total: int, label: str, enabled: Optional[bool] = None, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def update(self, done: int, loss: float) -> None:
        if not self.enabled:
            return
        filled = self.width * done // max(1, self.total)
        bar = "#" * filled + "." * (self.width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} loss {loss:.4f}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def resolve_model(model, data: str, batch: Optional[int]):
    """(Symbol, display name) of `model` for data set `data` ('mlp'/'cnn' on digits: the
    digits-sized zoo entries)."""
    from .model_input import as_symbol

    name = model if isinstance(model, str) else (getattr(model, "name", None) or "symbol")
    if isinstance(model, str) and data == "digits" and model.strip().lower() in ("mlp", "cnn"):
        name = model = f"{model.strip().lower()}-digits"
    return as_symbol(model, batch=batch), name


def _io_names(sym, shapes):
    from .autodiff.graph import default_data_names

    names = [n for n in default_data_names(sym) if n in shapes]
    attached = getattr(sym, "loss", None)  # attach_loss's target, whatever its name
    labels = [n for n in names if n.endswith("label") or (attached is not None and n == attached[2])]
    data = [n for n in names if n not in labels]
    if len(data) != 1 or len(labels) != 1:
        hint = "; a model without a loss (an exported classifier's logits): pass loss='cross_entropy' " \
               "(autotile train --loss cross_entropy)" if not labels else ""
        raise Error(f"train needs a classifier with one data input and one label input; the model has "
                    f"data inputs {data} and labels {labels}{hint}")
    data, label = data[0], labels[0]
    batch = shapes[data][0]
    if tuple(shapes[label]) != (batch,):
        raise Error(f"train needs one class label per sample: label '{label}' has shape {shapes[label]} "
                    f"for a batch of {batch}")
    return data, label


def _classes(sym) -> int:
    from .symbol.infer import infer_entry_shapes

    head = sym.entries[0][0]
    if head.op != "SoftmaxOutput":
        raise Error(f"train needs a model ending in SoftmaxOutput (a classifier); '{head.name}' is {head.op}")
    shape = infer_entry_shapes(sym, {}).get((id(head), 0))
    return int(shape[-1])


def evaluate(sym, x: np.ndarray, y: np.ndarray, params, aux, data: str, label: str, batch: int):
    """(loss, accuracy) of a forward pass over (x, y) in batches of `batch` on one device
    (the last batch padded with its first rows, whose outputs are dropped)."""
    from . import backend

    probs = []
    for start in range(0, len(x), batch):
        xb, n = x[start:start + batch], min(batch, len(x) - start)
        if n < batch:
            xb = np.concatenate([xb, np.resize(xb, (batch - n, *xb.shape[1:]))])
        res = backend.run(sym, devices=1, inputs={data: xb, label: np.zeros(batch, np.float32)}, params=params,
                          aux=aux, train=False)
        probs.append(res.outputs[0].reshape(batch, -1)[:n])
    return softmax_loss(np.concatenate(probs), y)


def train(model="mlp", data: str = "digits", devices: int = 1, epochs: int = 5, batch: Optional[int] = 32,
          lr: float = 0.1, init: str = "xavier", seed: int = 0, plot: Optional[str] = None,
          save: Optional[str] = None, progress: Optional[bool] = None, out=None, dtype: str = "float32",
          loss: Optional[str] = None, label: Optional[str] = None) -> History:
    """Train `model` (zoo name or Symbol ending in SoftmaxOutput) on data set `data`
    ("digits" or "synthetic", :mod:`autotile.training_data`) for `epochs` epochs of SGD steps
    of `batch` samples (a shuffled epoch; the last partial batch is dropped) on `devices`
    devices. Prints one line per epoch to `out` (default stdout; False: none) and a progress bar
    on stderr (a terminal only, unless `progress` says). `plot`: PNG of loss and accuracy per
    epoch; `save`: the final parameters as an MXNet ``.params`` file (``arg:``/``aux:`` names,
    as ``mx.model.save_checkpoint`` writes them). ``dtype="bfloat16"``: mixed precision (bf16
    compute, float32 master weights; docs/mixed-precision.md), evaluation in bf16 too;
    ``"float16"`` likewise with a static loss scale (``backend.run.FLOAT16_LOSS_SCALE``).
    `loss`: ``"cross_entropy"`` attaches a softmax cross-entropy to a model without a loss
    (an exported classifier's logits, :func:`autotile.losses.attach_loss`), its class labels
    the new input `label` (default ``"label"``). The gradient is that of the mean loss over the
    batch (:func:`batch_rescale`, the convention of :func:`autotile.backend.run` too).
    Returns the :class:`History`."""
    from . import backend
    from . import training_data
    from .training_init import init_params, param_shapes

    for key, value in (("devices", devices), ("epochs", epochs)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Error(f"{key} must be a positive integer, got {value!r}")
    if batch is not None and (not isinstance(batch, int) or batch < 1):
        raise Error(f"batch must be a positive integer, got {batch!r}")
    if data not in training_data.DATASETS:
        raise Error(f"unknown data set '{data}' (known: {', '.join(training_data.DATASETS)})")
    lr = check_lr(lr)
    seed = check_seed(seed)
    for key, value in (("plot", plot), ("save", save)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise Error(f"{key} must be a file path, got {type(value).__name__}")
    check_output_paths(plot, save)  # before training: a bad path would lose the whole run
    out = sys.stdout if out is None else out
    sym, name = resolve_model(model, data, batch)
    if loss is not None:
        if loss != "cross_entropy":
            raise Error(f"train fits a classifier to class labels: loss='cross_entropy', not {loss!r} (for 'mse', "
                        f"call autotile.backend.run(loss='mse') with your targets)")
        from .backend.run import with_loss

        sym = with_loss(sym, loss, label)
    elif label is not None:
        raise Error(f"label={label!r} names the target of a loss: pass loss='cross_entropy' too")
    arg_shapes, aux_shapes = param_shapes(sym)
    data_name, label_name = _io_names(sym, arg_shapes)
    batch = arg_shapes[data_name][0]
    training_data.check_size(data, arg_shapes[data_name][1:], batch)  # before allocating the data set
    ds = training_data.load(data, arg_shapes[data_name][1:], _classes(sym), batch, seed=seed)
    steps = len(ds.x_train) // batch
    if steps == 0:
        raise Error(f"batch {batch} is larger than the {len(ds.x_train)} training samples of '{data}'")
    params = init_params(arg_shapes, seed=seed, init=init, skip=(data_name, label_name))
    aux = init_params(aux_shapes, seed=seed, init=init)
    opt_args = sgd_args(lr, batch, sym)
    if dtype != "float32":  # the casts go in once: planned and run as they are
        from .backend.run import FLOAT16_LOSS_SCALE, mixed_precision_symbol

        scale = FLOAT16_LOSS_SCALE if dtype == "float16" else 1.0  # static loss scaling, undone in the update
        sym = mixed_precision_symbol(sym, dtype, "cpu", shapes={**arg_shapes, **aux_shapes}, loss_scale=scale)
        opt_args = {**opt_args, "rescale_grad": float(opt_args.get("rescale_grad", 1.0)) / scale}
    extra = {}
    if devices > 1:
        from . import planner

        extra["plan"] = planner.plan(sym, devices=devices, shapes={data_name: arg_shapes[data_name],
                                                                    label_name: arg_shapes[label_name]})
    hist = History(model=name, data=data, devices=devices, batch=batch, lr=lr)
    rng = np.random.default_rng(seed)
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(ds.x_train))
        bar = ProgressBar(steps, f"epoch {epoch}/{epochs}", progress)
        losses, accs = [], []
        for s in range(steps):
            idx = order[s * batch:(s + 1) * batch]
            res = backend.run(sym, devices=devices, inputs={data_name: ds.x_train[idx], label_name: ds.y_train[idx]},
                              params=params, aux=aux, train=True, optimizer_args=opt_args,
                              seed=seed + len(hist.step_losses), **extra)
            params.update(res.params)
            aux.update(res.aux)
            loss, acc = softmax_loss(res.outputs[0], ds.y_train[idx])
            if not np.isfinite(loss):
                bar.close()
                check_finite_loss(loss, f"epoch {epoch} step {s + 1}", lr)
            hist.step_losses.append(loss)
            losses.append(loss)
            accs.append(acc)
            bar.update(s + 1, loss)
        bar.close()
        test_loss, test_acc = evaluate(sym, ds.x_test, ds.y_test, params, aux, data_name, label_name, batch)
        hist.epochs.append(EpochStats(epoch, float(np.mean(losses)), float(np.mean(accs)), test_loss, test_acc,
                                      time.perf_counter() - t0))
        if out:
            print(hist.epoch_line(hist.epochs[-1], epochs), file=out, flush=True)
    hist.params, hist.aux = params, aux
    if save:
        from .ndarray import join_params, save as save_params

        save_params(save, join_params(params, aux))
    if plot:
        plot_history(hist, plot)
    return hist


def check_plot_path(path, what: str = "plot") -> str:
    """Error naming `what` when matplotlib is missing or cannot write `path`'s format (its
    extension: png, pdf, svg...; none is PNG)."""
    try:
        import matplotlib
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise Error(f"{what} needs matplotlib: {install_hint('plot')}") from None
    ext = os.path.splitext(os.fspath(path))[1][1:].lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext and ext not in formats:
        raise Error(f"{what} '{os.fspath(path)}': matplotlib {matplotlib.__version__} cannot write '.{ext}' files "
                    f"(it writes {', '.join(sorted(formats))})")
    return path


def check_output_paths(plot, save, names=("plot", "save")) -> None:
    """The plot's format is one matplotlib writes, and the plot and the parameters are not
    to go to one file (the plot, written last, would replace the parameters)."""
    if plot is not None:
        check_plot_path(plot, names[0])
    if plot is not None and save is not None and \
            os.path.realpath(os.fspath(plot)) == os.path.realpath(os.fspath(save)):
        raise Error(f"{names[0]} and {names[1]} name one file, '{os.fspath(plot)}': the plot would replace "
                    "the saved parameters")


def plot_history(hist: History, path: str) -> None:
    """Write a PNG of train/test loss and accuracy per epoch."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise Error(f"--plot needs matplotlib: {install_hint('plot')}") from None
    xs = [e.epoch for e in hist.epochs]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.4))
    ax_loss.plot(xs, [e.train_loss for e in hist.epochs], marker="o", label="train")
    ax_loss.plot(xs, [e.test_loss for e in hist.epochs], marker="o", label="test")
    ax_loss.set_ylabel("cross-entropy")
    ax_acc.plot(xs, [100 * e.train_accuracy for e in hist.epochs], marker="o", label="train")
    ax_acc.plot(xs, [100 * e.test_accuracy for e in hist.epochs], marker="o", label="test")
    ax_acc.set_ylabel("accuracy (%)")
    from matplotlib.ticker import MaxNLocator

    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.legend()
    fig.suptitle(f"{hist.model} on {hist.data}, {hist.devices} device(s), batch {hist.batch}, lr {hist.lr}")
    fig.tight_layout()
    import io

    buf = io.BytesIO()  # savefig's own writer can lose a write error (/dev/full): write it here
    ext = os.path.splitext(os.fspath(path))[1][1:].lower() or "png"
    try:
        fig.savefig(buf, dpi=100, format=ext)
    finally:
        plt.close(fig)
    try:
        with open(path, "wb") as f:
            f.write(buf.getvalue())
    except OSError as e:
        raise Error(f"cannot write plot '{path}': {e.strerror or e}") from None
