"""A plain `at.plan` does not import SciPy (issue 24): scipy.optimize (the integer program a cut
too wide for the DP falls back to) and scipy.special (erf for GELU's kernels) cost 0.2-0.5 s
each on a quiet machine, and the first plan of every process paid them. Checked in a fresh
interpreter, since this one has likely imported SciPy already."""
import subprocess
import sys
import textwrap

import numpy as np

import autotile as at
from autotile.ops import leaky_relu


def test_plain_plan_leaves_scipy_unimported():
    code = textwrap.dedent("""
        import sys
        import autotile as at
        at.plan(at.models.get("mlp-3-64", batch=8), devices=4)
        at.plan(at.models.get("gpt2-small", batch=8, layers=1, d_model=64, heads=2, seq=16, vocab=128), devices=4)
        print("scipy" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_lazy_erf_matches_math_erf():
    x = np.linspace(-4.0, 4.0, 33)
    assert np.allclose(leaky_relu._erf(x), [__import__("math").erf(v) for v in x], rtol=1e-12, atol=1e-15)
