"""Scaling in the device count: plan, transform and one training step of the host runtime,
with the peak resident memory, for 8 .. 4096 devices, and the exponent fitted to each
column (time ~ devices^e, least squares in log-log).

Models: `fc` (a 16 -> 8 FullyConnected layer with a softmax loss, batch 4096: the step is
all overhead, so the table measures what each device costs) and the zoo's `mlp` (4 layers of
8192 x 8192, batch 4096: plan and transform only; its step is 6.6 TFLOP of compute).
Each configuration runs in its own process so that the peak RSS is its own.

    python bench/scaling.py [--quick] [--devices 8,64,512,1024,2048,4096] [--models fc,mlp]
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DEVICES = (8, 64, 512, 1024, 2048, 4096)
BATCH = 4096


def _model(name: str):
    import autotile as at

    if name == "fc":
        data = at.sym.Variable("data")
        fc = at.sym.FullyConnected(data, num_hidden=8, name="fc")
        return at.sym.SoftmaxOutput(fc, name="softmax"), {"data": (BATCH, 16), "softmax_label": (BATCH,)}
    if name == "mlp":
        return at.models.get("mlp", batch=BATCH), {"data": (BATCH, 8192), "softmax_label": (BATCH,)}
    raise SystemExit(f"unknown model {name!r} (fc, mlp)")


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure_one(model: str, devices: int, step: bool) -> dict:
    """Times and peak memory of one configuration, in this process."""
    import numpy as np

    import autotile as at

    sym, shapes = _model(model)
    row = {"model": model, "devices": devices}
    t0 = time.perf_counter()
    plan = at.plan(sym, devices=devices, shapes=shapes)
    row["plan_s"] = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    eg = at.transform(sym, plan)
    row["transform_s"] = time.perf_counter() - t0
    row["transform_cpu_s"] = time.process_time() - c0  # what a loaded machine's wall time hides
    row["transform_rss_mb"] = _rss_mb()
    stats = eg.stats()
    row["ops"] = len(eg.ops)
    row["pieces"], row["deps"] = stats["pieces"], stats["dependencies"]
    row["comm_bytes"] = plan.comm_bytes
    if step:
        del eg
        rng = np.random.default_rng(0)
        inputs = {"data": rng.standard_normal(shapes["data"], dtype=np.float32),
                  "softmax_label": rng.integers(0, 8, shapes["softmax_label"]).astype(np.float32)}
        params = {"fc_weight": rng.standard_normal((8, 16), dtype=np.float32) * 0.1,
                  "fc_bias": np.zeros(8, np.float32)}
        t0 = time.perf_counter()
        res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=True, plan=plan)
        row["run_s"] = time.perf_counter() - t0  # transform + load + step + gather
        row["step_s"] = res.stats["step_seconds"]
        if devices == DEVICES[0] or os.environ.get("AUTOTILE_SCALING_CHECK"):
            one = at.backend.run(sym, devices=1, inputs=inputs, params=params, train=True)
            row["max_grad_diff"] = float(max(np.max(np.abs(res.grads[p] - one.grads[p])) / np.max(np.abs(one.grads[p]))
                                             for p in params))  # relative to the largest gradient
    row["peak_rss_mb"] = _rss_mb()
    return row


def fit_exponent(xs, ys) -> float:
    """Slope of log(y) against log(x) (least squares)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y and y > 0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    p.add_argument("--devices", default=None, help="comma-separated device counts (default 8..4096)")
    p.add_argument("--models", default="fc,mlp")
    p.add_argument("--one", nargs=3, metavar=("MODEL", "DEVICES", "STEP"), help=None)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per configuration")
    args = p.parse_args(argv)
    common.use_tree_package()
    if args.one:  # child process: one configuration, a JSON line on stdout
        print(json.dumps(measure_one(args.one[0], int(args.one[1]), args.one[2] == "1")))
        return 0
    devices = [int(d) for d in args.devices.split(",")] if args.devices else (
        [8, 64, 512] if args.quick else list(DEVICES))
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    rows = []
    for model in args.models.split(","):
        for k in devices:
            cmd = [sys.executable, os.path.abspath(__file__), "--one", model, str(k), "1" if model == "fc" else "0"]
            t0 = time.perf_counter()
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            except subprocess.TimeoutExpired:
                rows.append({"model": model, "devices": k, "error": f"timed out after {args.timeout:g} s"})
                continue
            if out.returncode != 0:
                err = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
                rows.append({"model": model, "devices": k, "error": err})
            else:
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  {model} {k} devices: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    cols = ("plan_s", "transform_s", "transform_cpu_s", "step_s", "run_s", "peak_rss_mb", "pieces")
    table_rows, fits = [], []
    for model in args.models.split(","):
        mine = [r for r in rows if r["model"] == model]
        for r in mine:
            if "error" in r:
                table_rows.append((model, r["devices"], *["-"] * 8, r["error"][:60]))
                continue
            table_rows.append((model, r["devices"], r["plan_s"], r["transform_s"], r.get("transform_cpu_s", "-"),
                               r.get("step_s", "-"),
                               r.get("run_s", "-"), r["peak_rss_mb"], r["ops"], r["pieces"],
                               f"= 1 device to {r['max_grad_diff']:.0e}" if "max_grad_diff" in r else ""))
        ok = [r for r in mine if "error" not in r]
        for lo in (min(devices), 512):
            sel = [r for r in ok if r["devices"] >= lo]
            if len(sel) < 2:
                continue
            fits.append((model, f"{lo}..{max(r['devices'] for r in sel)}",
                         *[fit_exponent([r["devices"] for r in sel], [r.get(c) for r in sel])
                           if all(c in r for r in sel) else "-" for c in cols]))
    text = ("Scaling in devices (host runtime, this machine); step = one training step; run = transform + "
            "load + step + gather; transform CPU = its process CPU time (the wall time on a loaded machine "
            "is mostly waiting); peak = max RSS of the process\n" +
            common.table(("model", "devices", "plan s", "transform s", "transform CPU s", "step s", "run s", "peak MB",
                          "ops", "pieces", "note"), table_rows) +
            "\n\nfitted exponent e (time or memory ~ devices^e)\n" +
            common.table(("model", "devices", *cols), fits))
    print(text)
    common.write_json("scaling.json", {"rows": rows, "fits": fits, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
