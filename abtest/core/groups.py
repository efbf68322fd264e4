"""Groups of cases: which cases are not independent draws. The one place that decides it.

Cases written twice, or about one source document, share their difficulty: their paired
differences are correlated, and a test that counts them as independent understates its
variance (docs/CLAIM_STATISTICS.md). Every stage that needs groups (the report's cluster-robust
tests, `fixtures status`, the run's pre-flight) asks `case_groups`; nothing else decides.

The rules (docs/DESIGN.md, "Groups"):

1. A case's **label** comes from `group_by`:
   - None (the default): its `group` field when it has one, else it is a group of its own;
   - a case field (`category`, `corpus_version`, `question`, `group`, …, see GROUPABLE) or
     `meta.KEY` (a dotted key inside the case's `meta`): that value, which every case must
     have (a case without it is bad input, exit 2, naming the case and the field);
   - `document`: the source document of the case's chunk — the first of its
     `relevant_chunk_ids` when it has any (the chunk it was written from), else its
     top-ranked context chunk — named by the chunk id up to its first `#` (`normans#p4` →
     `normans`; an id without `#` is its own document); `document:SEP` cuts at the first SEP
     instead (`document:_`: `820769473_15895-16818` → `820769473`). A case with no chunk at
     all is a group of its own.
2. **Repeats**: cases with the same question (whitespace runs collapsed) and the same context
   (chunk ids and texts, in order) are one group whatever their ids or labels; when repeats
   carry different labels, those labels' groups merge into one (union-find), named by the
   smallest label.

Group keys name their source: `group:KEY`, `category:factual`, `meta.source:wiki`,
`document:normans`, and `case:ID` for a case that is a group of its own, so a user's group
named like a case id never meets it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, Iterable

from abtest.errors import UserError

# the fewest groups a cluster-robust t (CR2, Bell–McCaffrey df) is given a test with: at 10
# groups a skewed group effect made the nominal 5 % test reject 8 %, from 20 within two
# points (docs/CLAIM_STATISTICS.md §10, `validity_sim.py --group-size-check`); a sequential run
# decides nothing before as many units
MIN_GROUPS = 20
DOCUMENT = "document"
DOCUMENT_SEPARATOR = "#"
# the case fields a group can be read from: text fields a case holds one value of
GROUPABLE = ("group", "category", "corpus_version", "retriever", "question", "reference_answer",
             "search_terms", "id")
_SINGLE = "case:"


class CaseGroups(dict[str, str]):
    """Case id → group key, in the cases' order; `repeat_of` maps each repeat (a case whose
    question and context an earlier case has) to the first case it repeats; `group_by` is
    the rule the labels came from (None: the `group` field)."""

    def __init__(self, groups: dict[str, str], *, repeat_of: dict[str, str],
                 group_by: str | None):
        super().__init__(groups)
        self.repeat_of = repeat_of
        self.group_by = group_by


def parse_group_by(spec: str | None) -> tuple[str, str] | None:
    """(kind, argument) of a `group_by` setting: ("field", name), ("meta", dotted key) or
    ("document", separator); None for None. A name abtest cannot group by is a ValueError
    saying what it can."""
    if spec is None:
        return None
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("group_by must name a case field, meta.KEY or document")
    if spec == DOCUMENT:
        return "document", DOCUMENT_SEPARATOR
    if spec.startswith(DOCUMENT + ":"):
        sep = spec[len(DOCUMENT) + 1:]
        if not sep:
            raise ValueError("document:SEP needs a separator after the colon (document:_)")
        return "document", sep
    if spec.startswith("meta."):
        key = spec[len("meta."):]
        if not key or any(not part for part in key.split(".")):
            raise ValueError(f"{spec!r}: meta.KEY needs a key (meta.source)")
        return "meta", key
    if spec in GROUPABLE:
        return "field", spec
    raise ValueError(f"cannot group by {spec!r}: use a case field ({', '.join(GROUPABLE)}), "
                     "meta.KEY (a key inside the case's meta) or document (the source "
                     "document of its chunks' ids; document:SEP to cut ids at SEP)")


def check_group_by(spec: str, field: str = "group_by") -> str:
    """`spec` when abtest can group by it, else a UserError (exit 2) naming `field`
    (`--group-by` on a command line)."""
    try:
        parse_group_by(spec)
    except ValueError as exc:
        raise UserError(str(exc), field=field) from None
    return spec


def document_of(chunk_id: str, separator: str = DOCUMENT_SEPARATOR) -> str:
    """The document a chunk id names: the id up to its first `separator`, or the whole id
    when it has none (or starts with it)."""
    head = chunk_id.split(separator, 1)[0]
    return head or chunk_id


def content_key(case: Any) -> str:
    """sha256 (hex) of a case's question, whitespace runs collapsed, and its context: every
    chunk's id and text, in order. Cases with one content key are repeats."""
    h = hashlib.sha256(" ".join(str(_get(case, "question") or "").split()).encode("utf-8"))
    for ch in _get(case, "context") or ():
        cid, text = (ch.get("id"), ch.get("text")) if isinstance(ch, dict) else (ch.id, ch.text)
        h.update(b"\x00" + str(cid).encode("utf-8") + b"\x01" + str(text).encode("utf-8"))
    return h.hexdigest()


def case_groups(cases: Iterable[Any], group_by: str | None = None, *,
                file: str | None = None) -> CaseGroups:
    """Case id → group key for `Case`s or case dicts (module docstring: the rules).

    `group_by` as `abtest.yaml` or `--group-by` give it; a case missing the field it names
    is a UserError naming the case and the field (`file` names the fixture in that line).
    Linear in the cases: one hash per case (10,000 cases well under a second)."""
    rule = parse_group_by(check_group_by(group_by)) if group_by is not None else None
    labels: dict[str, str] = {}
    repeat_of: dict[str, str] = {}
    first_with: dict[str, str] = {}           # content key -> first case id
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:               # path compression
            parent[x], x = root, parent[x]
        return root

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:                           # the smaller key names the merged group
            lo, hi = (ra, rb) if _rank(ra) <= _rank(rb) else (rb, ra)
            parent[hi] = lo

    for case in cases:
        cid = _get(case, "id")
        if not isinstance(cid, str) or not cid:
            raise UserError("a case without an id cannot be grouped", file=file, field="id")
        if cid in labels:
            raise UserError(f"duplicate case id {cid!r}", file=file, where=f"case {cid}",
                            field="id")
        label = _label(case, cid, rule, group_by, file)
        labels[cid] = label
        parent.setdefault(label, label)
        key = content_key(case)
        first = first_with.setdefault(key, cid)
        if first != cid:
            repeat_of[cid] = first
            union(label, labels[first])
    return CaseGroups({cid: find(label) for cid, label in labels.items()},
                      repeat_of=repeat_of, group_by=group_by)


def _rank(label: str) -> tuple[bool, str]:
    """A labelled group names a merge before a case that was a group of its own."""
    return label.startswith(_SINGLE), label


def _get(case: Any, name: str) -> Any:
    return case.get(name) if isinstance(case, dict) else getattr(case, name, None)


def _label(case: Any, cid: str, rule: tuple[str, str] | None, group_by: str | None,
           file: str | None) -> str:
    if rule is None:
        value = _get(case, "group")
        if value is None:
            return _SINGLE + cid
        return "group:" + _text(value, cid, "group", file)
    kind, arg = rule
    if kind == "document":
        rel = _get(case, "relevant_chunk_ids") or []
        ctx = _get(case, "context") or []
        if rel:
            first = rel[0]
        elif ctx:
            first = ctx[0].get("id") if isinstance(ctx[0], dict) else ctx[0].id
        else:
            first = None
        if not isinstance(first, str) or not first:
            return _SINGLE + cid              # no chunk: nothing shared with another case
        return f"{group_by}:{document_of(first, arg)}"
    if kind == "meta":
        value = _get(case, "meta")
        for part in arg.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    else:
        value = _get(case, arg)
    if value is None or value == "":
        raise UserError(f"case {cid} has no {group_by} to group by (group_by / --group-by "
                        f"{group_by}: every case needs one)", file=file, where=f"case {cid}",
                        field=group_by)
    return f"{group_by}:{_text(value, cid, group_by or 'group', file)}"


def _text(value: Any, cid: str, field: str, file: str | None) -> str:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    got = "empty" if isinstance(value, str) else f"{type(value).__name__}, not text"
    raise UserError(f"a group must be text (or a whole number); this is {got}", file=file,
                    where=f"case {cid}", field=field)


def group_summary(groups: dict[str, str]) -> dict:
    """n_cases, n_groups, n_repeats (None when `groups` is a plain dict that does not say),
    n_singletons (groups of one case), largest {group, n}, group_by, and the line the report
    and `fixtures status` print: "120 cases in 40 groups (80 repeats)"."""
    sizes = Counter(groups.values())
    repeat_of = getattr(groups, "repeat_of", None)
    n, g = len(groups), len(sizes)
    r = len(repeat_of) if repeat_of is not None else None
    largest = None
    if sizes:
        key, size = min(sizes.items(), key=lambda kv: (-kv[1], kv[0]))
        largest = {"group": key, "n": size}
    text = f"{n} case{'' if n == 1 else 's'} in {g} group{'' if g == 1 else 's'}"
    if r:
        text += f" ({r} repeat{'' if r == 1 else 's'})"
    return {"n_cases": n, "n_groups": g, "n_repeats": r,
            "n_singletons": sum(1 for s in sizes.values() if s == 1), "largest": largest,
            "group_by": getattr(groups, "group_by", None), "text": text}
