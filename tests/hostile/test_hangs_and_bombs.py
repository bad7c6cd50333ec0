"""Inputs that used to hang or allocate without bound (issue #25): a mesh axis of a huge prime
size, a FIFO or a link to /dev/zero where a model or weight file belongs, a training batch
whose synthetic data set would take gigabytes. Each runs in a child process with a time
limit, so a hang fails the test instead of the suite, and must end in autotile.Error (exit 1
or 2 on the CLI) naming the culprit."""
import os

import pytest

from subprocess_util import PRINT_PEAK, peak_rss, run_cli, run_python

HUGE_PRIME = 2 ** 61 - 1  # a Mersenne prime: trial division would run ~1.5e9 steps

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _refused(proc, *names):
    """The child ended in exactly autotile.Error whose message names every one of `names`."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Error|"), proc.stdout + proc.stderr
    for n in names:
        assert n in proc.stdout, proc.stdout


CATCH = """
import sys
import autotile as at
from autotile.errors import Error
try:
    {call}
    print("no error")
except Error as e:
    if type(e) is not Error:
        raise
    print("Error|" + str(e))
"""


def _child(call: str, *args):
    return run_python(CATCH.format(call=call), *args)


def test_huge_prime_mesh_axis_is_refused_before_factoring():
    _refused(_child(f"at.plan('mlp', mesh={{'model': {HUGE_PRIME}}})"), "model", str(HUGE_PRIME), "4096")
    _refused(_child(f"at.plan('mlp', mesh={{'batch': 2, 'model': {HUGE_PRIME}}})"), str(2 * HUGE_PRIME), "4096")
    _refused(_child(f"at.plan('mlp', devices={HUGE_PRIME})"), "devices", str(HUGE_PRIME))


def test_huge_prime_mesh_axis_on_the_cli_is_a_usage_error():
    proc = run_cli("plan", "mlp", "--mesh", f"model={HUGE_PRIME}")
    assert proc.returncode == 2, proc.stderr
    assert "--mesh" in proc.stderr and str(HUGE_PRIME) in proc.stderr and "Traceback" not in proc.stderr


@needs_fifo
def test_plan_of_a_fifo_named_like_a_symbol_file(tmp_path):
    fifo = tmp_path / "net-symbol.json"
    os.mkfifo(fifo)  # nobody ever writes: open() without O_NONBLOCK would block forever
    proc = run_cli("plan", str(fifo), "--devices", "2")
    assert proc.returncode == 1, proc.stderr
    assert "FIFO" in proc.stderr and str(fifo) in proc.stderr and "Traceback" not in proc.stderr
    _refused(_child("at.sym.load(sys.argv[1])", str(fifo)), "FIFO", str(fifo), "not a regular file")


@needs_fifo
def test_plan_of_a_fifo_or_directory_named_like_an_onnx_file(tmp_path):
    """Named for what it is, not reported missing (and never opened for a blocking read)."""
    pytest.importorskip("onnx")
    fifo, folder = tmp_path / "net.onnx", tmp_path / "dir.onnx"
    os.mkfifo(fifo)
    folder.mkdir()
    for path, kind in ((fifo, "FIFO"), (folder, "directory")):
        proc = run_cli("plan", str(path), "--devices", "2")
        assert proc.returncode == 1, proc.stderr
        assert kind in proc.stderr and str(path) in proc.stderr and "does not exist" not in proc.stderr
        assert "Traceback" not in proc.stderr


@needs_fifo
def test_nd_load_of_a_fifo(tmp_path):
    fifo = tmp_path / "net-0000.params"
    os.mkfifo(fifo)
    _refused(_child("at.nd.load(sys.argv[1])", str(fifo)), "NDArray file", "FIFO", str(fifo))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("name, call, what", [("net-symbol.json", "at.sym.load(sys.argv[1])", "symbol file"),
                                              ("net-0000.params", "at.nd.load(sys.argv[1])", "NDArray file")])
def test_a_link_to_dev_zero_is_not_read_until_memory_runs_out(tmp_path, name, call, what):
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    proc = run_python(CATCH.format(call=call) + PRINT_PEAK, str(link))
    _refused(proc, what, str(link), "character device")
    assert peak_rss(proc.stdout) < 1 << 30


def test_a_directory_is_named_as_one(tmp_path):
    _refused(_child("at.nd.load(sys.argv[1])", str(tmp_path)), "NDArray file", "directory")


@pytest.mark.parametrize("data", ["synthetic", "digits"])
def test_train_checks_the_batch_before_allocating_the_data_set(data):
    # batch 10**6 of 64 values: 16 batches of synthetic data would be 3.8 GiB (5 with the test set)
    proc = run_python(CATCH.format(call=f"at.train('mlp', data={data!r}, batch=10**6, epochs=1, out=False)")
                      + PRINT_PEAK)
    _refused(proc, "batch 1000000")
    assert peak_rss(proc.stdout) < 1 << 30


@needs_fifo
def test_bench_profile_that_is_a_fifo(tmp_path):
    fifo = tmp_path / "machine.json"
    os.mkfifo(fifo)
    proc = run_cli("bench", "mlp", "--quick", "--profile", str(fifo))
    assert proc.returncode == 2, proc.stderr
    assert "--profile" in proc.stderr and "FIFO" in proc.stderr and str(fifo) in proc.stderr
    _refused(_child("from autotile.sim import load_profile; load_profile(sys.argv[1])", str(fifo)),
             "hardware profile", "FIFO")
