"""A run's one-line summary (claim line, gate, resolved models), kept in the store.

Listing runs must not build every report (a report over 1,000 cases takes about a second), so
the summary is stored when a run finishes and when its labels change, together with the state
it was built from. A reader compares that state with the run's current one: a summary from
another abtest version, another status or finish time, or other labels is stale and rebuilt.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable
from abtest.version import __version__
from abtest.reporting.model import json_shape
from abtest.reporting.build import build_report
from abtest.store.runs import load_run
from abtest.errors import UserError
from abtest.store import Store
from abtest.reporting.live import build_live_report

if TYPE_CHECKING:
    from abtest.store import Store
    from abtest.reporting.model import LiveReport, Report

SUMMARY_VERSION = 3   # 2: every reason, the pairwise counts and faithfulness B − A with its
#                       CI; 3: the run's counts (runstate) and its resume command


def state_of(run: dict, labels_state: tuple | None) -> str:
    """What a summary depends on besides the stored rows a finished run never changes."""

    return "|".join(str(x) for x in (__version__, SUMMARY_VERSION, run["status"],
                                      run.get("finished_at"), labels_state or (0, 0, "0")))


def summarize(report: Report | LiveReport) -> dict[str, Any]:
    """The claim line (licensed sentence, or the first reason it is withheld, and all of
    them), the gate, and who won: the pairwise counts and faithfulness B − A with its CI
    (None when not measured, as for any incomplete run)."""

    return summarize_json(json_shape(report))


def summarize_json(rep: dict) -> dict[str, Any]:
    """`summarize` over a report's JSON shape (what the view keeps)."""
    c = rep.get("claim") or {}
    reasons = [str(x) for x in c.get("reasons") or []]
    if c.get("licensed"):
        licensed, claim = True, c.get("sentence") or c.get("statement") or ""
    else:
        licensed, claim = False, (reasons[0] if reasons else c.get("statement") or "not licensed")
    gen = (rep.get("models") or {}).get("generator") or {}
    m = rep.get("metrics") or {}
    pw, faith = m.get("pairwise") or {}, m.get("faithfulness") or {}
    return {"licensed": licensed, "claim": claim, "reasons": [] if licensed else reasons,
            "gate": (rep.get("gate") or {}).get("decision") or "—",
            "resolved": ", ".join(gen.get("resolved") or []),
            "n_finished": rep.get("n_finished"), "status": rep.get("status"),
            "n_cases": rep.get("n_cases"), "n_used": rep.get("n_used"),
            "n_not_needed": rep.get("n_not_needed"),
            "counts": (rep.get("progress") or {}).get("counts"),
            "resume": rep.get("resume"),
            "pairwise": {k: pw.get(k) for k in ("b_wins", "a_wins", "no_preference", "n")}
            if pw else None,
            "faithfulness": {k: faith.get(k) for k in ("difference", "ci_low", "ci_high",
                                                        "significant")}
            if faith.get("difference") is not None else None}


def build_any(store: Store, run: dict) -> Report | LiveReport:
    """The run's report, frozen or live, by the code `abtest report` uses."""
    if run["kind"] == "live":

        return build_live_report(store, run["run_id"])

    return build_report(store, run["run_id"])


def refresh_summary(store: Store, run_id: str) -> dict[str, Any] | None:
    """Build and store a finished run's summary (the store must be open read-write); a running
    run has none (its progress is counted, not summarised)."""

    run = load_run(store, run_id)
    if run["status"] == "running":
        return None
    summary = summarize(build_any(store, run))
    _keep(store, run, summary)
    return summary


def _keep(store: Store, run: dict, summary: dict) -> None:
    store.put_run_summary(run["run_id"], state_of(run, store.labels_state(run["run_id"])), summary)


def report_and_summary(store_path: Any, run_id: str) -> Report | LiveReport:
    """Build a finished run's report and keep its summary, in one pass over the store (the
    end of `abtest run`, `abtest live` and the demo). When another process holds the store the
    summary is skipped (the view builds it when asked); the report is built read-only."""

    try:
        store = Store(store_path, create=False)
    except UserError:
        store = Store(store_path, read_only=True, create=False)
    try:
        run = load_run(store, run_id)
        rep = build_any(store, run)
        if run["status"] != "running" and store.writable:
            _keep(store, run, summarize(rep))
        return rep
    finally:
        store.close()


def keep_summary(store_path: str | os.PathLike, run_id: str,
                 warn: Callable[[str], None] | None = None) -> None:
    """Store a finished run's summary for `abtest view` (one report build). A failure here
    never fails the run: the view builds the summary when asked."""

    try:
        report_and_summary(store_path, run_id)
    except UserError as exc:
        if warn:
            warn(f"note: run summary not kept for `abtest view` ({exc.line()})")
