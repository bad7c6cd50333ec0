"""The MPI runtime (ctx="mpi") under mpirun: a training step on 2 and 4 ranks (4 oversubscribed
on small machines) equals the single-device step on an MLP, a CNN and an LSTM; steps with
params kept sharded and a checkpoint resumed on another number of ranks equal single-device
steps; the world size and the execution graph are checked across ranks; a rank that raises,
is killed or hangs makes the others exit with an error in bounded time; the CLI runs, saves
and resumes. Every launch runs under a timeout; skipped without mpi4py or mpirun."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

try:
    import mpi4py  # noqa: F401

    _HAVE_MPI4PY = True
except ImportError:
    _HAVE_MPI4PY = False

MPIRUN = shutil.which("mpirun") or shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(not (_HAVE_MPI4PY and MPIRUN),
                                reason="needs mpi4py and mpirun: pip install 'autotile[mpi]' (docs/mpi.md)")

LAUNCH_TIMEOUT = 240  # seconds for one mpirun, far above what a launch takes (2-10 s)


def _launcher_args():
    """Open MPI refuses more ranks than cores unless told; MPICH (hydra) needs nothing."""
    try:
        version = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []


def mpirun(np_, argv, timeout=LAUNCH_TIMEOUT, launcher=()):
    """Runs `mpirun -np np_ <argv>` in its own process group, killed whole on timeout.
    Returns (returncode, stdout + stderr, seconds)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    cmd = [MPIRUN, *_launcher_args(), *launcher, "-np", str(np_), *argv]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpirun did not finish in {timeout} s: {' '.join(cmd)}\n{out[-4000:]}")
    return proc.returncode, out, time.monotonic() - t0


def script(name, *args):
    return [sys.executable, os.path.join(HERE, name), *args]


def results(out):
    """The JSON result lines (ranks' lines may be interleaved by the launcher)."""
    found, pos = [], 0
    decoder = json.JSONDecoder()
    while True:
        pos = out.find('{"ok"', pos)
        if pos < 0:
            return found
        value, end = decoder.raw_decode(out, pos)
        found.append(value)
        pos = end


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("model", ["mlp", "cnn", "lstm", "dropout", "bn"])
def test_step_matches_single_device(model, ranks):
    """Outputs, gradients, updated params and BatchNorm statistics equal the single-device
    step (dropout: every rank drops exactly the single-device units)."""
    rc, out, _ = mpirun(ranks, script("mpi_step.py", model))
    assert rc == 0, out[-4000:]
    [res] = results(out)
    assert res["ok"] and res["ranks"] == ranks
    assert res["bytes"] == pytest.approx(res["plan_bytes"])


@pytest.mark.parametrize("options", [["--strided", "rows"], ["--window", "create"], ["--gather", "all"],
                                     ["--algorithm", "data"]])
def test_step_variants_match_single_device(options):
    """Strided pieces as contiguous rows, a window over a NumPy arena (Win.Create), results
    on every rank, a data-parallel plan."""
    rc, out, _ = mpirun(4, script("mpi_step.py", "cnn", *options))
    assert rc == 0, out[-4000:]
    res = results(out)
    assert len(res) == (4 if "all" in options else 1)
    assert sorted(r["rank"] for r in res) == ([0, 1, 2, 3] if "all" in options else [0])


@pytest.mark.parametrize("model,options", [("bn", ["--inference"]), ("lstm", ["--inference"]),
                                           ("bn", ["--optimizer", "momentum"]), ("cnn", ["--optimizer", "adam"])])
def test_inference_and_optimizers_match_single_device(model, options):
    """Partitioned inference (train=False) and steps with optimizer state and optimizer_args
    (lr) on 4 ranks equal one device: outputs, grads, params, optimizer states, aux."""
    rc, out, _ = mpirun(4, script("mpi_step.py", model, *options))
    assert rc == 0, out[-4000:]
    [res] = results(out)
    assert res["train"] == ("--inference" not in options)
    assert res["states"] == (0 if "--optimizer" not in options else res["grads"] * (1 if "momentum" in options else 2))
    assert res["aux"] == (4 if model == "bn" else 0)


def test_sharded_steps_and_checkpoint_resumed_on_other_rank_count(tmp_path):
    """Three momentum steps of the BatchNorm CNN with params, momenta and moving statistics
    kept on the ranks, checkpointed after step 2 on 2 ranks and resumed on 4."""
    ckpt = str(tmp_path / "ckpt")
    steps = ("mpi_steps.py", "bn", "--optimizer", "momentum", "--steps", "3")
    rc, out, _ = mpirun(2, script(*steps, "--save-at", "2", "--ckpt", ckpt))
    assert rc == 0, out[-4000:]
    assert results(out)[0]["steps"] == 3
    manifest = json.load(open(os.path.join(ckpt, "manifest.json")))
    assert manifest["step"] == 2 and manifest["devices"] == 2
    assert {"bn1_moving_mean", "bn2_moving_var", "conv1_weight_mom"} <= set(manifest["tensors"])
    assert sorted(os.listdir(ckpt)) == ["manifest.json", "step00000002-rank0.params", "step00000002-rank1.params"]
    # resume at step 2 on 4 ranks (another plan): step 3 equals the third single-device step
    rc, out, _ = mpirun(4, script(*steps, "--resume", ckpt))
    assert rc == 0, out[-4000:]
    [res] = results(out)
    assert res["first_step"] == 2 and res["step_after"] == 3


def test_world_size_mismatch_is_refused():
    rc, out, _ = mpirun(2, script("mpi_step.py", "mlp", "--devices", "4"))
    assert rc != 0
    assert "devices=4 but the MPI world has 2 rank(s)" in out
    assert "mpirun -np 4" in out
    assert not results(out)


def test_exec_graph_mismatch_names_the_ranks():
    rc, out, _ = mpirun(2, script("mpi_step.py", "mlp", "--algorithm-rank1", "data"))
    assert rc != 0
    assert "the execution graph differs across ranks: ranks [1] built" in out
    assert "ranks [0] built" in out and "Refusing to run" in out
    assert not results(out)


def _errors(out):
    """rank -> its 'RANK r ERROR: ...' message. The launcher forwards each rank's output as it
    comes, so one rank's message can follow another's on the same line: split at the tags."""
    errors = {}
    for piece in re.split(r"(?=RANK \d+ )", out):
        m = re.match(r"RANK (\d+) ERROR: ([^\n]*)", piece)
        if m:
            errors[int(m.group(1))] = m.group(0)
    return errors


def test_rank_that_raises_stops_the_others():
    rc, out, seconds = mpirun(4, script("mpi_fault.py", "cnn", "--fault", "raise", "--timeout", "30"), timeout=120)
    assert rc != 0
    errors = _errors(out)
    assert "rank 1:" in errors[1] and "failed: RuntimeError: injected fault" in errors[1]
    for r in (0, 2, 3):  # the others stop at once, quoting rank 1, not after their timeout
        assert f"rank {r} stops: rank 1 failed:" in errors[r] and "injected fault" in errors[r], out[-3000:]
    assert seconds < 30, f"took {seconds:.1f} s"
    assert "FINISHED" not in out


def test_killed_rank_ends_the_job():
    rc, out, seconds = mpirun(4, script("mpi_fault.py", "cnn", "--fault", "kill", "--timeout", "5"), timeout=120)
    assert "RANK 1 KILLING ITSELF" in out
    assert rc != 0
    assert "FINISHED" not in out
    assert seconds < 60, f"took {seconds:.1f} s"


def test_hung_rank_times_out_the_others():
    """A stopped rank (the launcher sees nothing wrong): the others time out waiting for it,
    name it, and the job ends in bounded time."""
    rc, out, seconds = mpirun(4, script("mpi_fault.py", "cnn", "--fault", "stop", "--timeout", "5"), timeout=120)
    assert "RANK 1 STOPPING ITSELF" in out
    assert rc != 0
    errors = _errors(out)
    assert errors and set(errors) <= {0, 2, 3}, out[-3000:]
    assert any("timed out after 5 s waiting for rank 1" in e and "stuck or dead" in e for e in errors.values())
    assert all("rank 1" in e for e in errors.values())
    assert seconds < 60, f"took {seconds:.1f} s"
    assert "FINISHED" not in out


def test_watchdog_aborts_a_collective_a_peer_never_joins():
    """Rank 1 stops after the step; the others block in the collectives that gather results
    and free the windows, where no poll can time out: the watchdog aborts the job after
    timeout + grace."""
    rc, out, seconds = mpirun(4, script("mpi_fault.py", "cnn", "--fault", "stop-in-gather", "--timeout", "3"),
                              timeout=120)
    assert "RANK 1 STOPPING ITSELF IN GATHER" in out
    assert rc != 0
    # rank 0 blocks in the gather; a sender may get past it and block in the next collective
    assert ("no answer from MPI for more than 13 s while gathering results" in out or
            "no answer from MPI for more than 13 s while freeing the RMA windows" in out), out[-3000:]
    assert seconds < 60, f"took {seconds:.1f} s"
    assert "FINISHED" not in out


def test_cli_runs_saves_and_resumes(tmp_path):
    import autotile as at

    model = str(tmp_path / "small-symbol.json")
    at.models.mlp(batch=8, layers=2, hidden=32, classes=10).save(model)
    ckpt = str(tmp_path / "ckpt")
    cli = [sys.executable, "-m", "autotile.cli", "run", model, "--ctx", "mpi", "--checkpoint", ckpt]
    rc, out, _ = mpirun(2, cli + ["--devices", "2", "--steps", "2"])
    assert rc == 0, out[-4000:]
    assert "step 1/2: loss" in out and "step 2/2: loss" in out
    # the loss each step trains, not a constant: the same as the host runtime's on 2 devices
    mpi_losses = [float(v) for v in re.findall(r"step \d/2: loss (-?\d+\.\d+)", out)]
    host = subprocess.run([sys.executable, "-m", "autotile.cli", "run", model, "--devices", "2", "--steps", "2",
                           "-q"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    host_losses = [float(v) for v in re.findall(r"step \d/2: loss (-?\d+\.\d+)", host.stdout)]
    assert len(host_losses) == 2 and mpi_losses == pytest.approx(host_losses, abs=1e-5), (out, host.stdout)
    assert mpi_losses[1] != mpi_losses[0]
    assert json.load(open(os.path.join(ckpt, "manifest.json")))["step"] == 2
    rc, out, _ = mpirun(4, cli + ["--devices", "4", "--steps", "3"])
    assert rc == 0, out[-4000:]
    assert "at step 2" in out and "step 3/3: loss" in out and "step 1/3" not in out
    rc, out, _ = mpirun(2, cli + ["--devices", "4", "--steps", "1"])
    assert rc == 1 and "autotile: error: --devices 4 but the MPI world has 2 rank(s)" in out


@pytest.mark.parametrize("ranks", [1, 2])
def test_results_kept_on_the_host_carry_over_steps(ranks):
    """A weight-heavy MLP at half its need: each rank loads weights and momenta into its host
    pool, swaps them in at first use and keeps its results there; three steps carried on the
    ranks are bit for bit the unconstrained plan's three steps."""
    rc, out, _ = mpirun(ranks, script("mpi_swap_steps.py"))
    assert rc == 0, out[-4000:]
    [res] = results(out)
    assert res["ok"] and res["ranks"] == ranks and res["tensors"] > 0
    for r in res["ranks_stats"]:
        assert r["arena"] <= res["budget"] and r["host_tiles"] > 0 and r["swaps"] > 0
