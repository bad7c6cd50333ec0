"""Mixed precision on the MPI runtime (issue 32 item 3): a bfloat16 (and float16) step with
ctx="mpi" on 2 and 4 ranks equals the same step on one device within the rounding of the
plan's partial sums; bf16 tiles move as uint16 bits through MPI RMA and accumulate in float.
Skipped without mpi4py or mpirun; every launch runs under a timeout."""
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MPIRUN = shutil.which("mpirun") or shutil.which("mpiexec")
try:
    import mpi4py  # noqa: F401
except ImportError:
    MPIRUN = None
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="needs mpi4py and mpirun (docs/mpi.md)")
pytest.importorskip("ml_dtypes")


def launch(ranks, *args, timeout=240):
    version = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True, timeout=30).stdout
    extra = ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []
    # PYTHONPATH as tests/conftest.py set it (the in-tree build or the installed package), never
    # the source tree itself: without an in-tree build that has no _core
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [MPIRUN, *extra, "-np", str(ranks), sys.executable, os.path.join(HERE, "bf16_mpi_step.py"), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpirun did not finish in {timeout} s: {' '.join(cmd)}\n{out[-4000:]}")
    assert proc.returncode == 0, out[-4000:]
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


@pytest.mark.parametrize("model,ranks,dtype", [("mlp", 2, "bfloat16"), ("cnn", 4, "bfloat16"),
                                               ("cnn", 2, "float16")])
def test_mpi_mixed_precision_step_equals_one_device(model, ranks, dtype):
    r = launch(ranks, model, "--dtype", dtype)
    unit = 2 ** -8 if dtype == "bfloat16" else 2 ** -11
    assert r["dtypes"] == ["float32"]  # master weights, gradients, BatchNorm statistics
    assert r["grads"] <= 4 * unit and r["params"] <= unit and r["outputs"] <= 2 * unit and r["aux"] <= unit, r
    assert r["vs_float32"] > 1e-6, r  # the one-device step did run in low precision
