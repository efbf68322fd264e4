"""A run's case list as the cases page shows it: rows, filters, sort order, and a case's place
in that order (previous / next).

The filter and sort state lives in the query string, so a list is a URL: it can be shared,
survives Back, and works without JavaScript (the server marks the rows a filter hides and
sorts them). The page's script applies the same filters to the same row attributes and sorts
by the same keys, so the list a click shows is the list the server would send; the case page
finds its neighbours in the order this module computes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import urlencode
from abtest.reporting import incidents

# checkbox filters: a row passes when its attribute is "yes"
FLAGS = {"flipped": "flipped", "checkfail": "check failures",
         "disagree": "judge orders disagree"}
# select filters: a row passes when the chosen value is one of its attribute's words
SELECTS = ("incident", "answerable", "finished", "category", "issue")
# sort keys: (label, kind); "num" sorts numbers with blanks last, "text" as strings
COLUMNS = {
    "case": ("case", "text"), "question": ("question", "text"),
    "answerable": ("answerable", "text"), "finished": ("finished", "text"),
    "faith_a": ("faith. A", "num"), "faith_b": ("faith. B", "num"),
    "cov_a": ("cov. A", "num"), "cov_b": ("cov. B", "num"),
    "pairwise": ("pairwise AB / BA → outcome", "text"), "incident": ("incidents", "text"),
    "checks": ("checks failed", "text"), "category": ("category", "text"),
    "issue": ("issue", "text"),
}
DEFAULT_SORT = "case"
ALWAYS = ("case", "question", "answerable", "finished", "faith_a", "faith_b", "incident")


@dataclass
class Query:
    only: list[str] = field(default_factory=list)
    select: dict[str, str] = field(default_factory=dict)
    q: str = ""
    sort: str = DEFAULT_SORT
    desc: bool = False

    @classmethod
    def parse(cls, params) -> "Query":
        """From the request's query string (a Starlette QueryParams or a mapping of lists)."""
        get_all = params.getlist if hasattr(params, "getlist") else (lambda k: params.get(k, []))

        def one(k: str) -> str:
            vals = get_all(k)
            return (vals[-1] if vals else "").strip()

        only = [f for f in dict.fromkeys(get_all("only")) if f in FLAGS]
        if "incident" in get_all("only") and not one("incident"):   # the older ?only=incident
            select = {"incident": "any"}
        else:
            select = {}
        for k in SELECTS:
            v = one(k)
            if v:
                select[k] = v
        sort = one("sort")
        return cls(only=only, select=select, q=one("q")[:200],
                   sort=sort if sort in COLUMNS else DEFAULT_SORT, desc=one("dir") == "desc")

    def pairs(self, **over: Any) -> list[tuple[str, str]]:
        st: dict[str, Any] = {"only": self.only, **self.select, "q": self.q, "sort": self.sort,
              "dir": "desc" if self.desc else ""}
        st.update(over)
        out: list[tuple[str, str]] = [("only", f) for f in st.pop("only") or []]
        for k in (*SELECTS, "q"):
            if st.get(k):
                out.append((k, st[k]))
        if st.get("sort") and st["sort"] != DEFAULT_SORT:
            out.append(("sort", st["sort"]))
        if st.get("dir"):
            out.append(("dir", st["dir"]))
        return out

    def qs(self, **over: Any) -> str:
        """'?…' for this state (with `over` changed), '' for the default list."""
        p = self.pairs(**over)
        return "?" + urlencode(p) if p else ""

    def sort_qs(self, key: str) -> str:
        """The list sorted by `key`: ascending first, the other way on a second click."""
        desc = not self.desc if key == self.sort else False
        return self.qs(sort=key, dir="desc" if desc else "")


def _key(x: Any) -> float | None:
    """A number as the list sorts it and the page writes it (6 decimals: the page's script
    parses the same value back, so both sort alike)."""
    return None if x is None else round(float(x), 6)


def _yes(x: Any) -> str:
    return "yes" if x else "no"


_CACHE: "OrderedDict[tuple, tuple[Any, Any]]" = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _cached(rep: Mapping[str, Any], key: tuple, make):
    """Per report object (the view keeps one per state of a run): its rows and their orders
    are built once, not on every case page (~10 ms at 1,000 cases). Read-only once made."""
    k = (id(rep), *key)
    with _CACHE_LOCK:
        hit = _CACHE.get(k)
        if hit is not None and hit[0] is rep:
            _CACHE.move_to_end(k)
            return hit[1]
    value = make()
    with _CACHE_LOCK:
        _CACHE[k] = (rep, value)
        while len(_CACHE) > 32:
            _CACHE.popitem(last=False)
    return value


def rows(rep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per case of the report, in the report's (case id) order: the attributes the
    filters read, the keys the sort reads, and what the cells show (shared: do not change)."""
    return _cached(rep, ("rows",), lambda: _rows(rep))


def _rows(rep: Mapping[str, Any]) -> list[dict[str, Any]]:

    inc = incidents.by_case(rep)
    issues: dict[str, list[str]] = {}
    for kind, ids in (rep.get("taxonomy") or {}).items():
        for cid in ids:
            issues.setdefault(cid, []).append(kind)
    reasons = rep.get("unfinished_reasons") or {}
    out = []
    for r in rep.get("per_case") or []:
        cid = r["case_id"]
        fa, fb = r.get("faithfulness_a"), r.get("faithfulness_b")
        failed = [f"A: {n}" for n in r.get("checks_failed_a") or []] + \
                 [f"B: {n}" for n in r.get("checks_failed_b") or []]
        ab, ba = r.get("pairwise_ab"), r.get("pairwise_ba")
        finished = r.get("finished") is not False
        why = "; ".join(reasons.get(cid) or r.get("errors") or [])
        pw = f"{ab or '—'} / {ba or '—'} → {r.get('pairwise') or '—'}" if (ab or ba) else ""
        cats = r.get("category") or ""
        issue = sorted(issues.get(cid, []))
        attrs = {
            "flipped": _yes(r.get("flipped")), "checkfail": _yes(failed),
            "disagree": _yes(bool(ab and ba and ab != ba)),
            "incident": " ".join((["any"] if inc.get(cid) else []) + inc.get(cid, [])),
            "answerable": "no" if r.get("answerable") is False else "yes",
            "finished": _yes(finished), "category": cats, "issue": " ".join(issue),
        }
        out.append({
            "id": cid, "question": r.get("question") or "", "attrs": attrs, "why": why,
            "faith": (fa, fb), "cov": (r.get("coverage_a"), r.get("coverage_b")),
            "pairwise": pw, "failed": ", ".join(failed), "incidents": inc.get(cid, []),
            "search": " ".join(str(x) for x in (cid, r.get("question"), r.get("answer_a"),
                                                 r.get("answer_b")) if x).lower(),
            "sort": {"case": cid, "question": r.get("question") or "",
                     "answerable": attrs["answerable"], "finished": attrs["finished"],
                     "faith_a": _key(fa), "faith_b": _key(fb), "cov_a": _key(r.get("coverage_a")),
                     "cov_b": _key(r.get("coverage_b")), "pairwise": pw,
                     "incident": "".join(inc.get(cid, [])), "checks": ", ".join(failed),
                     "category": cats, "issue": " ".join(issue).replace("_", " ")},
        })
    return out


def matches(row: Mapping[str, Any], query: Query) -> bool:
    """The free-text search: the query's words, each somewhere in the case id, the question
    or either answer (case-insensitive). Done by the server: answers are not in the page."""
    return all(w in row["search"] for w in query.q.lower().split())


def passes(row: Mapping[str, Any], query: Query, match: bool = True) -> bool:
    """The page's script decides the same from the row's attributes (view.js, rowPasses);
    `match` is the search's verdict on the row (matches())."""
    a = row["attrs"]
    if any(a.get(f) != "yes" for f in query.only):
        return False
    if any(v not in (a.get(k) or "").split() for k, v in query.select.items()):
        return False
    return match


def sort_key(kind: str):
    """The order the page's script sorts in too: numbers as numbers with blanks last, text
    as lowercase strings (case ids as strings: '56d…' before '5ad…'), blanks last; ties by
    case id."""
    def key(v):
        if kind == "num":
            return (v is None, v if v is not None else 0.0)
        s = "" if v is None else str(v)
        return (s == "", s.lower())
    return key


def ordered(rep: Mapping[str, Any], query: Query) -> list[dict[str, Any]]:
    """Every row of the report in the query's order (ties by case id as strings, in either
    direction; blanks last either way)."""
    return _cached(rep, ("order", query.sort, query.desc), lambda: _ordered(rows(rep), query))


def _ordered(all_rows: Iterable[dict[str, Any]], query: Query) -> list[dict[str, Any]]:
    kind = COLUMNS[query.sort][1]
    key = sort_key(kind)
    rows_ = sorted(all_rows, key=lambda r: r["id"])   # ties: by case id, either direction
    filled = [r for r in rows_ if not key(r["sort"][query.sort])[0]]
    blank = [r for r in rows_ if key(r["sort"][query.sort])[0]]
    filled.sort(key=lambda r: key(r["sort"][query.sort]), reverse=query.desc)  # stable
    return filled + blank


def listing(rep: Mapping[str, Any], query: Query) -> dict[str, Any]:
    """The cases page: every row in order, each marked shown or hidden, and the counts."""
    out = []
    shown = 0
    by_variant = {"A": 0, "B": 0}
    for r in ordered(rep, query):
        m = matches(r, query)
        ok = passes(r, query, m)
        out.append({**r, "shown": ok, "match": "yes" if m else "no"})
        if ok:
            shown += 1
            for v in r["incidents"]:
                by_variant[v] += 1
    # a column no case has a value in (coverage without its judge, no check failed) is left out
    present = _cached(rep, ("present",), lambda: {
        k for k in COLUMNS if k in ALWAYS or any(
            r["sort"][k] not in (None, "") for r in rows(rep))})
    return {"rows": out, "shown": shown, "total": len(out), "incidents_shown": by_variant,
            "columns": {k: v for k, v in COLUMNS.items() if k in present}}


def position(rep: Mapping[str, Any], query: Query, case_id: str) -> dict[str, Any]:
    """Where a case sits in the filtered, sorted list: its number, the list's length, and its
    neighbours' ids (None at either end, or when the filters leave the case out)."""
    ids = [r["id"] for r in ordered(rep, query) if passes(r, query, matches(r, query))]
    try:
        i = ids.index(case_id)
    except ValueError:
        return {"index": None, "n": len(ids), "prev": None, "next": None}
    return {"index": i + 1, "n": len(ids), "prev": ids[i - 1] if i else None,
            "next": ids[i + 1] if i + 1 < len(ids) else None}
