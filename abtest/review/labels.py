"""Importing human labels: the pack's CSV, a filled-in items.jsonl, or the page's download.

Labels are stored in the variant space: a pairwise "1"/"2" is mapped through the item's
side mapping to "A"/"B" at import time ("tie" stays "tie"), so `review_items.judge_label`
and `human_labels.label` are directly comparable. All or nothing: one bad row stores none.
"""

from __future__ import annotations

import csv
import getpass
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple


from abtest.errors import UserError
from abtest.core.records import json_object
from abtest.store.runs import load_run
from abtest.review.items import CLAIM_LABELS, DOWNLOAD_FORMAT, LABELS, write_rows

if TYPE_CHECKING:
    from abtest.store import Store


class _Row(NamedTuple):
    where: str
    item_id: Any
    label: Any
    reviewer: Any
    note: Any


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _parse_labels(path: Path, text: str) -> tuple[list[_Row], str | None]:
    """Rows of a labels file (CSV, JSONL, or the review page's JSON download) and the
    file-level reviewer, if any."""
    head = text.lstrip()
    if head.startswith("{") or head.startswith("["):
        doc = None
        try:
            doc = json.loads(text)
        except ValueError:
            pass  # several JSON lines: JSONL
        if isinstance(doc, list) or (isinstance(doc, dict) and "labels" in doc):
            reviewer = None
            if isinstance(doc, dict):
                fmt = doc.get("format")
                if fmt is not None and fmt != DOWNLOAD_FORMAT:
                    raise UserError(f"unknown labels format {fmt!r} (expected {DOWNLOAD_FORMAT!r})",
                                    file=str(path), field="format")
                reviewer = doc.get("reviewer")
                entries = doc["labels"]
                if not isinstance(entries, list):
                    raise UserError("'labels' must be a list", file=str(path), field="labels")
            else:
                entries = doc
            rows = []
            for i, e in enumerate(entries):
                where = f"labels[{i}]"
                if not isinstance(e, dict):
                    raise UserError("expected an object with item_id and label", file=str(path),
                                    where=where)
                rows.append(_Row(where, e.get("item_id"), e.get("label"), e.get("reviewer"),
                                 e.get("note")))
            return rows, reviewer if isinstance(reviewer, str) else None
        rows = []
        for ln, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            e = json_object(path, ln, line.removesuffix("\r"))
            rows.append(_Row(f"line {ln}", e.get("item_id"), e.get("label"), e.get("reviewer"),
                             e.get("note")))
        return rows, None
    # CSV (comma, semicolon or tab separated, as spreadsheets save it)
    first = text.splitlines()[0] if text.strip() else ""
    delim = max((",", ";", "\t"), key=first.count)
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    try:
        header = next(reader)
    except StopIteration:
        raise UserError("empty labels file", file=str(path)) from None
    cols = [h.strip().lower() for h in header]
    if "item_id" not in cols or "label" not in cols:
        raise UserError("CSV header must have item_id and label columns (use the pack's "
                        "labels.csv)", file=str(path), where="line 1")
    ix = {c: cols.index(c) for c in ("item_id", "label", "reviewer", "note") if c in cols}
    rows = []
    try:
        for rec in reader:
            if not any(cell.strip() for cell in rec):
                continue
            got = [rec[ix[c]] if c in ix and ix[c] < len(rec) else None
                   for c in ("item_id", "label", "reviewer", "note")]
            rows.append(_Row(f"line {reader.line_num}", *got))
    except csv.Error as exc:
        raise UserError(f"malformed CSV: {exc}", file=str(path), where=f"line {reader.line_num}") from None
    return rows, None


def default_reviewer() -> str:
    try:
        return getpass.getuser() or "unknown"
    except Exception:
        return "unknown"


def import_labels(store: Store, run_id: str, file, reviewer: str | None = None) -> int:
    """Validate a labels file and store its labels in `human_labels`; all or nothing.

    Accepts the pack's labels.csv, items.jsonl (filled in) and the review page's JSON
    download. Rows with a blank label are skipped (not yet labelled). An unknown item,
    a value outside the item's allowed labels, or the same item twice for the same
    reviewer raises UserError naming the file, line and item, and nothing is stored.
    ``reviewer`` overrides any reviewer named in the file; the default is the file's
    reviewer, else the OS user. Re-importing a reviewer's label for an item replaces it.
    Returns the number of labels stored.
    """
    path = Path(file)
    if not path.is_file():
        raise UserError("labels file not found", file=str(path))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UserError("labels file is not UTF-8 text", file=str(path)) from None
    load_run(store, run_id)
    if not store.review_items(run_id):
        raise UserError(f"run {run_id!r} has no review pack; run `abtest review export {run_id}` "
                        "first", file=str(path))
    rows, file_reviewer = _parse_labels(path, text)
    return store_labels(store, run_id, rows, reviewer=reviewer, file_reviewer=file_reviewer,
                        source=str(path))


def label_item(store: Store, run_id: str, item_id: str, label: str,
               reviewer: str | None = None) -> int:
    """One label given in `abtest view`'s review page: the same checks as a file's rows."""
    load_run(store, run_id)
    return store_labels(store, run_id, [_Row("form", item_id, label, reviewer, None)],
                        source="review page")


def store_labels(store: Store, run_id: str, rows: list[_Row], *, reviewer: str | None = None,
                 file_reviewer: str | None = None, source: str) -> int:
    """Check labelled rows against the run's review items and store them, all or nothing.

    Each row must name an item of the run's pack and one of that item's allowed labels, and
    a reviewer may label an item once per batch; pairwise "1"/"2" are mapped through the
    item's secret side mapping to "A"/"B". ``source`` names the file (or page) in errors.
    """
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    if not items:
        raise UserError(f"run {run_id!r} has no review pack; run `abtest review export {run_id}` "
                        "first", file=source)
    fallback = (file_reviewer or "").strip() or default_reviewer()
    forced = (reviewer or "").strip() or None
    problems: list[tuple[str, str]] = []
    seen: dict[tuple[str, str], str] = {}
    out = []
    for r in rows:
        if _blank(r.label):
            continue
        if _blank(r.item_id):
            problems.append((r.where, "missing item_id"))
            continue
        item_id = str(r.item_id).strip()
        item = items.get(item_id)
        if item is None:
            problems.append((r.where, f"unknown item {item_id!r} (not in run {run_id}'s review pack)"))
            continue
        label = str(r.label).strip().lower()
        allowed = LABELS.get(item["judge"], CLAIM_LABELS)
        if label not in allowed:
            problems.append((r.where, f"item {item_id!r}: label {str(r.label).strip()!r} is not "
                                      f"one of {', '.join(allowed)}"))
            continue
        who = forced or (None if _blank(r.reviewer) else str(r.reviewer).strip()) or fallback
        if (item_id, who) in seen:
            problems.append((r.where, f"item {item_id!r} labelled twice by {who!r} (first at "
                                      f"{seen[(item_id, who)]})"))
            continue
        seen[(item_id, who)] = r.where
        if item["judge"] == "pairwise" and label != "tie":
            sides = json.loads(item["mapping_json"] or "{}").get("sides") or {}
            if label not in sides:
                problems.append((r.where, f"item {item_id!r} has no side mapping in the store "
                                          "(re-export the pack)"))
                continue
            label = sides[label]
        out.append({"run_id": run_id, "item_id": item_id, "judge": item["judge"],
                    "case_id": item["case_id"], "label": label, "reviewer": who})
    if problems:
        where, msg = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise UserError(f"{msg}{more}; nothing imported", file=source, where=where)
    if not out:
        raise UserError("no labels given (every label is blank); nothing imported", file=source)
    write_rows(store, store.put_human_labels, out)
    return len(out)
