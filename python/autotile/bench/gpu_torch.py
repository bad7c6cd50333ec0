"""The PyTorch reference of ``autotile bench gpu`` (issue 32 item 5): the zoo's AlexNet and
VGG-16 written in PyTorch layer for layer (same layers, shapes, LRN constants, pooling
rounding), trained with SGD with momentum on the same GPU: fp32 with TF32 off and bf16
autocast, each eager and as a captured CUDA graph; median of N steps. And the table that puts
autotile's step times beside them with the autotile/PyTorch ratios.

The models and the timing run on the CPU too (fp32 eager: the tests check the models equal
autotile's forward and the timing loop runs); bf16 autocast and CUDA graphs need a GPU."""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import Error
from .common import table

VGG16_STAGES = ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))
MODES = ("fp32 eager", "fp32 graph", "bf16 eager", "bf16 graph")


def _import_torch():
    try:
        import torch
    except ImportError as e:
        raise Error(f"the PyTorch reference needs torch ({e}): pip install torch") from None
    return torch


def torch_model(name: str, classes: int = 1000, image: int = 224, dropout: float = 0.5):
    """AlexNet (as ``at.models.alexnet``) or VGG-16 (``at.models.vgg(16)``) as a torch
    ``nn.Module`` whose parameters are named as autotile's with '.' for '_' (``conv1.weight``
    is ``conv1_weight``), for input (batch, 3, image, image)."""
    torch = _import_torch()
    nn = torch.nn

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers: List[Tuple[str, object]] = []
            if name == "alexnet":
                self._conv("conv1", 3, 96, 11, stride=4, pad=0, lrn=True, pool=(3, 2))
                self._conv("conv2", 96, 256, 5, pad=2, lrn=True, pool=(3, 2))
                self._conv("conv3", 256, 384, 3, pad=1)
                self._conv("conv4", 384, 384, 3, pad=1)
                self._conv("conv5", 384, 256, 3, pad=1, pool=(3, 2))
                side = image
                for k, s, p in ((11, 4, 0), (3, 2, 0), (5, 1, 2), (3, 2, 0), (3, 1, 1), (3, 1, 1), (3, 1, 1),
                                (3, 2, 0)):
                    side = (side + 2 * p - k) // s + 1
                flat = 256 * side * side
            elif name == "vgg16":
                c_in = 3
                for s, (n, filters) in enumerate(VGG16_STAGES, start=1):
                    for i in range(1, n + 1):
                        self._conv(f"conv{s}_{i}", c_in, filters, 3, pad=1, pool=(2, 2) if i == n else None)
                        c_in = filters
                flat = 512 * (image // 32) ** 2
            else:
                raise Error(f"torch_model: no PyTorch twin of '{name}' (alexnet, vgg16)")
            self.fc6 = nn.Linear(flat, 4096)
            self.fc7 = nn.Linear(4096, 4096)
            self.fc8 = nn.Linear(4096, classes)
            self.drop = nn.Dropout(dropout)

        def _conv(self, n, c_in, c_out, k, stride=1, pad=0, lrn=False, pool=None):
            setattr(self, n, nn.Conv2d(c_in, c_out, k, stride=stride, padding=pad))
            self.layers.append(("conv", getattr(self, n)))
            self.layers.append(("relu", None))
            if lrn:  # MXNet's LRN: alpha/nsize over the window, as torch's
                self.layers.append(("lrn", nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)))
            if pool:
                self.layers.append(("pool", nn.MaxPool2d(pool[0], stride=pool[1])))

        def forward(self, x):
            F = torch.nn.functional
            for kind, layer in self.layers:
                x = F.relu(x) if kind == "relu" else layer(x)
            x = torch.flatten(x, 1)
            x = self.drop(F.relu(self.fc6(x)))
            x = self.drop(F.relu(self.fc7(x)))
            return self.fc8(x)

    return Zoo()


def load_params(model, params: Dict[str, np.ndarray]):
    """Copies autotile parameters (``conv1_weight``...) into the torch twin; Error naming a
    parameter missing on either side or of another shape."""
    torch = _import_torch()
    mine = dict(model.named_parameters())
    theirs = {k.replace(".", "_"): k for k in mine}
    missing = sorted(set(theirs) - set(params))
    extra = sorted(k for k in params if k.endswith(("_weight", "_bias")) and k not in theirs)
    if missing or extra:
        raise Error(f"the PyTorch twin and the autotile model differ: missing {missing[:5]}, extra {extra[:5]}")
    with torch.no_grad():
        for ours, name in theirs.items():
            value = torch.as_tensor(np.asarray(params[ours]))
            if tuple(value.shape) != tuple(mine[name].shape):
                raise Error(f"parameter {ours}: autotile shape {tuple(value.shape)}, PyTorch {tuple(mine[name].shape)}")
            mine[name].copy_(value)


def time_steps(name: str, batch: int, mode: str = "fp32 eager", steps: int = 20, device: Optional[str] = None,
               image: int = 224, classes: int = 1000, warmup: int = 3, lr: float = 0.01,
               momentum: float = 0.9) -> float:
    """Median wall seconds of a training step (forward, summed cross-entropy as SoftmaxOutput's
    gradient, backward, SGD with momentum), each step ended by a device synchronisation.
    `mode` is one of MODES; fp32 runs with TF32 off and cudnn.benchmark on. `device`: 'cuda'
    when available, else 'cpu' (fp32 eager only)."""
    torch = _import_torch()
    if mode not in MODES:
        raise Error(f"mode must be one of {MODES}, got {mode!r}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    if not cuda and mode != "fp32 eager":
        raise Error(f"PyTorch mode '{mode}' needs a CUDA GPU (on the CPU: 'fp32 eager')")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torch_model(name, classes=classes, image=image).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    x = torch.randn(batch, 3, image, image, device=device)
    y = torch.randint(0, classes, (batch,), device=device)
    bf16 = mode.startswith("bf16")

    def step():
        with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
        loss.backward()
        opt.step()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if mode.endswith("graph"):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture asks
            for _ in range(warmup):
                opt.zero_grad(set_to_none=False)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # the whole step, gradients zeroed in place inside it
            opt.zero_grad(set_to_none=False)
            step()
        run = graph.replay
    else:
        def run():
            opt.zero_grad(set_to_none=True)
            step()
        for _ in range(warmup):
            run()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def torch_times(models, steps: int = 20, device: Optional[str] = None, modes=MODES) -> Dict[tuple, object]:
    """{(model, mode): median seconds, or the error's text} for (name, batch) in `models`."""
    out = {}
    for name, batch in models:
        for mode in modes:
            try:
                out[name, mode] = time_steps(name, batch, mode, steps=steps, device=device)
            except Exception as e:  # one mode failing (memory, capture) leaves the others
                out[name, mode] = f"failed: {type(e).__name__}: {str(e)[:120]}"
    return out


def ratio_rows(autotile: Dict[tuple, object], reference: Dict[tuple, object], models, workers=(1, 2, 4, 8)):
    """Rows (model, batch, workers, autotile s, PyTorch s per mode..., autotile / each, k
    workers / 1 worker) from autotile's step times {(model, workers): s} and the reference's
    {(model, mode): s}; '-' where a time is missing or failed."""
    def num(v):
        return v if isinstance(v, float) else None

    rows = []
    for name, batch in models:
        one = num(autotile.get((name, 1)))
        for k in workers:
            at_s = num(autotile.get((name, k)))
            row = [name, batch, k, at_s if at_s is not None else autotile.get((name, k), "-")]
            for mode in MODES:
                ref = reference.get((name, mode), "-")
                row.append(ref)
            for mode in ("fp32 eager", "fp32 graph"):
                ref = num(reference.get((name, mode)))
                row.append(at_s / ref if at_s is not None and ref else "-")
            row.append(at_s / one if at_s is not None and one else "-")
            rows.append(row)
    return rows


RATIO_HEADS = ["model", "batch", "workers", "autotile s"] + [f"torch {m} s" for m in MODES] + \
    ["autotile/torch fp32 eager", "autotile/torch fp32 graph", "vs 1 worker"]


def print_ratios(autotile, reference, models, workers=(1, 2, 4, 8)) -> list:
    """Prints the autotile-vs-PyTorch table; returns its rows as dicts."""
    rows = ratio_rows(autotile, reference, models, workers)
    print("Training step, autotile (fp32) beside PyTorch on the same GPU (median wall seconds per step; SGD with "
          "momentum; fp32 = TF32 off; k workers share the GPU)")
    print(table(RATIO_HEADS, rows))
    return [dict(zip(RATIO_HEADS, r)) for r in rows]
