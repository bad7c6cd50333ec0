"""Reading a user's file without blocking or reading without bound.

``open()`` on a FIFO blocks until a writer appears, and ``read()`` of ``/dev/zero`` (or of a
link to it) never ends. The readers of model and weight files therefore open with
``O_NONBLOCK`` (a FIFO opens at once), refuse anything that is not a regular file, naming
what the path is, and read at most the size the file had when opened.
"""
from __future__ import annotations

import os
import stat
from typing import Union

from .errors import Error

#: read-only, and a FIFO opens at once (O_NONBLOCK) instead of waiting for a writer
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a file of `mode` (``st_mode``) is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _read_fd(fd: int, what: str, source: str) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise Error(f"cannot read {what} '{source}': it is {file_kind(st.st_mode)}, not a regular file")
    chunks, left = [], st.st_size
    while left > 0:  # a file that grows while read is cut at the size it had
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_regular_file(path: Union[str, bytes, int, os.PathLike], what: str) -> bytes:
    """The bytes of the regular file `path` (or of the open descriptor `path`, read from its
    position and left open: it is the caller's). Error naming `what` and the path when it
    cannot be opened or is a FIFO, device, socket or directory."""
    source = f"<fd {path}>" if isinstance(path, int) else os.fsdecode(path)
    try:
        if isinstance(path, int):
            return _read_fd(path, what, source)
        fd = os.open(path, _OPEN_FLAGS)
        try:
            return _read_fd(fd, what, source)
        finally:
            os.close(fd)
    except OSError as e:
        raise Error(f"cannot read {what} '{source}': {e}") from None
