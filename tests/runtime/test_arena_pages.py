"""The host runtime's arenas (backend/host_runtime.py `_zeroed_pages`): freed pages are really
handed back (they read as zeros after, which pages of a shared mapping did not: shmem kept
them, data and all), and arenas take 2 MB pages where the kernel offers them (MultiFetch copies
short strided runs 1.5-2.7x faster from them, docs/benchmarks.md "Host MultiFetch")."""
import mmap
import sys
import types
from pathlib import Path

import pytest

from autotile.backend.host_runtime import HostRuntime, _zeroed_pages

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux mappings")


def test_freed_arena_pages_read_as_zeros():
    pages, arena = _zeroed_pages(8 << 20)
    arena[:] = 7
    start, end = 100, (6 << 20) + 5
    holder = types.SimpleNamespace(_pages={(False, 0): pages})
    HostRuntime._free_span(holder, False, 0, start, end)
    page = mmap.PAGESIZE
    first, last = -(-start // page) * page, end // page * page  # the whole pages inside
    assert not arena[first:last].any()
    assert (arena[:first] == 7).all() and (arena[last:] == 7).all()


def _anon_huge_bytes():
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1]) * 1024
    pytest.skip("no AnonHugePages in /proc/self/smaps_rollup")


def test_arenas_take_huge_pages_where_offered():
    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not mode.exists() or "[never]" in mode.read_text():
        pytest.skip("transparent huge pages are off")
    before = _anon_huge_bytes()
    _, arena = _zeroed_pages(16 << 20)
    arena[:] = 1
    assert _anon_huge_bytes() - before >= 2 << 20
