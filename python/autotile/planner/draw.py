"""Picture of a plan: which tile of each tensor every device owns (cf. Tofu Fig. 11)."""
from __future__ import annotations

import itertools
from typing import Dict, List, Optional, Tuple

from ..errors import Error, install_hint


def device_tiles(plan, name: str) -> Dict[int, List[Tuple[int, int]]]:
    """For each device, per dim the (index, count) of the slab it holds: count = how many
    pieces the dim is cut into, index = which piece. Devices are numbered in mixed radix
    over the cuts, first cut most significant (the device order of the execution graph)."""
    shape = plan.tensor_shapes[name]
    tilings = plan.tensor_tilings[name]
    result = {}
    for digits in itertools.product(*[range(k) for k in plan.factors]):
        device = 0
        for k, d in zip(plan.factors, digits):
            device = device * k + d
        pos = [(0, 1) for _ in shape]
        for k, d, t in zip(plan.factors, digits, tilings):
            if t.startswith("split("):
                dim = int(t[6:-1])
                idx, cnt = pos[dim]
                pos[dim] = (idx * k + d, cnt * k)
        result[device] = pos
    return result


def draw_plan(plan, path: str, tensors: Optional[List[str]] = None, max_tensors: int = 12) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        raise Error(f"Plan.draw needs matplotlib: {install_hint('plot')}") from None
    if tensors is None:
        params = [n for n in plan.param_names if n in plan.tensor_tilings]
        tensors = params[:max_tensors]
    for n in tensors:
        if n not in plan.tensor_tilings:
            raise Error(f"plan has no tensor named '{n}'")
    cols = min(4, max(1, len(tensors)))
    rows = (len(tensors) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    cmap = plt.get_cmap("tab20", max(plan.devices, 2))
    for ax in axes.flat:
        ax.axis("off")
    for ax, name in zip(axes.flat, tensors):
        shape = plan.tensor_shapes[name]
        tiles = device_tiles(plan, name)
        # Rows show dim 0 and columns dim 1; cuts of deeper dims are listed in the title.
        cells: Dict[Tuple[int, int, int, int], List[int]] = {}
        deep = set()
        for dev, pos in tiles.items():
            r = pos[0] if len(pos) > 0 else (0, 1)
            c = pos[1] if len(pos) > 1 else (0, 1)
            for dim, (_, cnt) in enumerate(pos[2:], start=2):
                if cnt > 1:
                    deep.add(dim)
            cells.setdefault((r[0], r[1], c[0], c[1]), []).append(dev)
        for (ri, rc, ci, cc), devs in cells.items():
            ax.add_patch(Rectangle((ci / cc, 1 - (ri + 1) / rc), 1 / cc, 1 / rc, facecolor=cmap(devs[0] % 20),
                                   edgecolor="black", alpha=0.85))
            label = ",".join(map(str, devs)) if len(devs) <= 4 else f"{devs[0]}..{devs[-1]} ({len(devs)})"
            ax.text((ci + 0.5) / cc, 1 - (ri + 0.5) / rc, label, ha="center", va="center", fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("auto")
        extra = f"\nalso split dims {sorted(deep)}" if deep else ""
        ax.set_title(f"{name} {tuple(shape)}\n{plan.tiling(name)}{extra}", fontsize=7)
    fig.suptitle(f"{plan.model or 'model'}: {plan.algorithm} on {plan.devices} devices "
                 "(rows: dim 0, columns: dim 1; labels: devices holding the tile)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
