"""What a run is and which of its cases are finished: the one definition every surface reads.

The report (Markdown, HTML, JSON), the gate, the view, `abtest runs`, compare, the PR comment,
the runner's own result and the Python API all take a run's state and its finished count from
`run_progress`, so they cannot disagree. A case is finished when both answers exist and every
judgment the run's judge plan requires for it exists without error; anything less is
unfinished, with the reason why, and is never scored.

States (docs/DESIGN.md): running (a live process writes it), interrupted (its process is gone:
kill -9, a crash, a machine restart), stopped (Ctrl-C or SIGTERM, recorded by the process on
its way out), incomplete (ended with cases unfinished: a provider down, the budget reached),
complete (every case finished).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence
from pathlib import Path
from abtest.store.sequential_record import plan_for_run

if TYPE_CHECKING:
    from abtest.store import Store

RunState = Literal["running", "interrupted", "stopped", "incomplete", "complete"]
STATES: tuple[str, ...] = ("running", "interrupted", "stopped", "incomplete", "complete")

# the columns the case rule reads: nothing else of a generation or judgment matters to it
GENERATION_COLUMNS = ("case_id", "variant", "error")
JUDGMENT_COLUMNS = ("case_id", "judge", "subject", "sample", "error")


def state_of(store: Store, run: Mapping[str, Any],
             writing: set[str] | None | Literal[False] = False) -> RunState:
    """The run's state from its stored status; "running" only while a live process writes it
    (one whose process died is "interrupted", and `--resume` continues it; a running run must
    never be told to resume, which would start a second writer). A complete status is only
    the runner's word: `run_progress` also checks every case is finished."""
    status = run["status"]
    if status != "running":
        return status if status in STATES else "incomplete"
    if writing is False:   # not given (a caller over many runs asks the store once)
        writing = store.writing_runs()
    if writing is None or run["run_id"] in writing:
        return "running"
    # Not among the runs a live process writes. A writer stores a run's end before it leaves
    # that set (and joins it before it stores "running": Store.update_run), so a run that
    # ended between our two reads shows its end here; one still "running" has no writer.
    now = store.get_run(run["run_id"]) or run
    if now["status"] != "running":
        return now["status"] if now["status"] in STATES else "incomplete"
    writing = store.writing_runs()   # a resume by another process may have begun meanwhile
    return "running" if writing is None or run["run_id"] in writing else "interrupted"


def required_judgments(case: Mapping[str, Any], judges: Iterable[str], *,
                       conformance: bool) -> list[tuple[str, str]]:
    """(judge, subject) pairs the judge plan (judges.plan) makes for a case: what must exist
    without error before the case counts. Judge repeats (sample > 0) are diagnostics, never
    required."""
    js = set(judges)
    out: list[tuple[str, str]] = []
    if "pairwise" in js:
        out += [("pairwise", "AB"), ("pairwise", "BA")]
    answerable = case.get("answerable", True) is not False
    has_points = bool(case.get("key_points")) or bool((case.get("reference_answer") or "").strip())
    for v in ("A", "B"):
        if "faithfulness" in js:
            out.append(("faithfulness", v))
        if "abstention" in js:
            out.append(("abstention", v))
        if "coverage" in js and answerable and has_points:
            out.append(("coverage", v))
        for judge in ("quality", "relevance"):
            if judge in js:
                out.append((judge, v))
        if "conformance" in js and conformance:
            out.append(("conformance", v))
    if "keywords" in js and case.get("keywords"):
        out.append(("keywords", "case"))
    return out


_LABEL = {"AB": "AB", "BA": "BA", "case": "", "A": "A", "B": "B"}


def _name(judge: str, subject: str) -> str:
    s = _LABEL.get(subject, subject)
    return f"{judge} {s}".rstrip()


@dataclass(frozen=True)
class RunProgress:
    """A run's state and its counts, the one model every surface reads (docs/DESIGN.md, "A
    run's counts"): `n_cases` the fixture's cases; `case_ids` the cases the run does (all of
    them, or a sequential run's taken so far) and `finished` those finished, in order;
    `reasons` for every unfinished one (up to three each); `started` (an answer stored) and
    `errored` counts. A sequential run also has `n_used` (cases taken so far), and once it
    has stopped `n_not_needed` (the fixture's cases it never needed) and `stop` (why)."""

    run_id: str
    state: RunState
    case_ids: list[str]
    finished: list[str]
    reasons: dict[str, list[str]]
    started: int
    errored: int
    waiting: dict[str, str] = field(default_factory=dict)   # case -> provider batch still out
    n_cases: int = -1        # the fixture's cases (-1: as many as case_ids)
    n_used: int | None = None          # a sequential run's cases taken so far
    n_not_needed: int | None = None    # a stopped sequential run's cases never taken
    stop: str | None = None            # why a sequential run stopped (sequential.STOPS)

    def __post_init__(self) -> None:
        if self.n_cases < 0:
            object.__setattr__(self, "n_cases", len(self.case_ids))

    @property
    def n_finished(self) -> int:
        return len(self.finished)

    @property
    def not_needed(self) -> int:
        return self.n_not_needed or 0

    @property
    def sequential(self) -> bool:
        return self.n_used is not None

    @property
    def unfinished(self) -> list[str]:
        return sorted(self.reasons)

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def counts(self) -> str:
        """"16 of 30 cases finished", or a sequential run's "60 of 120 used, 60 not needed
        (futility)": the count every surface prints beside the state."""
        if not self.sequential:
            out = f"{self.n_finished} of {self.n_cases} cases finished"
        else:
            used = self.n_used or 0
            if self.n_not_needed is not None:   # stopped: what it used and did not need
                out = f"{used} of {self.n_cases} used"
                if self.n_finished < used:
                    out = (f"{self.n_finished} of the {used} cases used finished (of "
                           f"{self.n_cases})")
                out += f", {self.n_not_needed} not needed ({self.stop})"
            else:
                out = (f"{self.n_finished} of {used} cases taken so far finished, of "
                       f"{self.n_cases} (sequential)")
        if self.errored:
            out += f", {self.errored} with an error"
        return out

    @property
    def line(self) -> str:
        """"interrupted: 16 of 30 cases finished, 2 with an error" — what every surface says."""
        return f"{self.state}: {self.counts}"

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "n_cases": self.n_cases, "finished": self.n_finished,
                "started": self.started, "errored": self.errored,
                "not_started": max(len(self.case_ids) - self.started, 0),
                "n_used": self.n_used, "not_needed": self.n_not_needed, "stop": self.stop,
                "counts": self.counts, "line": self.line}


def run_case_ids(run: Mapping[str, Any], cases: Mapping[str, Any] | None,
                 gens: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every case of the run: the fixture's (sorted), else those with a stored answer."""
    if cases:
        return sorted(cases)
    return sorted({g["case_id"] for g in gens})


def run_progress(store: Store, run: Mapping[str, Any], *,
                 cases: Mapping[str, Mapping[str, Any]] | None = None,
                 gens: Sequence[Mapping[str, Any]] | None = None,
                 judg: Sequence[Mapping[str, Any]] | None = None,
                 writing: set[str] | None | Literal[False] = False) -> RunProgress:
    """The run's state and finished cases, by the one rule. Callers that read the run's
    generations and judgments already (the report) pass them; `cases` are the fixture's
    (read here when not given; without a readable fixture the cases with an answer count)."""
    rid = run["run_id"]
    if run.get("kind") == "live":   # its questions are in the run; its answers in live_items
        info = json.loads(run.get("info_json") or "{}")
        if cases is None:
            cases = {str(q["id"]): q for q in info.get("questions", [])}
        if gens is None:
            gens = [{"case_id": r["case_id"], "variant": r["variant"],
                     "error": r["error"] or (None if r["answer"] is not None else "no answer")}
                    for r in store.live_items(rid)]
    if cases is None:
        cases = fixture_cases(run)
    if gens is None:
        gens = store.generations(rid, columns=GENERATION_COLUMNS)
    if judg is None:
        judg = store.judgments(rid, columns=JUDGMENT_COLUMNS)
    info = json.loads(run.get("info_json") or "{}")
    judges = info.get("judges")
    if judges is None:
        judges = json.loads(run.get("config_json") or "{}").get("judges") or []
    conformance = bool(info.get("conformance_rubric"))
    ids = run_case_ids(run, cases, gens)
    n_cases = len(ids)
    seq_counts: dict[str, Any] = {}
    if info.get("sequential") and cases:   # only the cases it took are the run's

        seq = plan_for_run(run, cases)
        if seq is not None:
            ids = sorted(seq.taken)
            seq_counts = {"n_used": len(ids), "stop": seq.stop,
                          "n_not_needed": n_cases - len(ids) if seq.stop else None}

    answers: dict[str, set[str]] = defaultdict(set)
    reasons: dict[str, list[str]] = defaultdict(list)
    for g in gens:
        if g["error"]:
            reasons[g["case_id"]].append(f"answer {g['variant']}: {g['error']}")
        else:
            answers[g["case_id"]].add(g["variant"])
    made: dict[str, dict[tuple[str, str], str | None]] = defaultdict(dict)
    for j in judg:
        if j["sample"] == 0:
            made[j["case_id"]][(j["judge"], j["subject"])] = j["error"]
    errored = {cid for cid, rs in reasons.items() if rs}
    started = {g["case_id"] for g in gens}
    shard = info.get("shard")
    waiting: dict[str, str] = {}
    for cid in ids:
        have = answers.get(cid, set())
        if cid not in started:
            continue
        mine = made.get(cid, {})
        for key, err in mine.items():
            if err:
                errored.add(cid)
                reasons[cid].append(f"{_name(*key)}: {err}")
        if not {"A", "B"} <= have:
            for v in ("A", "B"):
                if v not in have and not any(r.startswith(f"answer {v}:") for r in reasons[cid]):
                    reasons[cid].append(f"answer {v} not generated")
            continue
        case = (cases or {}).get(cid) or _case_from_rows(mine)
        missing = [_name(*k) for k in required_judgments(case, judges, conformance=conformance)
                   if k not in mine]
        reasons[cid].extend(f"{m} not made" for m in missing)
    not_started = [cid for cid in ids if cid not in started]
    if not_started or reasons:
        waiting = store.waiting_cases(rid) if store.has_table("batch_requests") else {}
    for cid in not_started:
        if cid in waiting:
            reasons[cid].append(f"waiting for provider batch {waiting[cid]}")
        elif shard:
            reasons[cid].append(f"in another shard (this run is shard {shard[0]}/{shard[1]}; "
                                "`abtest merge` the shards)")
        else:
            reasons[cid].append("not started")
    for cid, rs in list(reasons.items()):
        if not rs:
            del reasons[cid]
        elif cid in waiting and not any(r.startswith("waiting") for r in rs):
            rs.insert(0, f"waiting for provider batch {waiting[cid]}")
    finished = [cid for cid in ids if cid not in reasons]
    state = state_of(store, run, writing)
    if state == "complete" and len(finished) < len(ids):
        state = "incomplete"   # stored as complete by an older abtest, or a case left behind
    return RunProgress(rid, state, ids, finished, {c: r[:3] for c, r in reasons.items()},
                       len(started & set(ids)), len(errored & set(ids)), waiting, n_cases,
                       **seq_counts)


def _case_from_rows(made: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """Without the fixture a case's own rows say what applied to it: coverage and keywords
    are required only where the judge plan made them for one side."""
    out: dict[str, Any] = {"answerable": True}
    if any(j == "coverage" for j, _ in made):
        out["key_points"] = ["(recorded)"]
    if ("keywords", "case") in made:
        out["keywords"] = ["(recorded)"]
    return out


def fixture_cases(run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's cases as plain dicts from its fixture's cases.jsonl; {} when unreadable.

    One parse of the whole file: the run verified each case against its seal, and readers
    take a few keys with defaults (validating 10,000 cases again took ~0.4 s)."""

    p = Path(run.get("fixture_path") or "") / "cases.jsonl"
    try:
        lines = [ln for ln in p.read_bytes().decode("utf-8").split("\n") if ln.strip()]
        objs = json.loads("[" + ",".join(lines) + "]")
    except (OSError, ValueError):  # missing, not UTF-8, not JSON
        return {}
    if len(objs) != len(lines):  # a line held more than one value
        return {}
    out: dict[str, dict[str, Any]] = {}
    for obj in objs:
        if not isinstance(obj, dict):
            return {}
        ctx = obj.get("context")
        if not isinstance(obj.get("id"), str) or not isinstance(ctx, list) or \
                not all(isinstance(ch, dict) and "id" in ch for ch in ctx):
            return {}
        out[obj["id"]] = obj
    return out
