"""bench/memory.py --quick runs and its figures are consistent: the ideal is the serial peak
over the device count, control dependencies never cost memory, the communication buffers are
part of the peak, and no device needs less than its share."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_memory_bench_quick(tmp_path):
    env = dict(os.environ, AUTOTILE_BENCH_OUT=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "memory.py"), "--quick"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
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
