"""The simulator's route tables, shared by the runs on one link hierarchy
(sim/simulator.py _route_table): a run with a table other runs filled, and runs in several
threads at once, give exactly the results of a run that computed every route itself."""
import threading

import autotile as at
from autotile.execgraph.graph import transform
from autotile.sim import simulator as sim


def _graphs():
    tiny = at.models.get("transformer", batch=16, layers=1, d_model=64, heads=4, d_ff=128, seq=16, vocab=128)
    mlp = at.models.get("mlp-2-256", batch=64)
    return [transform(m, at.plan(m, devices=k)) for m, k in ((tiny, 16), (mlp, 16), (tiny, 8))]


def _fresh(eg, profile):
    sim._ROUTE_TABLES.clear()  # every route computed by this run
    return sim.simulate(eg, profile)


def test_shared_tables_give_the_results_of_fresh_ones():
    graphs = _graphs()
    for profile in ("dgx-h100", "dgx-a100-multinode"):
        fresh = [_fresh(eg, profile) for eg in graphs]
        for eg, want in zip(graphs + graphs, fresh + fresh):  # the second pass finds every route known
            assert sim.simulate(eg, profile) == want


def test_runs_in_threads_give_the_results_of_one_at_a_time():
    graphs = _graphs()
    want = [_fresh(eg, "dgx-h100") for eg in graphs]
    sim._ROUTE_TABLES.clear()
    got = [None] * (2 * len(graphs))

    def run(j):
        got[j] = sim.simulate(graphs[j % len(graphs)], "dgx-h100")

    threads = [threading.Thread(target=run, args=(j,)) for j in range(len(got))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want + want
