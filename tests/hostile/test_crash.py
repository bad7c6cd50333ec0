"""Hostile TDL sizes must never crash the process (issue #18, "Crash").

A flat sum of a million terms used to overflow the stack in the parser (one recursion per
term; 50,000 terms were enough on a 1 MB worker-thread stack). Each case runs in a subprocess
on a thread with a 256 KiB stack, so a regression fails this test (negative return code =
the signal that killed it) instead of killing the test run."""
import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent("""
    import sys, threading
    import autotile
    from autotile import _core

    def flat_sum(n):
        return "x -> y: y[i] = " + " + ".join(["x[i]"] * n)

    CASES = {
        "million_terms": (flat_sum(1_000_000), None),
        "deep_parens": ("x -> y: y[i] = " + "(" * 100_000 + "x[i]" + ")" * 100_000, "nested too deeply"),
        "deep_index": ("x -> y: y[i] = x[" + "-" * 100_000 + "i]", "nested too deeply"),
        "many_inputs": (", ".join(f"x{t}" for t in range(70_000)) + " -> y: y[i] = x0[i]",
                        "tensors in the header"),
    }
    text, want = CASES[sys.argv[1]]
    result = {}

    def run():
        try:
            result["ok"] = _core.analyze_tdl(text, [(8,)] * (70_000 if "x69999" in text else 1), [(8,)], 2)
        except autotile.Error as e:
            result["error"] = str(e)

    threading.stack_size(256 * 1024)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if want is None:
        assert "ok" in result, result.get("error")
        assert result["ok"]["strategies"], "the sum over y[i] must split along i"
    else:
        assert want in result.get("error", ""), result
    print("survived")
""")


@pytest.mark.parametrize("case", ["million_terms", "deep_parens", "deep_index", "many_inputs"])
def test_hostile_tdl_does_not_crash(case):
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, case], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    assert proc.returncode == 0, (
        f"{case}: exit {proc.returncode} (negative = killed by signal {-proc.returncode})\n{proc.stderr[-2000:]}")
    assert "survived" in proc.stdout
