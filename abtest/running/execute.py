"""A pass over the run's cases: cases side by side through a small window (memory does
not grow with the fixture), the gateway bounding calls in flight per model, progress
counted on from what was finished before, and the run's end state by the one rule
(abtest.store.state)."""

from __future__ import annotations

import json
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Collection, Sequence

from abtest.core.config import LoadedConfig
from abtest.errors import (DriftError, IncompleteRunError, ProviderError, Spelled,
                           resume_call)
from abtest.core.progress import Progress, step

from abtest.running.cases import CaseOutcome, judge_repeats, process_case, spent_so_far
from abtest.running.plan import RunPlan
from abtest.running.shards import in_shard
from abtest.llm import ProviderUnreachable
from abtest.llm import Budget, BudgetExceeded, Gateway, ModelDriftError
from abtest.llm.batch import BatchQueue, Deferred
from abtest.llm.ratelimit import STATUS_EVERY_S, in_flight_bound
from abtest.store.state import run_progress
from abtest.store.runs import resume_hint
from abtest.llm.batch import submit
from abtest.llm.batch import BatchPending

if TYPE_CHECKING:
    from abtest.store import Store


def provider_stopped() -> type:
    """`ProviderUnreachable` (what the gateway saw) that is also an `abtest.ProviderError`,
    its way on spelled per surface (a command to paste; a call in Python)."""

    class ProviderStopped(ProviderUnreachable, ProviderError):
        def __init__(self, model: str, api_base: str | None, reason: str, go_on: Spelled):
            super().__init__(model, api_base, reason)
            self.message = (f"{self.args[0]}; the run stops here, incomplete; finished work is "
                            "kept: `{go_on}` goes on once it answers")
            self.opts = {"go_on": go_on}
            self.args = (self.line(),)

    return ProviderStopped


@dataclass
class RunResult:
    """What a run (or one pass of it) did: its end state and counts as the one rule gives
    them (`counts`, runstate.RunProgress.counts: the line every surface prints), and this
    process's provider calls, cache hits and time."""

    run_id: str
    status: str
    n_cases: int            # the fixture's cases
    unfinished: list[str]
    provider_calls: int
    cache_hits: int
    seconds: float
    comparison_kind: str
    calls_per_case: float
    counts: str = ""
    n_finished: int = 0
    n_used: int | None = None          # a sequential run's cases taken
    n_not_needed: int | None = None    # a stopped sequential run's cases never taken

    @property
    def line(self) -> str:
        """"complete: 40 of 40 cases finished" (the state and the one count)."""
        return f"{self.status}: {self.counts}"


def result_of(prog, status: str, **kw: Any) -> RunResult:
    """A RunResult whose counts are `prog`'s (runstate.RunProgress)."""
    return RunResult(prog.run_id, status, prog.n_cases, prog.unfinished, counts=prog.counts,
                     n_finished=prog.n_finished, n_used=prog.n_used,
                     n_not_needed=prog.n_not_needed, **kw)


def errored_cases(store: Store, run_id: str) -> set[str]:
    """Cases with a stored generation or judge error (what --retry-errors re-attempts)."""
    return store.errored_case_ids(run_id)


def mark_incomplete(store: Store, run_id: str) -> None:
    store.update_run(run_id, status="incomplete",
                     finished_at=datetime.now(timezone.utc).replace(tzinfo=None))


def pinned_and_spent(store: Store, run_id: str) -> tuple[dict[str, str], float]:
    """The models the run's answers came from, and what its provider calls cost so far (a
    resumed run's budget counts what it already spent)."""
    pinned: dict[str, str] = {}
    spent = 0.0
    for r in store.llm_calls(run_id):
        if r["error"] is None and r["model_resolved"]:
            pinned.setdefault(r["model_requested"], r["model_resolved"])
        if not r["cached"] and r["cost"]:
            spent += r["cost"]
    return pinned, spent


@dataclass(frozen=True)
class Shown:
    """Where the per-case progress lines and bar count from: cases finished before this pass
    (`before`), of how many (`total`), and the bar's description (a sequential run's look)."""

    before: int
    total: int
    desc: str | None = None


def execute(lc: LoadedConfig, store: Store, plan: RunPlan, run_id: str, *,
            progress: Progress | None = None, skip: set[str] | None = None,
            max_cost_usd: float | None = None, shard: tuple[int, int] | None = None,
            batch: bool = False, only: Sequence[str] | None = None,
            done_before: Collection[str] = (), shown: Shown | None = None,
            finalize: bool = True) -> RunResult:
    """Generate, check and judge the run's cases (`only`: these, a sequential look's), all but
    `done_before` (finished earlier: a resumed run never sends their calls again, not even to
    the cache); `finalize` records the run's end state (a sequential look leaves it
    running)."""

    cfg = lc.config
    pinned, spent = pinned_and_spent(store, run_id)
    budget = None
    max_cost = max_cost_usd if max_cost_usd is not None else cfg.max_cost_usd
    if max_cost is not None:
        budget = Budget(max_cost, spent)
        budget.check_prices([plan.gen_a, plan.gen_b, plan.judge])
        if progress:
            progress(f"budget: ${max_cost:.2f} for this run (${spent:.4f} spent before)")
    gw = Gateway(store, concurrency=cfg.concurrency, timeout_s=cfg.timeout_s,
                 max_retries=cfg.max_retries, backoff_base_s=cfg.retry_backoff_s, run_id=run_id,
                 pinned=pinned, budget=budget,
                 batch=BatchQueue(store.failed_batch_hashes(run_id)) if batch else None)
    t0 = time.monotonic()
    skip = skip or set()
    mine = set(plan.fixture.ids()) if only is None else set(only)
    if shard:  # another shard's cases are not this run's to do (nor its unfinished)
        mine = {cid for cid in mine if in_shard(cid, shard)}
        skip = skip & mine
    n_mine = len(mine)   # the cases this run (or look) does, done before or now
    if done_before:
        mine = mine - set(done_before)
        skip = skip - set(done_before)
    n_todo = len(mine) - len(skip)
    todo = (c for c in plan.fixture.iter_cases() if c.id in mine and c.id not in skip)
    done = 0
    shown = shown or Shown(0, n_todo)
    unfinished: list[str] = sorted(skip)
    if skip and progress:
        progress(f"{len(skip)} case(s) ended in error earlier and are left unfinished "
                 "(--retry-errors re-attempts their failed calls)")
    drift: list[str] = []
    n_waiting = 0
    # cases and the tasks inside a case run side by side; the gateway bounds the provider calls
    # in flight (per model), so the pipeline never drains at the tail. Cases are submitted
    # through a small window, so memory does not grow with the fixture.

    slots = in_flight_bound([plan.gen_a, plan.gen_b, plan.judge], cfg.concurrency)
    workers = max(1, min(2 * slots, n_todo))
    last_rates = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="abtest-case") as pool, \
            ThreadPoolExecutor(max_workers=2 * slots + 2,
                               thread_name_prefix="abtest-task") as inner:
        pending: dict = {}

        def submit_next() -> None:
            case = next(todo, None)
            if case is not None:
                pending[pool.submit(process_case, gw, lc, store, run_id, plan, case, inner)] = case

        try:
            for _ in range(2 * workers):
                submit_next()
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    case = pending.pop(fut)
                    waiting = False
                    try:
                        oc = fut.result()
                    except ModelDriftError as exc:
                        drift.append(str(exc))
                        oc = CaseOutcome(case.id, [str(exc)])
                    except BudgetExceeded as exc:
                        oc = CaseOutcome(case.id, [str(exc)])
                    except Deferred:   # waits for this pass's batch: neither done nor unfinished
                        oc, waiting = CaseOutcome(case.id), True
                        n_waiting += 1
                    # after drift no new case starts (its answers would not compare), nor after
                    # the budget stopped a call, nor once a model is unreachable (its calls fail)
                    if not drift and not (budget and budget.stopped) and gw.unreachable() is None:
                        submit_next()
                    done += 1
                    if oc.errors:
                        unfinished.append(case.id)
                    if progress:
                        status = "ok" if not oc.errors else f"INCOMPLETE ({oc.errors[0][:80]})"
                        if waiting:
                            status = "waiting for a batch"
                        at = shown.before + done
                        step(progress, "run", at, shown.total, f"[{at}/{shown.total}] "
                             f"{case.id}: {status}", stats=lambda: spent_so_far(store, run_id, gw),
                             desc=shown.desc)
                        if time.monotonic() - last_rates >= STATUS_EVERY_S:
                            last_rates = time.monotonic()
                            for line in gw.rate_lines():
                                progress(f"rate: {line}")
        except BaseException:   # Ctrl-C or SIGTERM (runner.run records "stopped")
            # calls in flight end at their next provider call; queued cases never start
            gw.stop()
            for fut in pending:
                fut.cancel()
            raise
    if progress:   # each model's rates, waits on its limit and 429s, as the run ended
        for line in gw.rate_lines():
            progress(f"rate: {line}")
    dead = gw.unreachable()
    if cfg.judge_repeats and "pairwise" in cfg.judges and not n_waiting and dead is None \
            and only is None:   # a sequential run's looks sample no judge noise
        judge_repeats(gw, lc, store, run_id, plan, set(unfinished), progress)
    if drift:
        mark_incomplete(store, run_id)
        raise DriftError(f"{drift[0]}; the run stops here, incomplete: start a new run once "
                         "the provider serves one version (pin a dated model name)")
    if dead is not None:   # one line: the model, its endpoint, the error (never a key)
        mark_incomplete(store, run_id)

        hint = resume_hint(store.get_run(run_id) or {"run_id": run_id})
        raise provider_stopped()(dead.model, dead.api_base, dead.reason, Spelled(
            f"{hint} --retry-errors", resume_call(run_id, retry_errors=True))) from None
    if budget is not None:
        info = json.loads((store.get_run(run_id) or {}).get("info_json") or "{}")
        info["budget"] = {"max_usd": budget.max_usd, "spent_usd": round(budget.spent_usd, 6),
                          "stopped": budget.stopped}
        store.update_run(run_id, info_json=json.dumps(info, sort_keys=True))
    batch_ids: list[str] = []
    queue = gw.batch
    if queue is not None and len(queue):

        try:
            batch_ids = submit(store, run_id, queue, progress)
        except IncompleteRunError:   # what was submitted is stored; --resume --batch collects it
            mark_incomplete(store, run_id)
            raise
    if budget is not None and budget.stopped:
        mark_incomplete(store, run_id)
        out = f" ({len(batch_ids)} batch(es) already submitted are collected then)" \
            if batch_ids else ""
        more = {"batch": True} if batch else {}
        raise IncompleteRunError(f"{budget.stopped}; finished work is kept: `{{go_on}}` with a "
                              f"higher budget continues{out}", opts={"go_on": Spelled(
                                  f"abtest run --resume --run-id {run_id} --max-cost …"
                                  f"{' --batch' if batch else ''}",
                                  resume_call(run_id, max_cost_usd=Ellipsis, **more))})
    if batch_ids:

        assert queue is not None  # batch ids come only from submitting the queue
        mark_incomplete(store, run_id)
        raise BatchPending(f"waiting for {len(batch_ids)} batch(es) at the provider "
                           f"({', '.join(batch_ids)}; {len(queue)} request(s)); `abtest run "
                           f"--run-id {run_id} --resume --batch` collects them and goes on")
    # complete by the one rule (runstate): every case of this run (its shard's) finished

    prog = run_progress(store, store.get_run(run_id) or {"run_id": run_id, "status": "running"},
                        writing=None)
    left = sorted(c for c in prog.unfinished if c in mine)
    status = "complete" if not left else "incomplete"
    if finalize or left:
        store.update_run(run_id, status=status,
                         finished_at=datetime.now(timezone.utc).replace(tzinfo=None))
    st = gw.stats
    total_calls = store.count_distinct_calls(run_id)
    result = result_of(prog, status, provider_calls=st.provider_calls,
                     cache_hits=st.cache_hits, seconds=time.monotonic() - t0,
                     comparison_kind=plan.comparison_kind,
                     calls_per_case=round(total_calls / n_mine, 2) if n_mine else 0.0)
    result.unfinished = left
    if shard:   # the shard's own count: the others' cases are not this run's to finish
        ours = [c for c in plan.fixture.ids() if in_shard(c, shard)]
        fin = set(prog.finished)
        result.counts = (f"{sum(c in fin for c in ours)} of {len(ours)} cases of shard "
                         f"{shard[0]}/{shard[1]} finished")
    return result


def done_before(store: Store, plan: RunPlan, rid: str, shard: tuple[int, int] | None,
                 skip: set[str], progress: Progress | None, *, say: bool = True
                 ) -> tuple[set[str], Shown]:
    """The cases a resumed run finished earlier (the one rule, runstate), which it does not
    touch again, and where its progress counts from; says "resuming RUN: 11 of 40 finished,
    29 to go" once."""

    prog = run_progress(store, store.get_run(rid) or {"run_id": rid, "status": "running"},
                        writing=None)
    ids = plan.fixture.ids()
    mine = [c for c in ids if in_shard(c, shard)] if shard else list(ids)
    mine_set = set(mine)
    done = {c for c in prog.finished if c in mine_set}
    if progress and say:
        left = len(mine) - len(done) - len(skip - done)
        progress(f"resuming {rid}: {len(done)} of {len(mine)} "
                 + ("cases of this shard " if shard else "") + f"finished, {left} to go"
                 + (f", {len(skip - done)} that ended in error left unfinished"
                    if skip - done else ""))
    return done, Shown(len(done), len(mine))
