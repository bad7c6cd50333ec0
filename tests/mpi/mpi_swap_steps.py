"""Run under mpirun: a weight-heavy MLP (tests/execgraph/test_swap_steps.py) at half the memory
its plan needs, three momentum steps with params and momenta kept on the ranks between steps
(MPIRuntime.advance) -- in each rank's host pool where the swap plan keeps them -- and the same
three steps of the unconstrained plan; rank 0 checks that the last step's outputs, updated
params and momenta are bit for bit the same and prints one JSON line.

    mpirun -np K python tests/mpi/mpi_swap_steps.py
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "execgraph"))

from autotile.backend.mpi_runtime import MPIRuntime  # noqa: E402
from autotile.backend.tiles import step_inputs  # noqa: E402
from autotile.execgraph import transform  # noqa: E402
from models import values  # noqa: E402
from test_swap_steps import half_need_plan, wide_mlp  # noqa: E402

STEPS = 3


def run(sym, plan, vals):
    """(the last step's results gathered on rank 0, stats): STEPS steps carried by advance()."""
    eg = transform(sym, plan, optimizer_args={"lr": 0.05})
    rt = MPIRuntime(eg, timeout=60)
    rt.load(step_inputs(eg, vals))
    for _ in range(STEPS):
        rt.run()
        rt.advance()
    tg = eg.training
    got = rt.gather(list(tg.output_names) + list(tg.updated_names) + list(tg.new_state_names), root=0)
    me = rt.rank
    host_tiles = sum(bool(eg.buffers[eg.core.tile(eg.tensor_id[n], me)]["host"])
                     for n in list(tg.updated_names) + list(tg.param_names))
    rt.close()
    return got, {"arena": int(eg.core.arena_bytes[me]), "host_tiles": host_tiles,
                 "swaps": sum(eg.ops[i]["kind"].startswith("swap") for i in rt.schedule)}


def main():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    sym, shapes, classes = wide_mlp()
    vals = values(sym, shapes, classes)
    free, half, budget = half_need_plan(sym, shapes, comm.Get_size(), "momentum")
    got, stats = run(sym, half, vals)
    want, _ = run(sym, free, vals)
    stats = comm.gather(stats, root=0)
    if comm.Get_rank() != 0:
        return 0
    assert want, "nothing gathered"
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    print(json.dumps({"ok": True, "ranks": comm.Get_size(), "budget": budget, "steps": STEPS,
                      "tensors": len(want), "ranks_stats": stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
