"""bench/memory.py --quick runs and its figures are consistent: the ideal is the serial peak
over the device count, control dependencies never cost memory, the communication buffers are
part of the peak, and no device needs less than its share."""
import json

from run_script import run_bench


def test_memory_bench_quick(tmp_path):
    proc = run_bench("memory", tmp_path, "--quick", timeout=300)
    assert "ctrl/ideal" in proc.stdout
    rows = json.loads((tmp_path / "memory.json").read_text())
    assert rows
    for r in rows:
        assert r["ideal"] == r["serial_peak"] / r["devices"]
        ctrl, free = r["with_control_deps"], r["without_control_deps"]
        assert ctrl["peak"] <= free["peak"]
        for m in (ctrl, free):
            assert 0 <= m["beyond_share"] <= m["peak"]
            assert m["peak"] - m["beyond_share"] >= 0.8 * r["ideal"]
