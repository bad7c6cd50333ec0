"""bench/update_docs.py: the docs' benchmark numbers equal what their committed JSON renders to;
a number edited by hand (in a temporary copy) is reported with file, line, region, old and new;
a fresh bench output differing from the committed JSON is reported, a timing is not."""
import copy
import json
import os
import shutil
import sys

import pytest

from doc_blocks import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import update_docs  # noqa: E402


def test_the_docs_agree_with_the_committed_json(capsys):
    assert update_docs.update(update_docs.doc_files(), check=True) == [], capsys.readouterr().out


def test_every_region_has_a_renderer_and_data():
    regions = 0
    for path in update_docs.doc_files():
        with open(path, encoding="utf-8") as f:
            for m in update_docs.REGION.finditer(f.read()):
                name, args = update_docs.parse_spec(m.group("spec"))
                assert m.group("text").strip(), f"{path}: region '{m.group('spec')}' is empty"
                regions += 1
    assert regions >= 15


def _copy_docs(tmp_path):
    paths = []
    for path in update_docs.doc_files():
        dst = tmp_path / os.path.relpath(path, ROOT)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dst)
        paths.append(str(dst))
    return paths


def test_a_number_edited_by_hand_fails_the_check(tmp_path, capsys):
    paths = _copy_docs(tmp_path)
    bench_md = next(p for p in paths if p.endswith(os.path.join("docs", "benchmarks.md")))
    text = open(bench_md, encoding="utf-8").read()
    m = next(m for m in update_docs.REGION.finditer(text) if m.group("spec").startswith("speedup-table"))
    row = next(line for line in m.group("text").splitlines() if line.strip().startswith("alexnet"))
    tofu = row.split()[2]
    edited = row.replace(tofu, f"{float(tofu) + 0.01:.2f}", 1)
    with open(bench_md, "w", encoding="utf-8") as f:
        f.write(text.replace(row, edited, 1))
    assert update_docs.main(["--check", *paths]) == 1
    out = capsys.readouterr().out
    line = text.count("\n", 0, m.start()) + 1
    assert f"benchmarks.md:{line} region 'speedup-table" in out and edited in out and row in out, out
    # rewriting restores the JSON's figure
    assert update_docs.main(paths) == 0
    assert open(bench_md, encoding="utf-8").read() == text


def test_an_inline_number_edited_by_hand_fails_the_check(tmp_path, capsys):
    paths = _copy_docs(tmp_path)
    memory_md = next(p for p in paths if p.endswith(os.path.join("docs", "memory.md")))
    text = open(memory_md, encoding="utf-8").read()
    m = next(m for m in update_docs.REGION.finditer(text) if m.group("spec").startswith("memory model="))
    old = m.group(0)
    with open(memory_md, "w", encoding="utf-8") as f:
        f.write(text.replace(old, old.replace(f"-->{m.group('text')}<", "-->9.99<"), 1))
    assert update_docs.main(["--check", memory_md]) == 1
    assert f"'9.99', the JSON gives '{m.group('text')}'" in capsys.readouterr().out


def test_fresh_runs_are_compared_on_shared_entries(tmp_path, capsys):
    committed = update_docs.load("speedup.json")
    fresh = copy.deepcopy(committed)
    e = fresh["results"][0]
    s = e["algorithms"]["tofu"]["sims"]["p2.8xlarge"]
    s["step_seconds"] *= 1.5  # a simulated time the docs never print: not a fact
    with open(tmp_path / "speedup.json", "w") as f:
        json.dump(fresh, f)
    assert update_docs.compare_fresh(str(tmp_path)) == []
    s["speedup"] += 0.02
    with open(tmp_path / "speedup.json", "w") as f:
        json.dump(fresh, f)
    bad = update_docs.compare_fresh(str(tmp_path))
    key = f"speedup/p2.8xlarge/{e['model']}/{e['batch']}/tofu"
    assert [b[1] for b in bad] == [key], capsys.readouterr().out


def test_timings_are_not_compared(tmp_path):
    committed = update_docs.load("transformers.json")
    fresh = copy.deepcopy(committed)
    for t in fresh["plan_time"]:
        t["search_seconds"] *= 3
    with open(tmp_path / "transformers.json", "w") as f:
        json.dump(fresh, f)
    assert update_docs.compare_fresh(str(tmp_path)) == []


def test_no_shared_entry_is_a_failure(tmp_path):
    assert update_docs.compare_fresh(str(tmp_path)), "an empty fresh directory must not pass"


@pytest.mark.parametrize("spec", ["memory model=vgg16", "nosuch x=1", "memory model"])
def test_bad_region_specs_name_the_region(spec):
    if spec.startswith("memory model=vgg16"):
        with pytest.raises(KeyError):
            update_docs.render_text(f"<!-- bench:{spec} -->1<!-- /bench -->")  # no column=
        return
    with pytest.raises(ValueError, match="bench region"):
        update_docs.parse_spec(spec)
