"""The cache's files on disk: their names, atomic writes (a unique temporary name, then a
rename), the advisory file locks, and the checks of a file's hash, stamp and writer."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")
_KEY = re.compile(r"^[0-9a-f]{16}$")
_MANIFEST = "manifest.json"
_LATEST = "LATEST"
_TABLE = "table.nc"
_LOCK = ".lock"
_PARTIAL = "partial"  # checkpoints of the cells being computed (Cache.partial)

_FORMAT = "dpsim-experiment-cache-2"
_OLD_FORMATS = ("dpsim-experiment-cache-1",)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tmp_name(path: Path) -> Path:
    """A temporary name beside ``path`` unique to this process and call."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` to a unique temporary name, then rename it onto ``path``."""
    tmp = _tmp_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write(Path(path), lambda tmp: tmp.write_text(text))


@contextmanager
def file_lock(path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if missing) for the ``with`` block:
    ``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows.  Released when the process dies."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    time.sleep(0.05)
            try:
                yield
            finally:
                fh.seek(0)
                msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _try_lock(path: Path):
    """An open handle holding the exclusive lock on ``path``, or ``None`` if another process
    holds it (POSIX; on Windows always ``None``: prune then skips the folder)."""
    try:
        import fcntl
    except ImportError:
        return None
    fh = open(path, "a+")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def _stamp(path: Path):
    """``(inode, size, mtime_ns)`` of ``path`` (``None`` if missing): every manifest write is a
    rename of a new file, so another process's write changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _owner_alive(tmp: Path) -> bool:
    """Whether the process that named temporary file ``tmp`` (``.<name>.<pid>.<hex>.tmp``) runs."""
    parts = tmp.name.split(".")
    try:
        pid = int(parts[-3])
    except (IndexError, ValueError):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
