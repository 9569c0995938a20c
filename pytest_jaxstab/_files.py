"""Files pytest-jaxstab writes (reports, baselines) and paths it shows: atomic writes, short paths."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["jaxstab_version", "set_path_base", "short_path", "write_text_atomic"]


@functools.cache
def jaxstab_version() -> str:
    """pytest-jaxstab's version, as reports and baselines record it (``jst.__version__``).

    Read at first use, not at import: ``importlib.metadata`` costs ~70 ms, paid by every pytest run that
    loads the plugin.
    """
    from importlib import metadata

    try:
        return metadata.version("pytest-jaxstab")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replaces `path` by `text` atomically: a temporary file in the same directory, fsync, `os.replace`.

    On any failure the temporary file is removed and `path` keeps its old content. A new file gets mode
    0644, an existing one keeps its mode.

    Args:
        path: the file to write; missing parent directories are created.
        text: the whole new content (written as UTF-8 with `\\n` line ends).

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     write_text_atomic(pathlib.Path(d, "sub", "b.json"), "{}\\n")
        ...     pathlib.Path(d, "sub", "b.json").read_text()
        '{}\\n'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the target so os.replace is a rename within one file system (atomic).
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600 files; reports and baselines are shared (committed, uploaded as artifacts).
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable on POSIX; not possible (nor needed) on Windows.
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


#: The directory paths are shown relative to: pytest's rootdir during a session (the plugin sets it,
#: so messages name files as node ids do, whatever the working directory), else the working directory.
_base: str | None = None


def set_path_base(base: str | os.PathLike[str] | None) -> str | None:
    """Shows paths relative to `base` from now on (None: the working directory); returns the previous."""
    global _base
    previous, _base = _base, None if base is None else os.path.abspath(base)
    return previous


def short_path(path: str) -> str:
    """``path`` relative to pytest's rootdir during a session (else the working directory) when it lies
    below it, else as given (as pytest shows node ids)."""
    try:
        rel = os.path.relpath(path, _base) if _base is not None else os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
