"""The one JSONL reader and writer: line-numbered records, errors that name the file and
the line, and writes that replace a file whole or not at all.

Lines are split on "\\n" only (a trailing "\\r" is dropped), as JSON Lines defines them:
text such as U+2028 or U+0085, which JSON leaves unescaped and `str.splitlines()` would
break on, stays inside its record. A UTF-8 byte-order mark before the first line is ignored.
Files are streamed, never held whole.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import UserError


def read_text(path: Path, what: str) -> str:
    """A whole (small) text file, or a one-line error naming it: missing, a directory, not
    UTF-8. A byte-order mark is dropped."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise UserError(f"is a directory, expected {what}", file=str(path)) from None
    except UnicodeDecodeError:
        raise UserError("not valid UTF-8", file=str(path)) from None


def text_lines(path: Path, what: str = "a JSONL file", *, name: str = "file",
               on_raw: Callable[[bytes], Any] | None = None,
               utf8_hint: str = "") -> Iterable[tuple[int, str]]:
    """(line number, text) for each line, blank ones included. `name` says what is missing
    when the file is; `on_raw` sees each line's bytes as read (e.g. a digest of the file)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"{name} not found", file=str(path)) from None
    except IsADirectoryError:
        raise UserError(f"is a directory, expected {what}", file=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read it ({exc.strerror or exc})", file=str(path)) from None
    with f:
        for n, raw in enumerate(f, start=1):
            if on_raw is not None:
                on_raw(raw)
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"not valid UTF-8 (byte {exc.start + 1} of the line){utf8_hint}",
                                file=str(path), where=f"line {n}") from None
            yield n, text.rstrip("\n").removesuffix("\r")


def json_object(path: Path, n: int, line: str) -> dict:
    """One line as a JSON object, or a one-line error naming the file, line and column."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON ({exc.msg} at column {exc.colno})", file=str(path),
                        where=f"line {n}") from None
    if not isinstance(obj, dict):
        raise UserError(f"expected a JSON object, got {type(obj).__name__}", file=str(path),
                        where=f"line {n}")
    return obj


def read_jsonl(path: Path, what: str = "a JSONL file", **kw) -> Iterable[tuple[int, dict]]:
    """(line number, object) for each non-blank line (`kw` as for `text_lines`)."""
    for n, line in text_lines(path, what, **kw):
        if line.strip():
            yield n, json_object(path, n, line)


def atomic_write_text(path: Path, text: str) -> Path:
    """Write through a temporary file in the same folder and rename it into place: a reader
    (or a crash) never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    """One JSON object per line (UTF-8, not ASCII-escaped), written atomically."""
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
