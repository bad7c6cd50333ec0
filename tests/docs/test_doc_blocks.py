"""Every python/bash/console block of README.md and docs/*.md runs as written (doc_blocks.py says
how blocks are found, marked and run). A block that needs a GPU, MPI ranks or a file the
checkout does not ship carries `<!-- skip: REASON -->`, one that takes long `<!-- slow: REASON -->`
(run by .ci/nightly); `<!-- file: NAME -->` writes the block to NAME for a later block to run."""
import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading

import pytest

from block_worker import PREFIX
from doc_blocks import ROOT, all_blocks, blocks, console_script, COMMAND

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "block_worker.py")

BLOCKS = [b for b in all_blocks() if b.kind]
TIMEOUT = 600
_pages = {}  # page -> {"dir": temp dir, "proc": its python process, "done": executed block lines, "log"}


def _param(b):
    marks = [pytest.mark.slow] if b.marker == "slow" else []
    return pytest.param(b, id=b.id, marks=marks)


def _page(path):
    page = _pages.get(path)
    if page is None:
        tmp = tempfile.mkdtemp(prefix="autotile-doc-")
        for name in ("tests", "bench", "examples"):
            os.symlink(os.path.join(ROOT, name), os.path.join(tmp, name))
        page = _pages[path] = {"dir": tmp, "proc": None, "done": set(), "log": os.path.join(tmp, "python-blocks.log")}
    return page


def _env(tmp):
    env = dict(os.environ, MPLBACKEND="Agg", AUTOTILE_BENCH_OUT=os.path.join(tmp, "bench-out"))
    return env


def _worker(page):
    """The page's python process (block_worker.py), started on its first python block."""
    if page["proc"] is None or page["proc"].poll() is not None:
        page["proc"] = subprocess.Popen([sys.executable, WORKER], cwd=page["dir"], env=_env(page["dir"]),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(page["log"], "a"), text=True)
        atexit.register(page["proc"].kill)
    return page["proc"]


def _exec_python(b, page):
    proc = _worker(page)
    proc.stdin.write(json.dumps({"id": b.id, "code": b.code}) + "\n")
    proc.stdin.flush()
    answer = []

    def read():
        for line in proc.stdout:
            if line.startswith(PREFIX):
                answer.append(json.loads(line[len(PREFIX):]))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    page["done"].add(b.line)
    if not answer:
        proc.kill()
        with open(page["log"]) as f:
            tail = f.read()[-3000:]
        pytest.fail(f"{b.id}: no answer within {TIMEOUT} s (or the page's python process died)\n{tail}")
    if not answer[0]["ok"]:
        with open(page["log"]) as f:
            tail = f.read()[-2000:]
        pytest.fail(f"{b.id}:\n{answer[0]['error']}\n--- printed\n{tail}", pytrace=False)


def _write_files(block, page):
    """The page's `file:` blocks up to this one, written into its directory."""
    for b in blocks(block.path):
        if b.line > block.line:
            break
        if b.marker == "file":
            with open(os.path.join(page["dir"], b.reason), "w", encoding="utf-8") as f:
                f.write(b.code)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_doc_block_runs(block):
    if block.marker == "skip":
        pytest.skip(block.reason)
    page = _page(block.path)
    _write_files(block, page)
    if block.marker == "file":
        return
    if block.kind == "python":
        # the page's earlier python blocks first, when this one runs alone (-k, a rerun)
        for earlier in blocks(block.path):
            if earlier.line >= block.line:
                break
            if earlier.kind == "python" and earlier.marker is None and earlier.line not in page["done"]:
                _exec_python(earlier, page)
        _exec_python(block, page)
        return
    script = block.code if block.kind == "bash" else console_script(block.code)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=page["dir"], env=_env(page["dir"]),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, (f"{block.id}: exit {r.returncode}\n--- script\n{script}\n--- stdout\n"
                               f"{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")


def test_command_blocks_are_tagged():
    """An untagged block that starts with a shell command would never run: tag it."""
    bad = [b.id for b in all_blocks() if not b.lang and COMMAND.match(b.code)]
    assert not bad, f"untagged command blocks (tag them bash or console): {bad}"


def test_markers_name_a_reason():
    bad = [b.id for b in all_blocks() if b.marker and not b.reason]
    assert not bad, f"skip/slow markers without a reason: {bad}"


def test_the_blocks_are_found():
    """The extractor sees the README's python blocks (a regex gone wrong would pass vacuously)."""
    readme = [b for b in BLOCKS if b.path == "README.md" and b.kind == "python"]
    assert len(readme) >= 2, [b.id for b in BLOCKS]

