"""The minimal C example of docs/embedding.md, extracted from the page, built against the
installed package and run; its printed plan must equal a Python replan of the same graph.
Skips like test_embed_example.py when cmake, compilers or the installed package are missing."""
import os
import re

import pytest

from autotile import _core

from capi_build import cmake_build, cmake_dir_or_skip, run

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                   "embedding.md")


def _block(text, lang):
    """The first fenced code block of language `lang`."""
    m = re.search(r"```" + lang + r"\n(.*?)```", text, re.S)
    assert m, f"docs/embedding.md has no ```{lang} block"
    return m.group(1)


def _python_replan():
    """The graph linear.c builds, through the Python bindings."""
    g = _core.Graph()
    x = g.add_tensor("x", (256, 1024))
    w = g.add_tensor("w", (512, 1024), "float32", True)
    y = g.add_tensor("y", (256, 512))
    dy = g.add_tensor("dy", (256, 512))
    dw = g.add_tensor("dw", (512, 1024))
    w_new = g.add_tensor("w_new", (512, 1024))
    fc = g.add_node("fc", "FullyConnected", [x, w], [y],
                    "data, weight -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] }", "forward")
    fc_dw = g.add_node("fc_dw", "_backward_FullyConnected_weight", [dy, x], [dw],
                       "dy, data -> dw: dw[o, k] = sum(n) { dy[n, o] * data[n, k] }", "backward")
    g.add_node("update", "sgd_update", [w, dw], [w_new],
               "weight, grad -> out: out[i, j] = sgd(weight[i, j], grad[i, j])", "update")
    g.set_backward_of(fc_dw, fc)
    g.set_gradient(w, dw)
    g.set_gradient(y, dy)
    g.mark_output(w_new)
    return g, _core.plan_graph(g, 4, "tofu")


def test_minimal_c_example_builds_runs_and_matches_python(tmp_path):
    cmake_dir = cmake_dir_or_skip(langs=("c", "cxx"))
    with open(DOC) as f:
        text = f.read()
    src = tmp_path / "src"
    src.mkdir()
    (src / "linear.c").write_text(_block(text, "c"))
    (src / "CMakeLists.txt").write_text(_block(text, "cmake"))
    cmake_build(str(src), str(tmp_path / "build"), cmake_dir)
    out = run(tmp_path / "build" / "linear")

    g, plan = _python_replan()
    cuts = re.findall(r"^cut (\d+): (\d+)-way, (\d+) bytes$", out, re.M)
    assert [int(k) for _, k, _ in cuts] == plan["factors"] == [2, 2]
    assert [float(b) for _, _, b in cuts] == pytest.approx(plan["cut_costs"], abs=0.5)
    names = ["x", "w", "y", "dy", "dw", "w_new"]
    for t, name in enumerate(names):
        line = re.search(r"^" + name + r" +(.*)$", out, re.M)
        assert line, f"no tiling line for {name}:\n{out}"
        assert line.group(1).split() == plan["tensor_tilings"][t], name
    eg = _core.build_exec_graph(g, plan["factors"], plan["tensor_tilings"], plan["node_strategies"])
    for d in range(4):
        ops = eg.schedule(d)
        fetches = sum(eg.op(i)["kind"] == "fetch" for i in ops)
        want = f"device {d}: {len(ops)} ops ({fetches} fetches), arena {eg.arena_bytes[d]} bytes"
        assert want in out, f"{want!r} not in:\n{out}"
