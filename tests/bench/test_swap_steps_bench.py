"""autotile bench memory's executed rows (bench/swap_steps.py): a small RNN at half its need
on one device is swapped, its chained steps are the same plan's unswapped steps and the
unconstrained plan's bit for bit (one device: the same partition), and the comparison sees a
single changed bit."""
import numpy as np

from autotile.bench import swap_steps


def test_small_rnn_at_half_its_need_runs_the_unconstrained_steps():
    row = swap_steps.executed_row("rnn", swap_steps.small_models()["rnn"], 1, lambda s: None)
    assert row[3] == "swap" and row[6] == "yes" and row[7] == "bits", row
    assert float(row[5].split()[0]) > 0, "some results stay in host memory"


def test_differences_see_one_changed_bit():
    from autotile.backend.result import Result

    a = Result(outputs=[np.ones(3, np.float32)], grads={"w": np.arange(4, dtype=np.float32)})
    b = Result(outputs=[np.ones(3, np.float32)], grads={"w": np.arange(4, dtype=np.float32)})
    assert swap_steps.differences([a], [b]) == (True, 0.0)
    b.grads["w"][3] = np.nextafter(np.float32(3), np.float32(4))
    same, diff = swap_steps.differences([a], [b])
    assert not same and 0 < diff < 1e-6
