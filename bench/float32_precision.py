"""How far a float32 training step lands from the float64 step on torchvision's RegNetY-400MF
(issue 22 reported 1.1e-1 on 1 and 2 devices), next to how far PyTorch's own float32 autograd
lands from PyTorch's float64 on the same model: the precision float32 reaches on this net.

Two steps, as the export needs torchvision (tests/fixtures/onnx_torch/make_fixtures.py says
how to set up that environment; /opt/exportvenv here):

    /opt/exportvenv/bin/python bench/float32_precision.py export OUT   # ONNX files + torch grads
    python3 bench/float32_precision.py compare OUT [--devices 1,2,4]    # the table

Export: regnet_y_400mf with torchvision's initialisation ("init") and with the fixtures'
seeded perturbation of every weight and BatchNorm statistic ("perturbed", make_fixtures.perturb),
eval mode, TorchScript opset 17, input (2, 3, 64, 64); PyTorch's gradients of sum(logits)
(head gradients of ones) in float32 and float64. The exporter folds BatchNorm into the convs
in float32, so only the parameters it keeps by name (SE convs, head) are compared with
PyTorch; autotile's float32 step is compared with its own float64 step on every weight.
"perturbed-bn" is exported without constant folding: its 53 BatchNormalization nodes stay,
every parameter keeps its name, and autotile's step (running statistics, as PyTorch's eval
mode) is compared with PyTorch's on all of them.

Columns: worst and median over parameters of max|g32 - g64| / max|g64|. The row "f64 vs
torch f64" is autotile's float64 step on the file's float32-rounded folded weights against
PyTorch's float64 on unrounded ones: how much rounding the weights alone moves the gradient.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

import numpy as np

VARIANTS = ("init", "perturbed", "perturbed-bn")


def export(out: str) -> None:
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                                    "onnx_torch"))
    import make_fixtures

    tv = make_fixtures.torchvision_models()
    os.makedirs(out, exist_ok=True)
    for variant in VARIANTS:
        torch.manual_seed(0)
        model = tv.regnet_y_400mf().eval()
        if variant.startswith("perturbed"):
            make_fixtures.perturb(model)
        x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        torch.onnx.export(model, (x,), os.path.join(out, f"regnety400_{variant}.onnx"), opset_version=17,
                          dynamo=False, input_names=["input"], output_names=["logits"],
                          do_constant_folding=not variant.endswith("-bn"))
        arrays = {"input": x.numpy()}
        for dtype, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
            m = copy.deepcopy(model).to(dtype)
            m(x.to(dtype)).sum().backward()
            arrays.update({f"{tag}.{n}": p.grad.numpy() for n, p in m.named_parameters()})
        np.savez(os.path.join(out, f"regnety400_{variant}.npz"), **arrays)
        print("wrote", variant)


def _rel(got, want) -> float:
    want = np.asarray(want, np.float64)
    return float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max() / np.abs(want).max())


def _row(label: str, errs: list) -> str:
    errs = sorted(errs)
    return f"{label:<34} {errs[-1]:>10.3g} {errs[len(errs) // 2]:>10.3g} {len(errs):>7}"


def compare(out: str, devices) -> None:
    import autotile as at

    print(f"{'':<34} {'worst':>10} {'median':>10} {'params':>7}")
    for variant in VARIANTS:
        npz = np.load(os.path.join(out, f"regnety400_{variant}.npz"))
        sym = at.onnx.load(os.path.join(out, f"regnety400_{variant}.onnx"), batch_size=2)
        x = npz["input"]
        inp = sym.onnx_names["input"]
        named = {sym.onnx_names[k[4:]]: k[4:] for k in npz.files if k.startswith("f64.") and k[4:] in sym.onnx_names}
        r64 = at.backend.run(sym, inputs={inp: x.astype(np.float64)}, train=True,
                             params={k: np.asarray(v, np.float64) for k, v in sym.params.items()})
        print(f"{variant}:")
        print(_row("  torch f32 vs torch f64 (named)", [_rel(npz["f32." + t], npz["f64." + t]) for t in named.values()]))
        print(_row("  autotile f64 vs torch f64 (named)", [_rel(r64.grads[s], npz["f64." + t]) for s, t in named.items()]))
        for d in devices:
            r32 = at.backend.run(sym, inputs={inp: x}, params=sym.params, train=True,
                                 **({} if d == 1 else {"devices": d}))
            print(_row(f"  autotile f32 x{d} vs f64 (named)", [_rel(r32.grads[s], r64.grads[s]) for s in named]))
            print(_row(f"  autotile f32 x{d} vs f64 (all)", [_rel(r32.grads[p], r64.grads[p]) for p in r64.grads]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("export", "compare"))
    ap.add_argument("out", help="folder for the ONNX files and PyTorch's gradients")
    ap.add_argument("--devices", default="1,2,4", help="device counts of the float32 steps (compare)")
    args = ap.parse_args(argv)
    if args.mode == "export":
        export(args.out)
    else:
        compare(args.out, [int(d) for d in args.devices.split(",")])


if __name__ == "__main__":
    main()
