"""Device counts up to the documented 4096 (issue #18, "Hang and memory blow-up at scale").

One training step of a 16 -> 8 FullyConnected layer used to take 6 s on 1024 devices and
more than 300 s on 4096: one thread per device polling the others' events, and collectives
that pulled from every device of a group in one MultiFetch (devices^2 pieces). The
per-device work is now bounded: the host runtime runs ready ops on a small thread pool and
collectives over large groups run one cut at a time. bench/scaling.py has the timings; here
the step on 1024 devices must still equal the single-device step, and the pieces and
dependencies per device must stay a small multiple of the cuts, not of the devices."""
import numpy as np
import pytest

import autotile as at


def _fc():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=8, name="fc"), name="softmax")


@pytest.mark.slow
def test_1024_devices_step_equals_one_device_with_bounded_pieces():
    net = _fc()
    rng = np.random.default_rng(3)
    batch = 2048
    inputs = {"data": rng.standard_normal((batch, 16)).astype(np.float32),
              "softmax_label": rng.integers(0, 8, batch).astype(np.float32)}
    params = {"fc_weight": (rng.standard_normal((8, 16)) * 0.3).astype(np.float32),
              "fc_bias": rng.standard_normal(8).astype(np.float32)}
    plan = at.plan(net, devices=1024, shapes={k: v.shape for k, v in inputs.items()})
    eg = at.transform(net, plan)
    stats = eg.stats()
    pieces, deps = stats["pieces"], stats["dependencies"]
    assert pieces == sum(len(o["pieces"]) for o in eg.ops) and deps == sum(len(o["deps"]) for o in eg.ops)
    cuts = len(plan.factors)
    # a flat reduction or gather over all 1024 devices alone would be 1024 pieces per device
    assert pieces <= 1024 * 4 * cuts, pieces
    assert deps <= 1024 * 12 * cuts, deps
    res = at.backend.run(net, devices=1024, inputs=inputs, params=params, train=True, plan=plan)
    ref = at.backend.run(net, inputs=inputs, params=params, train=True)
    assert res.stats["bytes"] == pytest.approx(plan.comm_bytes)
    np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-6)
    for p in params:
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-4, atol=1e-4, err_msg=p)
        np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-4, atol=1e-5, err_msg=p)


def test_a_deadlocked_execution_graph_is_an_error_not_a_hang():
    """The host runtime names an op that can never run instead of waiting forever."""
    from autotile.backend.host_runtime import HostRuntime

    net = _fc()
    plan = at.plan(net, devices=2, shapes={"data": (8, 16), "softmax_label": (8,)})
    eg = at.transform(net, plan)
    first = eg.schedule(0)[0]
    last = eg.schedule(1)[-1]
    eg.ops[first]["deps"].append(last)  # device 0's first op now waits for device 1's last
    rt = HostRuntime(eg, timeout=60)
    with pytest.raises(at.Error, match="deadlock"):
        rt.run()
