"""Files pytest-jaxstab writes (reports, baselines) and paths it shows: atomic writes, short paths."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["jaxstab_version", "set_path_base", "short_path", "source_anchor", "write_text_atomic"]


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


def source_anchor(location: str | None) -> tuple[str, str, int]:
    """What names a source line across edits of other lines: ``(function, text, occurrence)``.

    ``location`` is ``file:line``. ``function`` is the qualified name of the innermost ``def`` holding
    the line (``Model.__call__``, ``loss.<locals>.inner``; ``<module>`` outside any), ``text`` the
    line's source stripped, ``occurrence`` its rank (1, 2, ...) among the lines of that function with
    the same text: a line keeps its anchor when code above it (or above its function) is edited, and
    changes it only when the line itself, its function's name, or an identical line before it in the
    same function does. ``("", "", 0)`` when the file cannot be read (the line number is then all
    there is). Reads the file as it is now (``linecache.checkcache`` first: a file edited since it was
    cached is read again).

    Example:
        >>> import inspect
        >>> def norm(g):
        ...     return g * g
        >>> here = f"{inspect.getsourcefile(norm)}:{inspect.getsourcelines(norm)[1] + 1}"
        >>> source_anchor(here)[1:]  # doctest: +SKIP
        ('return g * g', 1)
    """
    import ast
    import linecache

    if not location:
        return "", "", 0
    file, sep, number = location.rpartition(":")
    if not sep or not number.isdigit():
        return "", "", 0
    line = int(number)
    linecache.checkcache(file)
    lines = linecache.getlines(file)
    if not 1 <= line <= len(lines):
        return "", "", 0
    text = _code(lines[line - 1])
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return "<module>", text, 1 + sum(1 for t in lines[: line - 1] if _code(t) == text)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    # The defs spanning the line are nested in one another: sorted by their first line, outermost first.
    chain = sorted((n for n in ast.walk(tree) if isinstance(n, defs)
                    and n.lineno <= line <= (n.end_lineno or n.lineno)), key=lambda n: n.lineno)
    names: list[str] = []
    for k, node in enumerate(chain):
        if k and not isinstance(chain[k - 1], ast.ClassDef):
            names.append("<locals>")  # as Python's __qualname__ names a def inside a def
        names.append(node.name)
    function = ".".join(names) or "<module>"
    start = chain[-1].lineno if chain else 1
    rank = 1 + sum(1 for t in lines[start - 1: line - 1] if _code(t) == text)
    return function, text, rank


def _code(line: str) -> str:
    """A source line's code: stripped, a trailing ``# comment`` dropped (a ``#`` inside a string kept)."""
    import io
    import tokenize

    text = line.strip()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):  # part of a bracketed statement
        tokens = []
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    if comment is not None:
        return text[: comment.start[1]].rstrip()
    if "#" in text and not tokens:  # tokenize gave up (an open bracket): cut at a '#' outside quotes
        quote = ""
        for k, ch in enumerate(text):
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == "#":
                return text[:k].rstrip()
    return text
