"""The simulator against hand-computable cases: a chain of ops on one device, one transfer
over a link, two transfers contending for a link, compute overlapping communication,
shared host cores; plus FLOP formulas and a real ExecGraph."""
import pytest

from autotile.errors import Error
from autotile.sim import CostTable, Simulator, flops, load_profile, profile_from_dict
from autotile.sim.hardware import available_profiles

BW = 1e9  # bytes/s each way
LAT = 1e-5


def profile(devices=4, copy_engines=1, cores=None, in_order=False, levels=None):
    return profile_from_dict({
        "name": "test", "devices": devices, "cores": cores,
        "device": {"peak_flops": 1e12, "mem_bandwidth": 1e11, "memory_bytes": 1e9, "copy_engines": copy_engines,
                   "local_copy_bandwidth": 1e30, "launch_overhead_s": 0.0, "in_order": in_order},
        "levels": levels or [{"name": "switch", "group": devices, "bandwidth": BW, "latency": LAT}]})


class FixedCost(CostTable):
    """Compute time read from the op's 'seconds' field; one thread per op."""

    def __init__(self, hw):
        super().__init__(hw)

    def time(self, kind, ins, outs):
        return float(kind)

    def threads(self, kind):
        return 1.0


class FakeExecGraph:
    """Just what the simulator reads of an ExecGraph."""

    def __init__(self, devices):
        self.devices = devices
        self.ops, self.buffers = [], []
        self._sched = [[] for _ in range(devices)]
        self.lowered = type("L", (), {"node_ops": []})()

    def buffer(self, device, nbytes):
        self.buffers.append({"device": device, "lo": (0,), "hi": (nbytes // 4,), "bytes": nbytes})
        return len(self.buffers) - 1

    def compute(self, device, seconds, deps=()):
        self.lowered.node_ops.append(str(seconds))
        out = self.buffer(device, 4)
        self.ops.append({"kind": "compute", "device": device, "node": len(self.lowered.node_ops) - 1,
                         "inputs": [], "input_boxes": [], "outputs": [out], "deps": list(deps), "pieces": [],
                         "accumulate": False})
        self._sched[device].append(len(self.ops) - 1)
        return len(self.ops) - 1, out

    def fetch(self, device, sources, deps=()):
        pieces = [(b, (0,), self.buffers[b]["hi"]) for b in sources]
        self.ops.append({"kind": "fetch", "device": device, "node": -1, "inputs": [], "input_boxes": [],
                         "outputs": [self.buffer(device, 4)], "deps": list(deps), "pieces": pieces,
                         "accumulate": False})
        self._sched[device].append(len(self.ops) - 1)
        return len(self.ops) - 1

    def schedule(self, d):
        return self._sched[d]

    def stats(self):
        return {"bytes": 0}

    def peak_memory(self, d):
        return 0


def sim(eg, hw):
    return Simulator(hw, cost=FixedCost(hw)).run(eg)


def test_chain_on_one_device_is_the_sum_of_op_times():
    eg = FakeExecGraph(1)
    a, _ = eg.compute(0, 0.5)
    b, _ = eg.compute(0, 0.25, deps=[a])
    eg.compute(0, 0.125, deps=[b])
    r = sim(eg, profile(devices=1))
    assert r.step_seconds == pytest.approx(0.875)
    assert r.compute_seconds == pytest.approx(0.875)
    assert r.comm_seconds == 0


def test_one_transfer_takes_latency_plus_bytes_over_bandwidth():
    eg = FakeExecGraph(2)
    src = eg.buffer(0, 4_000_000)
    eg.fetch(1, [src])
    r = sim(eg, profile(devices=2))
    assert r.step_seconds == pytest.approx(LAT + 4e6 / BW)
    assert r.comm_seconds == pytest.approx(LAT + 4e6 / BW)


def test_two_transfers_sharing_a_link_split_its_bandwidth():
    eg = FakeExecGraph(3)
    src = eg.buffer(0, 2_000_000)
    eg.fetch(1, [src])  # both leave device 0 over its one up-link
    eg.fetch(2, [src])
    r = sim(eg, profile(devices=3))
    assert r.step_seconds == pytest.approx(LAT + 2 * 2e6 / BW)


def test_transfers_on_disjoint_links_do_not_contend():
    eg = FakeExecGraph(4)
    eg.fetch(1, [eg.buffer(0, 2_000_000)])
    eg.fetch(3, [eg.buffer(2, 2_000_000)])
    r = sim(eg, profile(devices=4))
    assert r.step_seconds == pytest.approx(LAT + 2e6 / BW)


def test_contention_ends_when_one_transfer_finishes():
    # 1 MB and 3 MB from device 0: shared until the small one is done (2 MB moved in all),
    # then the big one gets the whole link for its last 2 MB.
    eg = FakeExecGraph(3)
    eg.fetch(1, [eg.buffer(0, 1_000_000)])
    eg.fetch(2, [eg.buffer(0, 3_000_000)])
    r = sim(eg, profile(devices=3))
    assert r.step_seconds == pytest.approx(LAT + 2e6 / BW + 2e6 / BW)


def test_uplink_of_a_group_is_shared_across_the_hierarchy():
    levels = [{"name": "board", "group": 2, "bandwidth": 4 * BW, "latency": 0.0},
              {"name": "root", "group": 2, "bandwidth": BW, "latency": LAT}]
    hw = profile(devices=4, levels=levels)
    eg = FakeExecGraph(4)
    eg.fetch(2, [eg.buffer(0, 1_000_000)])  # both climb through group {0,1}'s uplink
    eg.fetch(3, [eg.buffer(1, 1_000_000)])
    r = sim(eg, hw)
    assert r.step_seconds == pytest.approx(LAT + 2e6 / BW)
    assert hw.latency(0, 1, 4) == 0.0 and hw.latency(0, 2, 4) == pytest.approx(LAT)


def test_compute_overlaps_communication_on_a_copy_engine():
    eg = FakeExecGraph(2)
    eg.compute(1, 0.002)
    eg.fetch(1, [eg.buffer(0, 3_000_000)])  # independent of the compute op
    r = sim(eg, profile(devices=2))
    comm = LAT + 3e6 / BW
    assert r.step_seconds == pytest.approx(max(0.002, comm))
    assert r.device_exposed[1] == pytest.approx(comm - 0.002)


def test_without_copy_engines_fetches_wait_for_the_compute_stream():
    eg = FakeExecGraph(2)
    eg.compute(1, 0.002)
    eg.fetch(1, [eg.buffer(0, 3_000_000)])
    r = sim(eg, profile(devices=2, copy_engines=0, in_order=True))
    assert r.step_seconds == pytest.approx(0.002 + LAT + 3e6 / BW)


def test_dependent_fetch_waits_for_its_producer():
    eg = FakeExecGraph(2)
    a, out = eg.compute(0, 0.001)
    f = eg.fetch(1, [out], deps=[a])
    eg.compute(1, 0.001, deps=[f])
    r = sim(eg, profile(devices=2))
    assert r.step_seconds == pytest.approx(0.002 + LAT + 4 / BW)


def test_shared_cores_slow_concurrent_ops_down():
    eg = FakeExecGraph(2)
    eg.compute(0, 0.01)
    eg.compute(1, 0.01)
    assert sim(eg, profile(devices=2, cores=1)).step_seconds == pytest.approx(0.02)
    assert sim(eg, profile(devices=2, cores=2)).step_seconds == pytest.approx(0.01)


def test_in_order_stream_blocks_behind_its_head():
    eg = FakeExecGraph(2)
    a, out = eg.compute(0, 0.01)
    eg.compute(1, 0.001, deps=[a])  # device 1's head waits for device 0
    eg.compute(1, 0.001)  # ready at once, but behind the head
    in_order = sim(eg, profile(devices=2, in_order=True))
    free = sim(eg, profile(devices=2))
    assert in_order.step_seconds == pytest.approx(0.012)
    assert free.step_seconds == pytest.approx(0.011)


def test_flop_formulas():
    assert flops("FullyConnected", [(8, 16), (32, 16), (32,)], [(8, 32)]) == 2 * 8 * 32 * 16 + 8 * 32
    assert flops("_backward_FullyConnected_data", [(8, 32), (32, 16), None], [(8, 16)]) == 2 * 8 * 16 * 32
    assert flops("_backward_FullyConnected_weight", [(8, 32), (8, 16)], [(32, 16)]) == 2 * 8 * 16 * 32
    conv = 2 * (2 * 8 * 5 * 5) * (3 * 3 * 3)
    assert flops("Convolution", [(2, 3, 7, 7), (8, 3, 3, 3), (8,)], [(2, 8, 5, 5)]) == conv
    assert flops("_backward_Convolution_data", [(2, 8, 5, 5), (8, 3, 3, 3), None], [(2, 3, 7, 7)]) == conv
    assert flops("_backward_Convolution_weight", [(2, 8, 5, 5), (2, 3, 7, 7)], [(8, 3, 3, 3)]) == conv
    assert flops("dot", [(4, 6), (6, 5)], [(4, 5)]) == pytest.approx(2 * 4 * 5 * 6)
    assert flops("batch_dot", [(3, 4, 6), (3, 6, 5)], [(3, 4, 5)]) == pytest.approx(2 * 3 * 4 * 5 * 6)
    assert flops("Activation", [(4, 5)], [(4, 5)]) == 20


def test_shipped_profiles_load_and_route():
    assert {"p2.8xlarge", "dgx-a100", "2x8-ib", "host"} <= set(available_profiles())
    p2 = load_profile("p2.8xlarge")
    assert p2.devices == 8 and p2.memory_bytes == 12e9
    assert len(p2.route(0, 1, 8)) == 2 and len(p2.route(0, 7, 8)) == 6
    ib = load_profile("2x8-ib")
    assert min(bw for _, bw, _ in ib.route(0, 8, 16)) == 12.5e9
    with pytest.raises(Error, match="cannot simulate"):
        p2.check_devices(16)
    with pytest.raises(Error, match="unknown hardware profile"):
        load_profile("no-such-machine")


def test_real_execgraph_simulates():
    import autotile as at

    sym = at.models.get("mlp-4-256", batch=32)
    eg = at.transform(sym, at.plan(sym, devices=4, algorithm="data"))
    r = Simulator("p2.8xlarge").run(eg)
    assert r.step_seconds > 0 and r.compute_seconds > 0 and r.comm_seconds > 0
    assert r.step_seconds >= r.compute_seconds
    assert r.bytes_moved == eg.stats()["bytes"]
    assert r.peak_memory == [eg.peak_memory(d) for d in range(4)]
    assert all(e >= s for s, e in zip(r.op_start, r.op_end))


def test_cut_bandwidths_price_the_first_cut_at_the_slowest_level():
    ib = load_profile("2x8-ib")
    assert ib.cut_bandwidths([2, 2, 2, 2]) == [12.5e9, 300e9, 300e9, 300e9]
    assert load_profile("dgx-a100").cut_bandwidths([2, 2, 2]) == [300e9] * 3


# ---------------------------------------------------------------------------- host modelling:
# fetches on the cores, co-runner slowdown, wake-up latency, the fetch cost model

class HostCost(FixedCost):
    """FixedCost, plus fetches of `fetch_seconds` and a per-op co-runner slowdown read from
    the op's "slowdown" field (1 if absent)."""

    fetch_seconds = 0.01

    def fetch_time(self, eg, op):
        return self.fetch_seconds

    def slowdown(self, eg, op):
        return float(op.get("slowdown", 1.0))


def host(devices, cores, wake=0.0):
    hw = profile(devices=devices, copy_engines=0, cores=cores, in_order=True)
    hw.device.update({"fetch_on_cores": True, "wake_latency_s": wake})
    return hw


def host_sim(eg, hw):
    return Simulator(hw, cost=HostCost(hw)).run(eg)


def test_host_fetch_is_cpu_work_sharing_the_cores():
    # device 0 computes 10 ms while device 1 copies for 10 ms: one core -> 20 ms, two -> 10 ms;
    # the link's bandwidth plays no part (the copy is the thread's own work)
    eg = FakeExecGraph(2)
    eg.compute(0, 0.01)
    eg.fetch(1, [eg.buffer(0, 4_000_000_000)])
    assert host_sim(eg, host(2, cores=1)).step_seconds == pytest.approx(0.02)
    r = host_sim(eg, host(2, cores=2))
    assert r.step_seconds == pytest.approx(0.01)
    assert r.comm_seconds == pytest.approx(0.01)


def test_co_runner_slowdown_applies_only_while_the_other_core_is_busy():
    eg = FakeExecGraph(2)
    a, _ = eg.compute(0, 0.01)
    eg.ops[a]["slowdown"] = 1.5
    eg.compute(1, 0.005)
    # while both run, op a progresses at 1/1.5: after 5 ms it has 10/3 ms of work done, the
    # remaining 20/3 ms run alone at full speed
    r = host_sim(eg, host(2, cores=2))
    assert r.op_end[a] == pytest.approx(0.005 + (0.01 - 0.005 / 1.5))
    alone = FakeExecGraph(1)
    b, _ = alone.compute(0, 0.01)
    alone.ops[b]["slowdown"] = 1.5
    assert host_sim(alone, host(1, cores=2)).step_seconds == pytest.approx(0.01)


def test_co_runner_slowdown_on_top_of_processor_sharing():
    # three 10 ms ops with slowdown 2 on two cores: each gets 2/3 of a core and, the other
    # core being busy, runs at 1/2 of that: 10 ms / (2/3 / 2) = 30 ms
    eg = FakeExecGraph(3)
    for d in range(3):
        i, _ = eg.compute(d, 0.01)
        eg.ops[i]["slowdown"] = 2.0
    assert host_sim(eg, host(3, cores=2)).step_seconds == pytest.approx(0.03)


def test_thread_that_blocked_on_a_dependency_wakes_late():
    wake = 0.002
    eg = FakeExecGraph(2)
    a, _ = eg.compute(0, 0.01)
    b, _ = eg.compute(1, 0.001, deps=[a])  # device 1 blocks on device 0 from t=0
    r = host_sim(eg, host(2, cores=2, wake=wake))
    assert r.op_start[b] == pytest.approx(0.01 + wake)
    assert r.step_seconds == pytest.approx(0.01 + wake + 0.001)


def test_thread_that_did_not_block_pays_no_wake_latency():
    eg = FakeExecGraph(2)
    a, _ = eg.compute(0, 0.01)
    eg.compute(1, 0.02)
    b, _ = eg.compute(1, 0.001, deps=[a])  # a is done long before device 1 gets to b
    r = host_sim(eg, host(2, cores=2, wake=0.002))
    assert r.op_start[b] == pytest.approx(0.02)


def test_fetch_pieces_count_contiguous_runs():
    from autotile.sim.cost_table import fetch_key, fetch_pieces

    eg = FakeExecGraph(2)
    src = eg.buffer(0, 4 * 24)
    eg.buffers[src].update({"lo": (0, 0, 0), "hi": (2, 3, 4)})
    eg.buffers.append({"device": 1, "lo": (0, 0, 0), "hi": (2, 3, 2), "bytes": 4 * 12})
    op = {"kind": "fetch", "device": 1, "pieces": [(src, (0, 0, 1), (2, 3, 3))], "outputs": [len(eg.buffers) - 1],
          "accumulate": True}
    assert fetch_pieces(eg, op) == [(0, 4 * 12, 6, (2, 3, 2))]  # the last dim is split: 2 x 3 runs
    assert fetch_key(eg, op) == "fetch+|2x3x2|2x3x2"
    # a split of dim 1 with the last dim whole in both buffers: one run of 2 x 4 per index of dim 0
    eg.buffers[-1].update({"hi": (2, 2, 4), "bytes": 4 * 16})
    op["pieces"] = [(src, (0, 1, 0), (2, 3, 4))]
    assert fetch_pieces(eg, op) == [(0, 4 * 16, 2, (2, 2, 4))]
    # the whole source into a destination of the same box: one run
    eg.buffers[-1].update({"hi": (2, 3, 4), "bytes": 4 * 24})
    op["pieces"] = [(src, (0, 0, 0), (2, 3, 4))]
    assert fetch_pieces(eg, op)[0][2] == 1


def test_fit_fetch_recovers_the_cost_model():
    from autotile.sim.cost_table import fit_fetch

    overhead, row, bw, acc_bw = 1e-5, 2e-8, 1e10, 4e9
    samples = []
    for nbytes, rows, acc in [(4e3, 1, False), (4e6, 10, False), (4e6, 1e5, False), (1.6e7, 4, False),
                              (4e6, 4, True), (1.6e7, 16, True), (4e5, 1e4, True)]:
        t = overhead + rows * row + nbytes / (acc_bw if acc else bw)
        samples.append({"seconds": t, "bytes": nbytes, "rows": rows, "accumulate": acc})
    f = fit_fetch(samples)
    assert f["overhead"] == pytest.approx(overhead, rel=1e-6)
    assert f["row_seconds"] == pytest.approx(row, rel=1e-6)
    assert f["bandwidth"] == pytest.approx(bw, rel=1e-6)
    assert f["accumulate_bandwidth"] == pytest.approx(acc_bw, rel=1e-6)


def test_calibration_slowdown_lookup():
    from autotile.sim import Calibration

    cal = Calibration()
    cal.add("Convolution", [(1, 2)], [(1, 2)], 0.010, contended=0.013)
    cal.add("Convolution", [(1, 4)], [(1, 4)], 0.020, contended=0.030)
    cal.add("Convolution", [(1, 8)], [(1, 8)], 0.040, contended=0.036)  # faster with co-runners: noise
    cal.add("Pooling", [(1, 2)], [(1, 2)], 0.010)
    from autotile.sim.cost_table import shape_key

    assert cal.slowdown(shape_key("Convolution", [(1, 2)], [(1, 2)]), "Convolution") == pytest.approx(1.3)
    assert cal.slowdown(shape_key("Convolution", [(1, 8)], [(1, 8)]), "Convolution") == 1.0  # never below 1
    assert cal.slowdown("unmeasured", "Convolution") == pytest.approx(1.3)  # median of 1.3, 1.5, 1.0
    assert cal.slowdown("unmeasured", "Pooling") == 1.0
    assert Calibration(json_roundtrip(cal)).slowdown("unmeasured", "Convolution") == pytest.approx(1.3)


def json_roundtrip(cal):
    import json

    return json.loads(json.dumps({"ops": cal.ops, "fetches": cal.fetches, "fetch": cal.fetch, "machine": cal.machine}))


def test_host_fetch_time_measured_or_modelled():
    from autotile.sim import Calibration

    eg = FakeExecGraph(2)
    f = eg.fetch(1, [eg.buffer(0, 4_000_000)])
    hw = host(2, cores=2)
    cal = Calibration({"fetch": {"overhead": 1e-5, "row_seconds": 0.0, "bandwidth": 1e9, "accumulate_bandwidth": 5e8}})
    cost = CostTable(hw, cal)
    assert cost.fetch_time(eg, eg.ops[f]) == pytest.approx(1e-5 + 4e6 / 1e9)
    cal.add_fetch(eg, eg.ops[f], 0.5, contended=0.75)
    cost = CostTable(hw, cal)
    assert cost.fetch_time(eg, eg.ops[f]) == 0.5
    assert cost.slowdown(eg, eg.ops[f]) == pytest.approx(1.5)


def dispatching_host(devices, cores, step=0.0, op=0.0, compute=0.0, fetch=0.0, gil=True):
    hw = host(devices, cores)
    hw.device.update({"step_overhead_s": step, "op_overhead_s": op, "dispatch_compute_s": compute,
                      "dispatch_fetch_s": fetch, "gil": gil})
    return hw


def test_step_and_op_overheads_on_one_device():
    # 1 ms before the first op, then each of three 10 ms ops costs 0.1 ms more:
    # 1 + 3 x (10 + 0.1) = 31.3 ms; the 2 ms of dispatch are within the ops' own times
    eg = FakeExecGraph(1)
    a, _ = eg.compute(0, 0.01)
    b, _ = eg.compute(0, 0.01, deps=[a])
    eg.compute(0, 0.01, deps=[b])
    r = host_sim(eg, dispatching_host(1, cores=2, step=1e-3, op=1e-4, compute=2e-3))
    assert r.op_start[a] == pytest.approx(1e-3)
    assert r.step_seconds == pytest.approx(1e-3 + 3 * 0.0101)


def test_dispatches_hold_the_interpreter_lock_one_at_a_time():
    # two devices, one 10 ms op each, 1 ms of it Python, 0.5 ms runtime overhead per op, two
    # cores: device 0 dispatches over [0, 1.5] ms then runs its 9 ms kernel -> 10.5 ms;
    # device 1 waits for the lock until 1.5 ms, dispatches until 3 ms, kernel to 12 ms
    eg = FakeExecGraph(2)
    a, _ = eg.compute(0, 0.01)
    b, _ = eg.compute(1, 0.01)
    r = host_sim(eg, dispatching_host(2, cores=2, op=5e-4, compute=1e-3))
    assert r.op_end[a] == pytest.approx(0.0105)
    assert r.op_end[b] == pytest.approx(0.012)
    # without the lock both dispatch at once: 10.5 ms each
    r = host_sim(eg, dispatching_host(2, cores=2, op=5e-4, compute=1e-3, gil=False))
    assert r.op_end[a] == pytest.approx(0.0105) and r.op_end[b] == pytest.approx(0.0105)


def test_tiny_ops_on_two_devices_are_serial_under_the_lock():
    # ops that are all Python (their time within the dispatch figure) take the serial sum
    # whatever the device count: after a 1.4 ms step overhead, 2 devices x 3 ops x (20 us +
    # 7 us overhead) and a 5 us fetch (+ 7 us), one at a time, as on the host runtime
    class TinyFetch(HostCost):
        fetch_seconds = 5e-6

    eg = FakeExecGraph(2)
    for d in range(2):
        prev = []
        for _ in range(3):
            i, _ = eg.compute(d, 2e-5, deps=prev)
            prev = [i]
    eg.fetch(1, [eg.buffer(0, 4)])
    hw = dispatching_host(2, cores=2, step=1.4e-3, op=7e-6, compute=5e-5, fetch=1e-5)
    r = Simulator(hw, cost=TinyFetch(hw)).run(eg)
    assert r.step_seconds == pytest.approx(1.4e-3 + 6 * 2.7e-5 + 1.2e-5)
    # without the lock the two chains run side by side: the longer one (3 ops + the fetch)
    hw.device["gil"] = False
    assert Simulator(hw, cost=TinyFetch(hw)).run(eg).step_seconds == pytest.approx(1.4e-3 + 3 * 2.7e-5 + 1.2e-5)


def test_calibrated_dispatch_figures_replace_the_profile_s():
    from autotile.sim import Calibration

    cal = Calibration({"machine": {"step_overhead_s": 2e-3, "op_overhead_s": 1e-5, "dispatch_compute_s": 3e-5,
                                   "dispatch_fetch_s": 4e-5}})
    hw = Simulator("host", cal).hw
    assert (hw.step_overhead, hw.op_overhead, hw.dispatch_compute, hw.dispatch_fetch) == (2e-3, 1e-5, 3e-5, 4e-5)
    assert hw.gil and not load_profile("p2.8xlarge").gil
