"""The runtime bench's thread budget (issue 24): both sides of the 1-device vs k-device step
ratio run on the same cores. `pin_cores` pins the process to `--threads` cores, and the host
runtime splits the cores it may use (its affinity set, not the machine's core count) among its
workers, so the 1-device step's BLAS gets the budget and each of the k workers its share.
Run in a child process: pinning is process-wide."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")


def test_pinned_budget_is_what_the_runtime_splits():
    code = textwrap.dedent("""
        import os
        from autotile.bench.runtime import pin_cores
        from autotile.backend.host_runtime import usable_cores
        before = usable_cores() == len(os.sched_getaffinity(0))
        cores = pin_cores(1)
        print(before, len(cores), usable_cores(),
              sorted(os.sched_getaffinity(0)) == cores)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "1", "1", "True"], out
