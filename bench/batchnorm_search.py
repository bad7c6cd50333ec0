"""Search cost of synchronous BatchNorm (issue 24): the zoo's BatchNorm models planned by tofu
with the fused BatchNorm (the training graph without ops/sync_batchnorm.py's expansion: the
channel split only), with synchronous BatchNorm searched node by node
(AUTOTILE_SEARCH_JOINT=off), with its joint strategy but its per-channel tensors left in the DP
(AUTOTILE_SEARCH_FOLD=off) and with its joint strategy (csrc/search/coarsen.h, the default; the
per-channel tensors folded out of the DP, csrc/search/coarsen_fold.h).

Per variant: the widest DP table (log2 of its entries, largest over the cuts) and the DP table
entries visited per cut (largest cut), both from AUTOTILE_SEARCH_PROFILE; the median of
`--repeat` searches of the recursion alone (refine=False), wall (the core's search_seconds) and
CPU (this process), and of the default search (with the refinement across cuts, which spends
a budget that depends on the recursion's work); the bytes of both plans. Runs are
interleaved so that load hits every variant alike.

    python bench/batchnorm_search.py [--repeat 7] [--models wresnet-152-10:8:8,resnet-50:32:8]
"""
import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (this checkout's python/ first when it has a development build)

DEFAULT_MODELS = "wresnet-152-10:8:8,wresnet-152-10:8:64,wresnet-50-4:32:8,resnet-50:32:8,resnet-152:32:8,vgg16_bn:32:4"
VARIANTS = ("fused BN", "sync, per node", "sync, unfolded", "sync, joint")


@contextlib.contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _graphs(model, batch):
    """variant -> (core graph, environment of its search)."""
    import autotile.ops.sync_batchnorm as sync_bn
    from autotile.planner import lowered_training_graph

    sync = lowered_training_graph(model, batch=batch)[3].core
    expand = sync_bn.expand_batchnorm
    sync_bn.expand_batchnorm = lambda sym, shapes=None: sym
    try:
        fused = lowered_training_graph(model, batch=batch)[3].core
    finally:
        sync_bn.expand_batchnorm = expand
    return {"fused BN": (fused, {}), "sync, per node": (sync, {"AUTOTILE_SEARCH_JOINT": "off"}),
            "sync, unfolded": (sync, {"AUTOTILE_SEARCH_FOLD": "off"}), "sync, joint": (sync, {})}


def _tables(core, devices, env):
    """(widest table log2, entries visited in the largest cut) from the search profile (stderr)."""
    from autotile import _core

    with tempfile.TemporaryFile() as f, _env(AUTOTILE_SEARCH_PROFILE="1", **env):
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            _core.plan_graph(core, devices, "tofu", None, True)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        found = re.findall(r"widest table 2\^([0-9.]+), ([0-9.e+]+) entries visited", f.read().decode())
    return max(float(w) for w, _ in found), max(float(e) for _, e in found)


def measure(model, batch, devices, repeat):
    from autotile import _core

    graphs = _graphs(model, batch)
    wall = {v: [] for v in VARIANTS}
    cpu = {v: [] for v in VARIANTS}
    refined = {v: [] for v in VARIANTS}
    total = {}
    for _ in range(repeat):
        for v in VARIANTS:
            core, env = graphs[v]
            with _env(**env):
                t0 = time.process_time()
                plan = _core.plan_graph(core, devices, "tofu", None, True, refine=False)
                cpu[v].append(time.process_time() - t0)
                full = _core.plan_graph(core, devices, "tofu", None, True)
            refined[v].append(full["search_seconds"])
            wall[v].append(plan["search_seconds"])
            total[v] = (plan["total_bytes"], full["total_bytes"])
    rows = []
    for v in VARIANTS:
        core, env = graphs[v]
        width, entries = _tables(core, devices, env)
        rows.append([f"{model} b{batch}", devices, v, core.num_nodes, f"2^{width:.1f}", f"{entries:.3g}",
                     statistics.median(wall[v]), statistics.median(cpu[v]), statistics.median(refined[v]),
                     f"{total[v][0]:,.0f}", f"{total[v][1]:,.0f}"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated model:batch:devices")
    args = ap.parse_args()
    rows = []
    for spec in args.models.split(","):
        model, batch, devices = spec.split(":")
        rows += measure(model, int(batch), int(devices), args.repeat)
    print(f"Search with synchronous BatchNorm (tofu, median of {args.repeat}; widest table and entries: largest cut;"
          " search s, CPU s: the recursion; refined s: with the refinement)")
    print(common.table(["model", "devices", "BatchNorm", "nodes", "widest", "entries", "search s", "CPU s",
                        "refined s", "bytes", "refined bytes"], rows))


if __name__ == "__main__":
    sys.exit(main())
