"""Run prompt variants A and B over one frozen fixture, then check and judge.

Each case: render the context block once (byte-identical for A and B), generate
A and B, run deterministic checks, then the judges. Every row is stored as soon
as it exists; the gateway's response cache makes `--resume` repeat no finished
provider call.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from abtest.core.config import LoadedConfig
from abtest.core.progress import Progress
from abtest.errors import (RunStopped, UserError)

from abtest.running.batch import batch_passes
from abtest.running.execute import RunResult, done_before, errored_cases, execute
from abtest.running.plan import (DEMO_JUDGE, RunPlan, claim_minimum_n, config_record,
                                 conformance_rubric, git_commit_of, new_run_id, plan_run,
                                 stale_note)
from abtest.running.sequential import run_sequential
from abtest.running.shards import parse_shard
from abtest.running.signals import Terminated, stop_on_sigterm
from abtest.llm import preload
from abtest.store import Store
from abtest.core.names import check_id
import warnings
from abtest.errors import DemoJudgeWarning
from abtest.llm.budget import Budget
from abtest.llm.batch import preflight
import copy
from abtest.core.models import SequentialConfig
from abtest.store.runs import resume_hint
from abtest.store.state import run_progress

if TYPE_CHECKING:
    from abtest.store import Store



def start_run(lc: LoadedConfig, store: Store, plan: RunPlan, *, run_id: str | None = None,
              resume: bool = False, shard: tuple[int, int] | None = None,
              batch: bool = False) -> str:
    """Create the run row, or check that a resumed run still matches its inputs."""
    if run_id is not None:

        check_id(run_id, field="--run-id")
    if resume:
        if run_id is None:
            rows = [r for r in store.list_runs(plan.fixture.cases_sha256)
                    if r["status"] != "complete" and r["kind"] == "frozen"]
            if not rows:
                raise UserError("--resume: no unfinished run for this fixture; pass --run-id")
            run_id = rows[-1]["run_id"]
        run = store.get_run(run_id)
        if run is None:
            raise UserError(f"{{resume}}: no run {run_id!r} in the store", file=str(store.path),
                            opts={"resume": None})
        if run["fixture_sha256"] != plan.fixture.cases_sha256:
            raise UserError(f"fixture changed since run {run_id} started (cases_sha256 "
                            f"{run['fixture_sha256'][:12]}… → {plan.fixture.cases_sha256[:12]}…); "
                            "start a new run", file=str(plan.fixture.path))
        for side, lv in (("a", plan.a), ("b", plan.b)):
            if run[f"variant_{side}_sha256"] != lv.sha256:
                raise UserError(f"variant {side.upper()} changed since run {run_id} started; start a "
                                "new run", file=str(lv.path))
        was = json.loads(run.get("info_json") or "{}").get("shard")
        if (tuple(was) if was else None) != shard:
            raise UserError(f"{{resume}}: run {run_id} is "
                            + (f"shard {was[0]}/{was[1]}" if was else "not a shard")
                            + "; resume it with the same {shard}", field="{shard}",
                            opts={"resume": None, "shard": None})
        out = store.batches(run_id, pending=True)
        if out and not batch:
            raise UserError(f"{{resume}}: run {run_id} has {len(out)} batch(es) out at the "
                            f"provider ({', '.join(b['batch_id'] for b in out)}); resume it "
                            "with {batch}, which collects them (without it they would be paid "
                            "for and asked again)", field="{batch_name}",
                            opts={"resume": None, "batch": True, "batch_name": None})
        store.update_run(run_id, status="running")
        return run_id
    run_id = run_id or new_run_id()
    if store.get_run(run_id) is not None:
        raise UserError(f"run id {run_id!r} already exists; use {{resume}} to continue it",
                        opts={"resume": True})
    info = {"pipeline_reasons": plan.pipeline_reasons, "overflow": plan.overflow,
            "input_budget": plan.input_budget, "token_method": plan.token_method,
            "self_judge": plan.self_judge, "judges": lc.config.judges,
            "demo_judge": lc.config.judge_is_fallback(),
            "conformance_rubric": conformance_rubric(plan.a.variant, plan.b.variant),
            "python": sys.version.split()[0],
            # what the resume command needs to work from any folder (runs.resume_hint)
            "cwd": str(Path.cwd().resolve()),
            "config_path": str(lc.path.resolve()) if lc.path is not None else None}
    if shard:
        info["shard"] = list(shard)
    store.create_run({
        "run_id": run_id, "kind": "frozen", "fixture_name": plan.fixture.name,
        "fixture_path": str(plan.fixture.path.resolve()), "fixture_sha256": plan.fixture.cases_sha256,
        "corpus_version": plan.fixture.manifest.corpus_version,
        "retriever": plan.fixture.manifest.retriever, "n_cases": len(plan.fixture),
        "variant_a_name": plan.a.name, "variant_a_sha256": plan.a.sha256,
        "variant_a_path": str(plan.a.path.resolve()), "variant_b_name": plan.b.name,
        "variant_b_sha256": plan.b.sha256, "variant_b_path": str(plan.b.path.resolve()),
        "generator_model": plan.gen_a.model if plan.gen_a.model == plan.gen_b.model
        else f"{plan.gen_a.model} | {plan.gen_b.model}",
        "judge_model": plan.judge.model, "comparison_kind": plan.comparison_kind,
        "git_commit": git_commit_of(Path.cwd()), "config_json": config_record(lc),
        "info_json": json.dumps(info, sort_keys=True)})
    return run_id


def run(lc: LoadedConfig, fixture, a, b, *, run_id: str | None = None, resume: bool = False,
        retry_errors: bool = False, progress: Progress | None = None,
        models: tuple[str | None, str | None] = (None, None),
        max_cost_usd: float | None = None, shard: str | tuple[int, int] | None = None,
        batch: bool = False, wait: bool = True) -> RunResult:
    """Library entry point: plan, open the store, execute (with batch, pass after pass until
    nothing is left in a provider batch; wait=False returns at the first batch out)."""

    preload()  # litellm imports in the background while fixtures and prompts are checked
    shard = parse_shard(shard) if isinstance(shard, str) else shard
    if lc.config.sequential.enabled and (shard or batch):
        raise UserError("a sequential run takes its cases look by look, in one order, on one "
                        "machine: it cannot be split into shards or sent as provider batches",
                        field="{shard}" if shard else "{batch}",
                        opts={"shard": None, "batch": None})
    plan = plan_run(lc, fixture, a, b, models=models)
    if lc.config.judge_is_fallback():   # once per run, before any call


        warnings.warn(DemoJudgeWarning(DEMO_JUDGE), stacklevel=3)
    if (max_cost_usd if max_cost_usd is not None else lc.config.max_cost_usd) is not None:

        Budget(1.0).check_prices([plan.gen_a, plan.gen_b, plan.judge])  # before anything is stored
    if batch:   # before anything is stored: which models batch, and do their endpoints

        batched = preflight([plan.gen_a, plan.gen_b, plan.judge])
        if progress:
            progress("batch: calls to " + ", ".join(sorted({s.model for s in batched}))
                     + " go in provider batches; other calls are made directly")
    store = Store(lc.store_path)
    rid = None
    try:
        rid = start_run(lc, store, plan, run_id=run_id, resume=resume, shard=shard,
                        batch=batch)
        with stop_on_sigterm():
            return _run_started(lc, store, plan, rid, resume=resume, retry_errors=retry_errors,
                                progress=progress, max_cost_usd=max_cost_usd, shard=shard,
                                batch=batch, wait=wait)
    except KeyboardInterrupt as exc:   # Ctrl-C, or SIGTERM through stop_on_sigterm
        if rid is None or isinstance(exc, RunStopped):
            raise
        # the workers have stopped (the pools were shut down on the way out): record it
        store.update_run(rid, status="stopped",
                         finished_at=datetime.now(timezone.utc).replace(tzinfo=None))

        run_row = store.get_run(rid) or {"run_id": rid, "status": "stopped"}
        raise RunStopped(rid, "SIGTERM" if isinstance(exc, Terminated) else "SIGINT",
                         resume_hint(run_row), run_progress(store, run_row).counts) from None
    finally:
        store.close()


def _run_started(lc: LoadedConfig, store: Store, plan: RunPlan, rid: str, *, resume: bool,
                 retry_errors: bool, progress: Progress | None, max_cost_usd: float | None,
                 shard: tuple[int, int] | None, batch: bool, wait: bool) -> RunResult:
    if progress:
        progress(f"run {rid}: {len(plan.fixture)} cases, A={plan.a.name} B={plan.b.name}, "
                 f"generator {plan.gen_a.model}, judge {plan.judge.model}"
                 + (f" [{plan.comparison_kind}]" if plan.comparison_kind != "prompt" else ""))
    stale = stale_note(plan.fixture)
    if progress and stale:
        progress(f"warning: {stale}")
    mn = claim_minimum_n(lc, plan)
    if progress and not mn["can_license"]:
        progress(f"note: {mn['text']} (docs/CLAIM_STATISTICS.md)")
    skip = errored_cases(store, rid) if resume and not retry_errors else set()
    if progress and shard:
        progress(f"shard {shard[0]}/{shard[1]}: this run does its slice of the cases; "
                 "`abtest merge` the shards into one run for the report")
    stored = json.loads((store.get_run(rid) or {}).get("info_json") or "{}").get("sequential")
    if stored:   # a sequential run resumes as one, in its own order, whatever the flags say


        lc = copy.copy(lc)
        lc.config = lc.config.model_copy(update={"sequential": SequentialConfig(
            enabled=True, look=stored["look"], futility=stored["futility"],
            seed=stored["seed"], max_cases=stored.get("max_cases"))})
    elif resume and lc.config.sequential.enabled and store.generations(
            rid, columns=("case_id",)):
        raise UserError(f"run {rid} was not a sequential run: resume it without "
                        "{sequential}", field="{sequential}", opts={"sequential": None})
    if lc.config.sequential.enabled:
        return run_sequential(lc, store, plan, rid, progress=progress, skip=skip,
                           max_cost_usd=max_cost_usd, resume=resume)
    if not batch:
        done, shown = done_before(store, plan, rid, shard, skip, progress) if resume \
            else ((), None)
        return execute(lc, store, plan, rid, progress=progress, skip=skip,
                       max_cost_usd=max_cost_usd, shard=shard, done_before=done, shown=shown)
    return batch_passes(lc, store, plan, rid, skip=skip, wait=wait, progress=progress,
                         max_cost_usd=max_cost_usd, shard=shard, resume=resume)

