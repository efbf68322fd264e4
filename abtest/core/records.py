"""The one reader of record files, and the one JSONL writer: errors that name the file and
the line, and writes that replace a file whole or not at all.

`read_records` is what every command that takes "a JSONL file" of rows reads with, so they
all take the same shapes: JSON Lines, a JSON array (or `{"questions": [...]}`), a DataFrame
as pandas' `to_json` writes it (`columns`, its default; `records`, `split`, `index`,
`table`), and CSV/TSV (list columns written as JSON or as Python literals, parsed with
`json`/`ast.literal_eval`, never `eval`). What a file holds is never changed on the way in:
a cell is parsed only where the caller names it a list or a yes/no field.

Lines are split on "\\n" only (a trailing "\\r" is dropped), as JSON Lines defines them:
text such as U+2028 or U+0085, which JSON leaves unescaped and `str.splitlines()` would
break on, stays inside its record. A UTF-8 byte-order mark before the first line is ignored.
JSON Lines are streamed, never held whole; a JSON document or a CSV file is read whole.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from abtest.errors import UserError
import duckdb
import datetime as dt
import decimal
import uuid


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
    with _open(path, what, name) as f:
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


def json_error(path: Path, exc: json.JSONDecodeError, text: str, line: int | None = None,
               last: bool = True) -> UserError:
    """The one wording of a JSON error: the line and column where it breaks, and, when the
    text stops inside a record (and nothing follows it: `last`), that the file was cut."""
    n = exc.lineno if line is None else line
    rest = text[exc.pos:]
    if exc.msg.startswith("Invalid control character"):
        rest = rest[1:]   # a string running on past its line: the line break it met
    if last and (not rest.strip() or exc.msg.startswith("Unterminated string")):
        return UserError(f"the file ends mid-record (line {n}); was it cut short?",
                         file=str(path))
    msg = exc.msg.removesuffix(" at").removesuffix(" starting")   # "... at" + our " at column"
    return UserError(f"invalid JSON ({msg} at column {exc.colno})", file=str(path),
                     where=f"line {n}")


def json_object(path: Path, n: int, line: str, last: bool = False) -> dict:
    """One line as a JSON object, or a one-line error naming the file, line and column."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise json_error(path, exc, line, n, last) from None
    if not isinstance(obj, dict):
        raise UserError(f"expected a JSON object, got {type(obj).__name__}", file=str(path),
                        where=f"line {n}")
    return obj


def read_jsonl(path: Path, what: str = "a JSONL file", **kw) -> Iterable[tuple[int, dict]]:
    """(line number, object) for each non-blank line (`kw` as for `text_lines`)."""
    lines = iter(text_lines(path, what, **kw))
    for n, line in lines:
        if line.strip():
            yield n, _line_object(path, n, line, lines)


def _line_object(path: Path, n: int, line: str, rest: Iterator[tuple[int, str]]) -> dict:
    """`json_object` for a line of a stream: whether it is the last is looked at only when
    it is broken (a cut file's last record)."""
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return json_object(path, n, line, last=not any(x.strip() for _, x in rest))
    return json_object(path, n, line)


# --------------------------------------------------------------------------- any record file

CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
WRAPPER_KEYS = ("questions", "cases", "samples", "data", "records")
_YES = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def is_csv(path: Path) -> bool:
    return Path(path).suffix.lower() in CSV_SUFFIXES


def csv_header(path: Path, what: str = "a CSV file") -> list[str]:
    """The column names of a CSV/TSV file (stripped), [] for an empty one."""
    raw = _read_bytes(Path(path), what, "file")
    text = raw.decode("utf-8-sig", errors="replace")
    row = next(csv.reader(io.StringIO(text, newline=""),
                          delimiter=CSV_SUFFIXES[Path(path).suffix.lower()]), [])
    return [h.strip() for h in row]


def read_records(path: str | os.PathLike[str], what: str = "a JSONL file", *, name: str = "file",
                 on_raw: Callable[[bytes], Any] | None = None, utf8_hint: str = "",
                 list_fields: Iterable[str] = (), bool_fields: Iterable[str] = (),
                 known_fields: Iterable[str] = ()) -> Iterator[tuple[str, dict]]:
    """(where, object) for each row of a JSONL, JSON or CSV file; `where` names the line
    ("line 7", "item 3 (line 40)") for one-line errors.

    CSV cells are text; an empty cell is an absent field, a cell of `list_fields` is parsed
    as a JSON or Python list literal and one of `bool_fields` as true/false/yes/no/1/0.
    `known_fields` tells pandas' `index` orient (rows keyed by index) from `columns`."""
    path = Path(path)
    if is_csv(path):
        yield from _csv_rows(path, what, name, on_raw, set(list_fields), set(bool_fields))
        return
    for where, obj in _json_values(path, what, name, on_raw, utf8_hint, set(known_fields)):
        if not isinstance(obj, dict):
            raise UserError(f"expected a JSON object, got {_kind(obj)}", file=str(path),
                            where=where)
        yield where, obj


def read_json_values(path: str | os.PathLike[str], what: str = "a JSON or JSONL file", *,
                     known_fields: Iterable[str] = ()) -> list[tuple[str, Any]]:
    """(where, value) for each JSON value of a file: the one document (a wrapper or a pandas
    DataFrame unpacked into rows), each item of an array, or each line of JSON Lines."""
    return list(_json_values(Path(path), what, "file", None, "", set(known_fields)))


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _json_values(path: Path, what: str, name: str, on_raw, utf8_hint: str,
                 known: set[str]) -> Iterator[tuple[str, Any]]:
    if path.suffix.lower() == ".parquet":
        yield from parquet_rows(path, what, name)
        return
    lines = iter(text_lines(path, what, name=name, on_raw=on_raw, utf8_hint=utf8_hint))
    head: list[tuple[int, str]] = []
    for n, line in lines:
        head.append((n, line))
        if line.strip():
            break
    first = next((ln for ln in head if ln[1].strip()), None)
    if first is None:
        return
    n1, line1 = first
    lead = line1.lstrip()[:1]
    single = None
    if lead == "{":
        try:
            single = json.loads(line1)
        except json.JSONDecodeError:
            single = None
    if lead not in "{[" or isinstance(single, dict):
        # JSON Lines, streamed; a one-line file may still be a wrapper or a DataFrame
        second = next(((n, ln) for n, ln in lines if ln.strip()), None)
        if second is None and isinstance(single, dict):
            rows = _unpack(single, known)
            if rows is not None:
                for label, v in rows:
                    yield f"line {n1}, {label}", v
                return
        yield f"line {n1}", json_value(path, n1, line1,
                                       iter([second]) if second is not None else None)
        if second is not None:
            yield f"line {second[0]}", json_value(path, second[0], second[1], lines)
            for n, line in lines:
                if line.strip():
                    yield f"line {n}", json_value(path, n, line, lines)
        return
    # one JSON document (an array, or a pretty-printed object): read it whole
    text = "\n".join(ln for _, ln in head) + "\n" + "\n".join(ln for _, ln in lines)
    if lead == "[":
        yield from _array_items(path, text)
        return
    doc = _whole(path, text)
    rows = _unpack(doc, known)
    if rows is None:
        yield "document", doc
        return
    yield from rows


def json_value(path: Path, n: int, line: str,
               rest: Iterator[tuple[int, str]] | None = None) -> Any:
    """One line's JSON value; `rest` (the lines after it) tells a cut file's last line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        last = rest is None or not any(x.strip() for _, x in rest)
        raise json_error(path, exc, line, n, last) from None


def _whole(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise json_error(path, exc, text) from None


def _array_items(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    """Each item of a top-level JSON array with the line it starts on."""
    dec = json.JSONDecoder()
    ws = " \t\r\n"
    i, line, seen = 0, 1, 0

    def skip(j: int) -> int:
        while j < len(text) and text[j] in ws:
            j += 1
        return j

    def line_at(j: int) -> int:
        nonlocal line, seen
        line += text.count("\n", seen, j)
        seen = j
        return line

    try:
        i = skip(i)
        assert text[i] == "["
        i = skip(i + 1)
        if text[i] == "]":
            if text[skip(i + 1):].strip():
                raise ValueError
            return
        k = 0
        items = []
        while True:
            start = i
            obj, i = dec.raw_decode(text, i)
            items.append((f"item {k} (line {line_at(start)})", obj))
            k += 1
            i = skip(i)
            if text[i] == ",":
                i = skip(i + 1)
                continue
            if text[i] == "]" and not text[i + 1:].strip():
                break
            raise ValueError
    except (ValueError, IndexError, AssertionError):
        _whole(path, text)   # raises with the line where the document breaks
        raise UserError("invalid JSON", file=str(path)) from None
    yield from items


_WRAPPER_SIBLINGS = {"schema", "version", "name", "metadata", "description", "meta",
                     "next_cursor", "cursor", "total", "page", "count"}


def _unpack(doc: Any, known: set[str]) -> list[tuple[str, Any]] | None:
    """(label, row) for the rows of a wrapper (`{"questions": [...]}`) or of a DataFrame as
    pandas' `to_json` writes it; None when `doc` is one record."""
    if not isinstance(doc, dict) or not doc:
        return None
    for k in WRAPPER_KEYS:
        if isinstance(doc.get(k), list) and set(doc) - {k} <= _WRAPPER_SIBLINGS:
            return [(f"item {i}", v) for i, v in enumerate(doc[k])]   # orient="table" too
    if (isinstance(doc.get("columns"), list) and isinstance(doc.get("data"), list)
            and set(doc) <= {"columns", "index", "data"}):          # orient="split"
        cols, index = doc["columns"], doc.get("index")
        labels = index if isinstance(index, list) and len(index) == len(doc["data"]) else None
        return [(f"row {labels[i]}" if labels else f"item {i}",
                 dict(zip(cols, row)) if isinstance(row, list) else row)
                for i, row in enumerate(doc["data"])]
    # a DataFrame: at least two columns (or one the caller knows), each {index: value} alike
    if not all(isinstance(v, dict) and v for v in doc.values()):
        return None
    inner = [set(v) for v in doc.values()]
    if not all(s == inner[0] for s in inner):
        return None
    if len(doc) < 2 and not (set(doc) | inner[0]) & known:
        return None
    if known and not (set(doc) & known) and inner[0] & known:    # orient="index"
        return [(f"row {label}", v) for label, v in doc.items()]
    # orient="columns" (pandas' default): {column: {index: value}}
    return [(f"row {ix}", {col: vals[ix] for col, vals in doc.items()})
            for ix in next(iter(doc.values()))]


def parquet_rows(path: Path, what: str = "a Parquet file", name: str = "file"
                 ) -> Iterator[tuple[str, dict]]:
    """The rows of a Parquet file (a DataFrame saved by pandas or Phoenix), read by DuckDB:
    structs as objects, lists as lists, times as ISO 8601 text (UTC when zoned)."""

    _read_bytes(path, what, name)   # missing / a directory: the same one-line errors
    con = duckdb.connect()
    try:
        cur = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
    except duckdb.Error as exc:
        raise UserError(f"not a Parquet file DuckDB can read ({str(exc).splitlines()[0]})",
                        file=str(path)) from None
    cols = [d[0] for d in cur.description]
    try:
        for i, row in enumerate(cur.fetchall()):
            yield f"row {i}", {c: _plain(v) for c, v in zip(cols, row)
                               if c != "__index_level_0__"}
    finally:
        con.close()


def _plain(v: Any) -> Any:
    """A value DuckDB returns, as JSON would hold it."""

    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dt.datetime):
        return (v.astimezone(dt.timezone.utc) if v.tzinfo else v).isoformat()
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    return v


def _csv_rows(path: Path, what: str, name: str, on_raw, lists: set[str],
              bools: set[str]) -> Iterator[tuple[str, dict]]:
    raw = _read_bytes(path, what, name)
    if on_raw is not None:
        on_raw(raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UserError("not valid UTF-8", file=str(path), where=f"line {line}") from None
    delimiter = CSV_SUFFIXES[path.suffix.lower()]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            return
        header = [h.strip() for h in header]
        dup = next((h for h in header if h and header.count(h) > 1), None)
        if dup:
            raise UserError(f"column {dup!r} appears twice in the header", file=str(path),
                            where="line 1")
        start = reader.line_num + 1
        records = []
        for cells in reader:
            records.append((start, cells))
            start = reader.line_num + 1
        _csv_cut(path, text, delimiter, len(header), records)
        for start, cells in records:
            where = f"line {start}"
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(header):
                raise UserError(f"{len(cells)} cells but the header names {len(header)} columns",
                                file=str(path), where=where)
            row: dict[str, Any] = {}
            for col, cell in zip(header, cells):
                if not col or cell == "":
                    continue
                if col in lists:
                    row[col] = _list_cell(path, where, col, cell)
                elif col in bools:
                    v = _YES.get(cell.strip().lower())
                    if v is None:
                        raise UserError(f"expected true or false, got {cell[:40]!r}",
                                        file=str(path), where=where, field=col)
                    row[col] = v
                else:
                    row[col] = cell
            yield where, row
    except csv.Error as exc:
        raise UserError(f"not valid CSV ({exc})", file=str(path),
                        where=f"line {reader.line_num}") from None


def _csv_cut(path: Path, text: str, delimiter: str, n_columns: int,
             records: list[tuple[int, list[str]]]) -> None:
    """A CSV cut mid-record is said as such, with the line its last record starts on, before
    any cell of it is read: else the cut cell would be blamed ("not a list literal"). Cut is:
    the text ends inside a quoted cell, or the last record has fewer cells than the header
    and no line break ends it."""
    if not records:
        return
    line, cells = records[-1]
    ends_open = False
    try:
        for _ in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True):
            pass
    except csv.Error as exc:
        ends_open = "unexpected end of data" in str(exc)
    if ends_open or (len(cells) < n_columns and not text.endswith(("\n", "\r"))):
        raise UserError(f"the file ends mid-record (line {line}); was it cut short?",
                        file=str(path))


# a list of passages: a cell of plain text is one passage (RAGAS and DeepEval files hold one)
PASSAGE_COLUMNS = ("context", "contexts", "retrieved_contexts", "reference_contexts",
                   "retrieval_context")


def _list_cell(path: Path, where: str, col: str, cell: str) -> Any:
    """A list written into one CSV cell: JSON (`["a", "b"]`) or a Python literal
    (`['a', 'b']`, as pandas writes a list column); text that is neither is refused."""
    s = cell.strip()
    if s.startswith("{") and col in PASSAGE_COLUMNS and isinstance(_literal(s), dict):
        raise UserError("expected a list of passages (or one passage as text), got an object",
                        file=str(path), where=where, field=col)
    if not s.startswith("[") and col in PASSAGE_COLUMNS:
        return [cell]   # one passage, as the column's own text
    if not s.startswith("["):
        raise UserError(f"expected a list (JSON or Python literal), got {cell[:40]!r}",
                        file=str(path), where=where, field=col)
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise UserError("not a list literal (JSON or Python)", file=str(path), where=where,
                        field=col) from None
    if not isinstance(v, list):
        raise UserError(f"expected a list, got {_kind(v)}", file=str(path), where=where,
                        field=col)
    return v


def _literal(s: str) -> Any:
    """A cell's JSON or Python literal value, or None when it is neither."""
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _read_bytes(path: Path, what: str, name: str) -> bytes:
    with _open(path, what, name) as f:
        return f.read()


def _open(path: Path, what: str, name: str):
    """The file opened for bytes, or the one-line error: missing, a directory, unreadable."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"{name} not found", file=str(path)) from None
    except IsADirectoryError:
        raise UserError(f"is a directory, expected {what}", file=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read it ({exc.strerror or exc})", file=str(path)) from None


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
