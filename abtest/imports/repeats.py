"""Questions a file holds more than once: ids, repeats kept once, and same text told apart.

Eval sets repeat questions (a RAGAS CSV with identical rows, promptfoo tests without ids,
a DeepEval goldens file with one input twice). Refusing the file punishes the user for
their data; counting a repeat twice lets one question weigh double in the verdict. So:

- a row identical in content to an earlier one (every field but a generated id) is kept
  once, said in one line and in the manifest notes;
- the same question text with different gold content (another reference, other contexts)
  stays a separate case; the generated id says which (`…-2`, `…-3`) and the cases share a
  `group` (their verdicts are not independent);
- two rows with the same id the user wrote and different content are an error naming both.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from abtest.errors import UserError


@dataclass
class Deduped:
    rows: list[tuple[str, dict]]
    grouped: set[int] = field(default_factory=set)   # rows given a group here (same text)
    lines: list[str] = field(default_factory=list)     # said once each, in the summary
    notes: dict[str, Any] = field(default_factory=dict)   # manifest.json notes


def content_id(prefix: str, question: str) -> str:
    """A question's id from its text (whitespace collapsed): the same across exports."""
    norm = " ".join(question.split())
    return f"{prefix}-{hashlib.sha256(norm.encode('utf-8')).hexdigest()[:12]}"


def keep_once(rows: list[tuple[str, dict]], *, prefix: str, file: str) -> Deduped:
    """Ids for the rows without one, each repeat kept once, same-text rows told apart."""
    out: list[tuple[str, dict]] = []
    first_by_key: dict[str, int] = {}          # content → index in out
    given_ids: dict[str, int] = {}             # a user-given id → index in out
    repeats: dict[int, list[str]] = {}         # index in out → wheres of its repeats
    by_text: dict[str, list[int]] = {}         # generated base id → indexes in out
    for where, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            out.append((where, row))           # the validator names what is wrong
            continue
        generated = row.get("id") is None
        body = {k: v for k, v in row.items() if k != "id"}
        key = _canonical(body if generated else row)
        if key in first_by_key:
            repeats.setdefault(first_by_key[key], []).append(where)
            continue
        if not generated:
            qid = str(row["id"])
            if qid in given_ids:
                first = out[given_ids[qid]][0]
                raise UserError(f"id {qid!r} is also at {first}, with different content "
                                "(rows with one id must be the same question)", file=file,
                                where=where, field="id")
            given_ids[qid] = len(out)
            first_by_key[key] = len(out)
            out.append((where, row))
            continue
        base = content_id(prefix, row["question"])
        same = by_text.setdefault(base, [])
        new = {"id": base if not same else f"{base}-{len(same) + 1}", **body}
        same.append(len(out))
        first_by_key[key] = len(out)
        out.append((where, new))
    result = Deduped(out)
    if repeats:
        said = [f"{_span([w for w in ws])} repeat{'s' if len(ws) == 1 else ''} {out[i][0]}"
                for i, ws in repeats.items()]
        n = sum(len(ws) for ws in repeats.values())
        result.lines.append(f"{file}: {n} repeated question(s) kept once: " + "; ".join(said[:5])
                            + (f"; and {len(said) - 5} more" if len(said) > 5 else ""))
        result.notes["questions_repeated"] = {
            "rows": n, "kept_once": said,
            "why": "the same question with the same content: counted once, not twice"}
    split = {base: ix for base, ix in by_text.items() if len(ix) > 1}
    if split:
        for base, ix in split.items():
            for i in ix:
                where, row = out[i]
                if row.get("group") is None:
                    out[i] = (where, {**row, "group": base})
                    result.grouped.add(i)
        said = [f"{base} at {', '.join(out[i][0] for i in ix)} → "
                f"{', '.join(str(out[i][1]['id']) for i in ix)}" for base, ix in split.items()]
        result.lines.append(
            f"{file}: {sum(len(ix) for ix in split.values())} question(s) asked again with "
            "different gold content (reference or contexts) kept apart, in one group each: "
            + "; ".join(said[:5]) + (f"; and {len(said) - 5} more" if len(said) > 5 else ""))
        result.notes["questions_same_text"] = {
            "groups": len(split), "cases": said,
            "why": "one question text, different gold content: separate cases, one group"}
    return result


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


_LINE = re.compile(r"^line (\d+)$")


def _span(wheres: list[str]) -> str:
    """`line 3`, `lines 3–5`, or the places as given."""
    nums = [int(m.group(1)) for w in wheres if (m := _LINE.match(w))]
    if len(nums) == len(wheres) and len(nums) > 1 and nums == list(range(nums[0],
                                                                          nums[0] + len(nums))):
        return f"lines {nums[0]}–{nums[-1]}"
    if len(nums) == len(wheres) and len(nums) > 1:
        return "lines " + ", ".join(map(str, nums))
    return ", ".join(wheres)
