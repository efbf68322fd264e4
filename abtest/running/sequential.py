"""The sequential driver: a look after every `sequential.look` units, each look running
only the cases it adds, a stop once the claim is decided, futile or undecidable
(docs/CLAIM_STATISTICS.md §11)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from abtest.core.config import LoadedConfig
from abtest.core.progress import Progress
from abtest.errors import (UserError)

from abtest.running.execute import RunResult, Shown, execute, result_of
from abtest.running.plan import RunPlan
from abtest.core.groups import case_groups
from abtest.store.state import run_progress
from abtest.stats.looks import replay_run
from abtest.store.sequential_record import STOPS, new_record, run_plan, taken_cases

if TYPE_CHECKING:
    from abtest.store import Store


def run_sequential(lc: LoadedConfig, store: Store, plan: RunPlan, rid: str, *,
                progress: Progress | None, skip: set[str],
                max_cost_usd: float | None, resume: bool = False) -> RunResult:
    """A sequential run (docs/CLAIM_STATISTICS.md §11): the fixture's units in a seeded order, a
    look after every `sequential.look` of them, a stop once the claim is decided, shown
    futile or shown undecidable. Each look runs only the cases it adds (and any an earlier
    process left unfinished): a case finished at an earlier look is never sent again, not
    even to the cache. The look itself is recomputed from the stored judgments
    (sequential.replay_run), so a resumed run continues from its last finished look in the
    same order, and its report tells the same looks."""

    cfg = lc.config
    t0 = time.monotonic()
    ids = plan.fixture.ids()
    groups = case_groups(plan.fixture.cases, cfg.group_by)
    run = store.get_run(rid) or {}
    record = json.loads(run.get("info_json") or "{}").get("sequential")
    fresh = new_record(cfg.sequential, ids, groups)
    if record is None:
        record = fresh
    elif record.get("order_sha256") != fresh["order_sha256"]:
        raise UserError("this sequential run took its cases in an order the fixture no longer "
                        "gives (its cases or their groups changed): start a new run",
                        field="sequential")

    def save() -> None:
        info = json.loads((store.get_run(rid) or {}).get("info_json") or "{}")
        info["sequential"] = record
        store.update_run(rid, info_json=json.dumps(info, sort_keys=True))

    cases = {c.id: c.model_dump() for c in plan.fixture.cases}
    sp = run_plan(record, ids, groups)
    may_take = len(taken_cases(sp.units, sp.cap))   # the bar's total: the most it may use
    finished: set[str] = set()
    if resume:   # the cases finished before, by the one rule: never sent again
        finished = set(run_progress(store, store.get_run(rid) or run, writing=None).finished)
        if progress:
            progress(f"resuming {rid}: {len(finished)} of {len(sp.taken)} cases taken so far "
                     f"finished ({len(sp.boundaries)} look(s) done; {sp.n_cases} in the "
                     "fixture)" + (f", {len(skip - finished)} that ended in error left "
                                   "unfinished" if skip - finished else ""))
    calls = hits = 0
    looks: list = []   # the looks decided so far (replay_run keeps them: their cases are done)
    while not record.get("stop"):
        sp = run_plan(record, ids, groups)
        done = sp.boundaries[-1] if sp.boundaries else 0
        target = min(done + int(record["look"]), sp.cap)
        if target <= done:
            record["stop"] = "max_cases" if sp.cap < len(sp.units) else "exhausted"
            save()
            break
        record["taking"] = target
        save()
        taken = taken_cases(sp.units, target)
        number = len(sp.boundaries) + 1
        if progress:
            progress(f"look {number}: units {done + 1}–{target} of {len(sp.units)} "
                     f"({len(taken)} cases so far)")
        res = execute(lc, store, plan, rid, progress=progress, skip=skip & set(taken),
                      max_cost_usd=max_cost_usd, only=taken, done_before=finished & set(taken),
                      shown=Shown(len(finished), may_take, f"run (look {number})"),
                      finalize=False)
        calls, hits = calls + res.provider_calls, hits + res.cache_hits
        if res.status != "complete":
            return res
        finished.update(taken)
        record["boundaries"] = sp.boundaries + [target]
        judg = store.judgments(rid, columns=("case_id", "judge", "subject", "sample",
                                             "verdict", "score", "error"))
        looks = replay_run(run_plan(record, ids, groups), taken, judg, cases, groups, cfg,
                           json.loads((store.get_run(rid) or {}).get("info_json") or "{}").get(
                               "judges") or cfg.judges, known=looks)
        lk = looks[-1]
        if progress:
            progress(f"look {lk.number}: " + "; ".join(f"{k} {v}"
                                                      for k, v in lk.conditions.items()))
        if lk.stop:
            record["stop"] = lk.stop
            if lk.stop == "undecidable":
                record["stop_why"] = lk.why.get("undecidable")
        elif target >= sp.cap:
            record["stop"] = "max_cases" if sp.cap < len(sp.units) else "exhausted"
        save()
    sp = run_plan(record, ids, groups)
    prog = run_progress(store, store.get_run(rid) or {"run_id": rid, "status": "running"},
                        writing=None)
    if progress:
        progress(f"{sp.stop_text() or STOPS[record['stop']]} after {len(sp.boundaries)} "
                 f"look(s): {prog.counts}")
    status = "complete" if not prog.unfinished else "incomplete"
    store.update_run(rid, status=status,
                     finished_at=datetime.now(timezone.utc).replace(tzinfo=None))
    total_calls = store.count_distinct_calls(rid)
    n = len(sp.taken)
    return result_of(prog, status, provider_calls=calls, cache_hits=hits,
                   seconds=time.monotonic() - t0, comparison_kind=plan.comparison_kind,
                   calls_per_case=round(total_calls / n, 2) if n else 0.0)
