"""Run prompt variants A and B over one frozen fixture, then check and judge.

Each case: render the context block once (byte-identical for A and B), generate
A and B, run deterministic checks, then the judges. Every row is stored as soon
as it exists; the gateway's response cache makes `--resume` repeat no finished
provider call.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys
import time
from array import array
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence

from .config import LoadedConfig
from .errors import (DriftError, IncompleteError, ProviderError, RunStopped, Spelled, UserError,
                     resume_call)
from .fixtures import Fixture, load_fixture
from .progress import step
from .shapes import Case, ModelSpec, Variant
from .variants import (LoadedVariant, load_variant, messages_sha256, render_context,
                       render_messages)

if TYPE_CHECKING:
    from .llm.gateway import Gateway
    from .store import Store

Progress = Callable[[str], None]

DEMO_JUDGE = ("the judge is the embedded model because the config names none: its verdicts are "
              "for demonstration only (set `judge:` to a real model, or `judge: embedded` to "
              "mean it)")


def spent_so_far(store: Store, run_id: str, gw: Gateway) -> dict[str, Any]:
    """What a progress bar shows beside the cases: provider calls, cache hits, tokens and
    cost so far (the stored calls, so a resumed run counts its earlier work too)."""
    rows = store.call_summary(run_id).values()
    tokens = sum((r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0) for r in rows)
    costs = [r["cost"] for r in rows if r["cost"] is not None]
    out: dict[str, Any] = {"calls": gw.stats.provider_calls, "cached": gw.stats.cache_hits,
                           "tokens": tokens}
    if costs:
        out["cost"] = f"${sum(costs):.4f}"
    return out


def _provider_stopped() -> type:
    """`ProviderUnreachable` (what the gateway saw) that is also an `abtest.ProviderError`,
    its way on spelled per surface (a command to paste; a call in Python)."""
    from .llm import ProviderUnreachable

    class ProviderStopped(ProviderUnreachable, ProviderError):
        def __init__(self, model: str, api_base: str | None, reason: str, go_on: Spelled):
            super().__init__(model, api_base, reason)
            self.message = (f"{self.args[0]}; the run stops here, incomplete; finished work is "
                            "kept: `{go_on}` goes on once it answers")
            self.opts = {"go_on": go_on}
            self.args = (self.line(),)

    return ProviderStopped


class TokenCounts:
    """Prompt tokens of A and B per case, counted before the run for the budget check.

    Two C arrays in fixture order, keyed by the fixture's own id strings: a dict of (A, B)
    tuples under fresh id strings took ~210 bytes a case (~20 MB at 100,000 cases)."""

    def __init__(self) -> None:
        self._pos: dict[str, int] = {}
        self._a, self._b = array("q"), array("q")

    def add(self, cid: str, na: int, nb: int) -> None:
        self._pos[cid] = len(self._a)
        self._a.append(na)
        self._b.append(nb)

    def get(self, cid: str) -> tuple[int | None, int | None]:
        i = self._pos.get(cid)
        return (None, None) if i is None else (self._a[i], self._b[i])

    def totals(self) -> tuple[int, int]:
        return sum(self._a), sum(self._b)


@dataclass
class RunPlan:
    """Everything decided before the first provider call."""

    fixture: Fixture
    a: LoadedVariant
    b: LoadedVariant
    gen_a: ModelSpec
    gen_b: ModelSpec
    judge: ModelSpec
    context_separator: str
    comparison_kind: str
    pipeline_reasons: list[str] = field(default_factory=list)
    overflow: dict[str, list[str]] = field(default_factory=dict)  # case id -> variants
    token_counts: TokenCounts = field(default_factory=TokenCounts)
    token_method: str = ""
    input_budget: int = 0
    self_judge: bool = False
    context_chars: int = 0  # total over cases, for the dry-run token estimate
    a_template: str = ""
    b_template: str = ""
    n_answerable: int = 0

    def render(self, case: Case) -> tuple[tuple[str, str], tuple[list[dict], list[dict]]]:
        """(context A, context B), (messages A, messages B): rendered when needed, not held."""
        ca = render_context(case, self.a_template, self.context_separator)
        cb = ca if self.b_template == self.a_template else \
            render_context(case, self.b_template, self.context_separator)
        return (ca, cb), (render_messages(self.a, case, ca), render_messages(self.b, case, cb))


def git_commit_of(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    commit = out.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True,
                           text=True, timeout=5).stdout.strip()
    return commit + ("+dirty" if dirty else "")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _spec_for(lc: LoadedConfig, lv: LoadedVariant, override: str | None = None) -> ModelSpec:
    gen = lc.config.generator
    model = override or lv.variant.model
    return gen.model_copy(update={"model": model}) if model else gen


def plan_run(lc: LoadedConfig, fixture_path, a_path, b_path, *, count_tokens: bool = True,
             models: tuple[str | None, str | None] = (None, None),
             needs: list[str] | None = None) -> RunPlan:
    """Load and verify inputs; detect a pipeline change before spending anything.
    With `needs` (a dry run), what a model would still need to answer (weights, a key) is
    listed there instead of stopping: a plan makes no model call."""
    from .llm import check_credentials

    cfg = lc.config
    if isinstance(fixture_path, Fixture):   # loaded already (the Python API): verified then
        fx = fixture_path
    else:
        fx = load_fixture(lc.resolve(fixture_path) if not Path(fixture_path).is_absolute() and
                          not Path(fixture_path).exists() else fixture_path)
    if not len(fx):
        raise UserError("fixture has no cases", file=str(fx.path))
    a, b = (v if isinstance(v, LoadedVariant) else load_variant(v) for v in (a_path, b_path))
    from .variants import check_context_template

    check_context_template(cfg.context_template, file=str(lc.path or "abtest.yaml"))
    gen_a, gen_b = _spec_for(lc, a, models[0]), _spec_for(lc, b, models[1])
    for where, spec in (("generator", gen_a), ("generator", gen_b), ("judge", cfg.judge)):
        if needs is None:
            check_credentials(spec, where=where)
            continue
        try:
            check_credentials(spec, where=where)
        except UserError as exc:
            line = f"{where} {spec.model}: {exc.line()}"
            if line not in needs:
                needs.append(line)
    reasons: list[str] = []
    tpl_a = a.variant.context_template or cfg.context_template
    tpl_b = b.variant.context_template or cfg.context_template
    if tpl_a != tpl_b:
        reasons.append("the variants assemble the context with different context templates")
    elif a.variant.context_template is not None:
        reasons.append("a variant overrides the configured context template")
    kind = "prompt"
    if gen_a.model != gen_b.model:
        kind = "model"
    plan = RunPlan(fx, a, b, gen_a, gen_b, cfg.judge, cfg.context_separator, kind, reasons,
                   a_template=tpl_a, b_template=tpl_b)
    # one streaming pass: every prompt is rendered (template errors surface before any call),
    # compared and, when asked, counted; nothing per case is kept but two token counts
    diff_ctx = 0
    fit = _InputFit(plan, cfg) if count_tokens else None
    ids = fx.ids()  # the verified cases come in this order; their id strings are kept once
    for i, case in enumerate(fx.iter_cases()):
        (ca, cb), (ma, mb) = plan.render(case)
        diff_ctx += ca != cb
        plan.n_answerable += case.answerable
        plan.context_chars += len(ca)
        if fit is not None:
            fit.add(ids[i], ma, mb)
    if diff_ctx and not any("context template" in r for r in reasons):
        reasons.append(f"context bytes differ between A and B in {diff_ctx} case(s)")
    if fit is not None:
        fit.finish()
    if plan.pipeline_reasons:
        plan.comparison_kind = "pipeline_change"
    plan.self_judge = cfg.judge.model in {gen_a.model, gen_b.model}
    return plan


class _InputFit:
    """Whether each rendered prompt fits the generator's input (in tokens, counted offline):
    a case that would not is flagged, since a chunk would be cut or dropped. Not a dollar
    budget (that is llm.budget.Budget)."""

    def __init__(self, plan: RunPlan, cfg):
        from .llm import LOCAL_PREFIX

        self.plan = plan
        budget = cfg.max_input_tokens
        if plan.gen_a.model.startswith(LOCAL_PREFIX) or plan.gen_b.model.startswith(LOCAL_PREFIX):
            from .llm.embedded import N_CTX

            budget = min(budget, N_CTX)
        self.budget = budget
        self.method = ""

    def add(self, cid: str, ma: list[dict], mb: list[dict]) -> None:
        from .llm import count_tokens

        plan = self.plan
        na, self.method = count_tokens(plan.gen_a.model, ma)
        nb = na if mb == ma and plan.gen_b.model == plan.gen_a.model else \
            count_tokens(plan.gen_b.model, mb)[0]
        plan.token_counts.add(cid, na, nb)
        over = []
        if na > self.budget - plan.gen_a.max_tokens:
            over.append("A")
        if nb > self.budget - plan.gen_b.max_tokens:
            over.append("B")
        if over:
            plan.overflow[cid] = over

    def finish(self) -> None:
        plan = self.plan
        plan.token_method = self.method
        plan.input_budget = self.budget
        if plan.overflow:
            plan.pipeline_reasons.append(
                f"{len(plan.overflow)} case(s) exceed the input budget ({self.budget} tokens minus "
                f"max_tokens; counted with {self.method}), so a chunk would be cut or dropped")


def dry_run(lc: LoadedConfig, plan: RunPlan, max_cost_usd: float | None = None,
            needs: list[str] | None = None) -> dict:
    """What the run would cost, and what it would still need, before spending anything or
    calling any model (`needs`: the pre-flight's lines from `plan_run`)."""
    from .llm import estimate_cost, provider_keys_missing

    n = len(plan.fixture)
    judges = lc.config.judges
    tok_a, tok_b = plan.token_counts.totals()
    gen_calls = {plan.gen_a.model: n} if plan.gen_a.model == plan.gen_b.model else {}
    if plan.gen_a.model == plan.gen_b.model:
        gen_calls[plan.gen_a.model] = 2 * n
    else:
        gen_calls = {plan.gen_a.model: n, plan.gen_b.model: n}
    per_case_judge = 0
    if "pairwise" in judges:
        per_case_judge += 2
    if "faithfulness" in judges:
        per_case_judge += 4
    if "coverage" in judges:
        per_case_judge += 2
    for j in ("quality", "relevance", "conformance"):
        if j in judges:
            per_case_judge += 2
    if "keywords" in judges:
        per_case_judge += 1
    judge_calls = per_case_judge * n
    repeat_calls = 0
    if "pairwise" in judges and lc.config.judge_repeats:  # K re-asks, both orders, on a sample
        repeat_calls = 2 * lc.config.judge_repeats * min(lc.config.judge_repeat_cases, n)
    judge_calls += repeat_calls
    ctx_tokens = plan.context_chars // 4
    judge_prompt_tokens = judge_calls * (ctx_tokens // max(n, 1) + 300)
    from .llm.provider import cost_of

    def priced(spec, prompt, completion):  # the configured price wins over litellm's table
        return (cost_of(spec, prompt, completion) if spec.price is not None
                else estimate_cost(spec.model, prompt, completion))

    costs = {
        "generator": priced(plan.gen_a, tok_a + tok_b, 2 * n * plan.gen_a.max_tokens),
        "judge": priced(plan.judge, judge_prompt_tokens, judge_calls * 150)}
    budget = max_cost_usd if max_cost_usd is not None else lc.config.max_cost_usd
    needs = list(needs or [])
    for where, spec in (("generator", plan.gen_a), ("generator", plan.gen_b),
                        ("judge", plan.judge)):
        for key in provider_keys_missing(spec):
            line = f"{where} {spec.model}: environment variable {key} is not set (its API key)"
            if line not in needs:
                needs.append(line)
    total = (None if any(v is None for v in costs.values())
             else round(sum(costs.values()), 6))
    return {"cases": n, "provider_calls": {"generator": gen_calls,
                                           "judge": {plan.judge.model: judge_calls}},
            "calls_per_case_max": round((2 * n + judge_calls) / n, 1) if n else 0,
            "judge_repeat_calls": repeat_calls,
            "estimated_tokens": {"generator_prompt": tok_a + tok_b,
                                 "generator_completion_max": 2 * n * plan.gen_a.max_tokens,
                                 "judge_prompt_approx": judge_prompt_tokens},
            "token_count_method": plan.token_method,
            "estimated_cost_usd": costs,
            "max_cost_usd": budget,
            "fits_budget": None if budget is None or total is None else total <= budget,
            "note": "upper bounds before caching; cached calls cost nothing; cost is null where "
                    "litellm does not know the model's price",
            "comparison_kind": plan.comparison_kind, "pipeline_reasons": plan.pipeline_reasons,
            "claim_minimum_n": claim_minimum_n(lc, plan),
            "needs": needs, "ready": not needs}


def stale_note(fixture) -> str | None:
    """Said before a run on a fixture past its refresh date: it measures an old retrieval."""
    m = fixture.manifest  # the manifest only: the cases of a large fixture are not parsed
    due = m.due()
    if datetime.now(timezone.utc) <= due:
        return None
    return (f"fixture {fixture.name} is past its refresh date (captured "
            f"{m.captured_at}, due for re-capture on {due.date().isoformat()}); "
            "the run measures retrieval as it was then: `abtest capture` again for a current one")


def claim_minimum_n(lc: LoadedConfig, plan: RunPlan) -> dict:
    """Can this fixture license a claim at all at the configured margins?"""
    from .sizing import minimum_n, minimum_n_text

    mn = minimum_n(lc.config, plan.n_answerable, len(plan.fixture) - plan.n_answerable)
    mn["text"] = minimum_n_text(mn)
    return mn


def config_record(lc: LoadedConfig) -> str:
    # api_key_env holds a variable *name*, never a key; nothing secret is in the config
    return json.dumps(lc.config.model_dump(mode="json"), sort_keys=True)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'i/n' (1 ≤ i ≤ n ≤ 1000) -> (i, n)."""
    if text is None:
        return None
    i, sep, n = str(text).partition("/")
    try:
        i_, n_ = int(i), int(n)
    except ValueError:
        i_ = n_ = 0
    if not sep or not 1 <= i_ <= n_ <= 1000:
        raise UserError(f"--shard {text!r}: expected i/n with 1 ≤ i ≤ n ≤ 1000, e.g. 2/4",
                        field="--shard")
    return i_, n_


def in_shard(case_id: str, shard: tuple[int, int]) -> bool:
    """A case's shard depends on its id alone: every machine slices a fixture the same way."""
    i, n = shard
    return int(hashlib.sha256(case_id.encode("utf-8")).hexdigest(), 16) % n == i - 1


def start_run(lc: LoadedConfig, store: Store, plan: RunPlan, *, run_id: str | None = None,
              resume: bool = False, shard: tuple[int, int] | None = None,
              batch: bool = False) -> str:
    """Create the run row, or check that a resumed run still matches its inputs."""
    if run_id is not None:
        from .names import check_id

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


@dataclass
class CaseOutcome:
    case_id: str
    errors: list[str] = field(default_factory=list)
    calls: int = 0


def _judge_case(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, case: Case,
                answers: dict[str, str], out: CaseOutcome, fan) -> None:
    """The judge plan of one case (judges.plan), its calls side by side."""
    from .judges.plan import JudgeInputs, judge_tasks

    for results in fan(judge_tasks(gw, lc.config, JudgeInputs.frozen(case, answers))):
        for row, claims in results:
            row = {"run_id": run_id, **row}
            store.put_judgment(row, claims)
            if row.get("error"):
                out.errors.append(f"{row['judge']}[{row['subject']}]: {row['error']}")


def conformance_rubric(a: Variant, b: Variant) -> dict | None:
    """The one rubric both answers are scored against, so conformance is a paired comparison:
    B's when B sets one (B is the change under test), else A's; None when neither does."""
    ra = a.rubric if a.style and a.rubric else None
    rb = b.rubric if b.style and b.rubric else None
    if rb is None and ra is None:
        return None
    rubric, side = (rb, "B") if rb else (ra, "A")
    if ra and rb and ra != rb:
        note = ("A and B set different rubrics; both answers are scored against B's (the change "
                "under test), A's is not used")
    elif ra and rb:
        note = None
    else:
        note = (f"only {side} sets a rubric; both answers are scored against it, so the "
                "difference shows how far the change moved the style toward it")
    return {"from": side, "text": rubric, "note": note}


def _conformance(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, case: Case,
                 answers: dict[str, str], variants: dict[str, LoadedVariant],
                 out: CaseOutcome) -> None:
    from . import judges as J

    cr = conformance_rubric(variants["A"].variant, variants["B"].variant)
    if cr is None:
        return
    for v in variants:
        row = J.rubric(gw, lc.config.judge, case, "conformance", v,
                       {"rubric": cr["text"], "answer": answers[v]})
        store.put_judgment({"run_id": run_id, **row})
        if row.get("error"):
            out.errors.append(f"conformance[{v}]: {row['error']}")


def _fanout(pool):
    """Run a case's independent tasks side by side; results in task order."""
    def fan(tasks):
        if pool is None or len(tasks) < 2:
            return [t() for t in tasks]
        return [f.result() for f in [pool.submit(t) for t in tasks]]
    return fan


def process_case(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, plan: RunPlan,
                 case: Case, inner=None) -> CaseOutcome:
    from .checks import run_checks

    fan = _fanout(inner)
    out = CaseOutcome(case.id)
    answers: dict[str, str] = {}
    variants = {"A": plan.a, "B": plan.b}
    specs = {"A": plan.gen_a, "B": plan.gen_b}
    contexts, messages = plan.render(case)
    results = fan([lambda i=i, v=v: gw.complete(specs[v], messages[i],
                                                 purpose=f"generate:{v}", case_id=case.id)
                   for i, v in enumerate(("A", "B"))])
    gen_rows, check_rows = [], []
    for i, v in enumerate(("A", "B")):
        msgs = messages[i]
        ctx = contexts[i]
        res = results[i]
        tokens = plan.token_counts.get(case.id)[i]
        gen_rows.append({
            "run_id": run_id, "case_id": case.id, "variant": v,
            "context_sha256": hashlib.sha256(ctx.encode("utf-8")).hexdigest(),
            "prompt_sha256": messages_sha256(msgs), "messages_json": json.dumps(msgs),
            "answer": res.content if res.ok else None, "error": res.error,
            "call_hash": res.call_hash, "model_requested": specs[v].model,
            "model_resolved": res.model_resolved, "latency_ms": res.latency_ms,
            "prompt_tokens": tokens, "overflow": v in plan.overflow.get(case.id, [])})
        if not res.ok:
            out.errors.append(f"generate[{v}]: {res.error}")
            continue
        answers[v] = res.content
        check_rows.append((run_id, case.id, v, [r.model_dump() for r in
                                                run_checks(res.content, case, variants[v].variant)]))
    store.put_generations(gen_rows, check_rows)  # both sides and their checks: one write
    if len(answers) < 2:
        return out  # unfinished case: never judged, never counted
    _judge_case(gw, lc, store, run_id, case, answers, out, fan)
    if "conformance" in lc.config.judges:
        _conformance(gw, lc, store, run_id, case, answers, variants, out)
    return out


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


def _result(prog, status: str, **kw: Any) -> RunResult:
    """A RunResult whose counts are `prog`'s (runstate.RunProgress)."""
    return RunResult(prog.run_id, status, prog.n_cases, prog.unfinished, counts=prog.counts,
                     n_finished=prog.n_finished, n_used=prog.n_used,
                     n_not_needed=prog.n_not_needed, **kw)


def _judge_repeats(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, plan: RunPlan,
                   unfinished: set[str], progress: Progress | None) -> None:
    """Re-ask the pairwise judge on a seeded sample K times (sample index in the cache key)."""
    import random

    from . import judges as J

    cfg = lc.config
    answers: dict[str, dict[str, str]] = {}
    for g in store.generations(run_id, exclude=("messages_json",)):
        if g["answer"] is not None:
            answers.setdefault(g["case_id"], {})[g["variant"]] = g["answer"]
    pool = sorted(cid for cid in plan.fixture.ids()
                  if cid not in unfinished and len(answers.get(cid, {})) == 2)
    picked = random.Random(cfg.seed).sample(pool, min(cfg.judge_repeat_cases, len(pool)))
    by_id = plan.fixture.by_id(picked)
    if progress and picked:
        progress(f"judge noise: re-asking the pairwise judge {cfg.judge_repeats}x on {len(picked)} cases")
    from .llm.batch import Deferred

    for cid in picked:
        for s in range(1, cfg.judge_repeats + 1):
            try:
                rows = J.pairwise(gw, cfg.judge, by_id[cid], answers[cid]["A"],
                                  answers[cid]["B"], sample=s)
            except Deferred:   # in a batch: the next pass stores it
                continue
            for row in rows:
                store.put_judgment({"run_id": run_id, **row})


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
    from .llm import Budget, BudgetExceeded, Gateway, ModelDriftError
    from .llm.batch import BatchQueue, Deferred

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
    from .llm.ratelimit import STATUS_EVERY_S, in_flight_bound

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
        _judge_repeats(gw, lc, store, run_id, plan, set(unfinished), progress)
    if drift:
        mark_incomplete(store, run_id)
        raise DriftError(f"{drift[0]}; the run stops here, incomplete: start a new run once "
                         "the provider serves one version (pin a dated model name)")
    if dead is not None:   # one line: the model, its endpoint, the error (never a key)
        mark_incomplete(store, run_id)
        from .runs import resume_hint

        hint = resume_hint(store.get_run(run_id) or {"run_id": run_id})
        raise _provider_stopped()(dead.model, dead.api_base, dead.reason, Spelled(
            f"{hint} --retry-errors", resume_call(run_id, retry_errors=True))) from None
    if budget is not None:
        info = json.loads((store.get_run(run_id) or {}).get("info_json") or "{}")
        info["budget"] = {"max_usd": budget.max_usd, "spent_usd": round(budget.spent_usd, 6),
                          "stopped": budget.stopped}
        store.update_run(run_id, info_json=json.dumps(info, sort_keys=True))
    batch_ids: list[str] = []
    queue = gw.batch
    if queue is not None and len(queue):
        from .llm.batch import submit

        try:
            batch_ids = submit(store, run_id, queue, progress)
        except IncompleteError:   # what was submitted is stored; --resume --batch collects it
            mark_incomplete(store, run_id)
            raise
    if budget is not None and budget.stopped:
        mark_incomplete(store, run_id)
        out = f" ({len(batch_ids)} batch(es) already submitted are collected then)" \
            if batch_ids else ""
        more = {"batch": True} if batch else {}
        raise IncompleteError(f"{budget.stopped}; finished work is kept: `{{go_on}}` with a "
                              f"higher budget continues{out}", opts={"go_on": Spelled(
                                  f"abtest run --resume --run-id {run_id} --max-cost …"
                                  f"{' --batch' if batch else ''}",
                                  resume_call(run_id, max_cost_usd=Ellipsis, **more))})
    if batch_ids:
        from .llm.batch import BatchPending

        assert queue is not None  # batch ids come only from submitting the queue
        mark_incomplete(store, run_id)
        raise BatchPending(f"waiting for {len(batch_ids)} batch(es) at the provider "
                           f"({', '.join(batch_ids)}; {len(queue)} request(s)); `abtest run "
                           f"--run-id {run_id} --resume --batch` collects them and goes on")
    # complete by the one rule (runstate): every case of this run (its shard's) finished
    from .runstate import run_progress

    prog = run_progress(store, store.get_run(run_id) or {"run_id": run_id, "status": "running"},
                        writing=None)
    left = sorted(c for c in prog.unfinished if c in mine)
    status = "complete" if not left else "incomplete"
    if finalize or left:
        store.update_run(run_id, status=status,
                         finished_at=datetime.now(timezone.utc).replace(tzinfo=None))
    st = gw.stats
    total_calls = store.count_distinct_calls(run_id)
    result = _result(prog, status, provider_calls=st.provider_calls,
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


def run(lc: LoadedConfig, fixture, a, b, *, run_id: str | None = None, resume: bool = False,
        retry_errors: bool = False, progress: Progress | None = None,
        models: tuple[str | None, str | None] = (None, None),
        max_cost_usd: float | None = None, shard: str | tuple[int, int] | None = None,
        batch: bool = False, wait: bool = True) -> RunResult:
    """Library entry point: plan, open the store, execute (with batch, pass after pass until
    nothing is left in a provider batch; wait=False returns at the first batch out)."""
    from .llm import preload
    from .store import Store

    preload()  # litellm imports in the background while fixtures and prompts are checked
    shard = parse_shard(shard) if isinstance(shard, str) else shard
    if lc.config.sequential.enabled and (shard or batch):
        raise UserError("a sequential run takes its cases look by look, in one order, on one "
                        "machine: it cannot be split into shards or sent as provider batches",
                        field="{shard}" if shard else "{batch}",
                        opts={"shard": None, "batch": None})
    plan = plan_run(lc, fixture, a, b, models=models)
    if lc.config.judge_is_fallback():   # once per run, before any call
        import warnings

        from .errors import DemoJudgeWarning

        warnings.warn(DemoJudgeWarning(DEMO_JUDGE), stacklevel=3)
    if (max_cost_usd if max_cost_usd is not None else lc.config.max_cost_usd) is not None:
        from .llm.budget import Budget

        Budget(1.0).check_prices([plan.gen_a, plan.gen_b, plan.judge])  # before anything is stored
    if batch:   # before anything is stored: which models batch, and do their endpoints
        from .llm.batch import preflight

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
        from .runs import resume_hint
        from .runstate import run_progress

        run_row = store.get_run(rid) or {"run_id": rid, "status": "stopped"}
        raise RunStopped(rid, "SIGTERM" if isinstance(exc, _Terminated) else "SIGINT",
                         resume_hint(run_row), run_progress(store, run_row).counts) from None
    finally:
        store.close()


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so a run stops as on Ctrl-C."""


@contextmanager
def stop_on_sigterm():
    """While a run writes, SIGTERM stops it the way Ctrl-C does (its state is recorded as
    "stopped"); Python's default would end the process with the run left "running". Only
    the main thread can take signals: elsewhere (a worker thread) nothing changes."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise _Terminated()

    before = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


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
        progress(f"note: {mn['text']} (docs/STATISTICS.md)")
    skip = errored_cases(store, rid) if resume and not retry_errors else set()
    if progress and shard:
        progress(f"shard {shard[0]}/{shard[1]}: this run does its slice of the cases; "
                 "`abtest merge` the shards into one run for the report")
    stored = json.loads((store.get_run(rid) or {}).get("info_json") or "{}").get("sequential")
    if stored:   # a sequential run resumes as one, in its own order, whatever the flags say
        import copy

        from .shapes import SequentialConfig

        lc = copy.copy(lc)
        lc.config = lc.config.model_copy(update={"sequential": SequentialConfig(
            enabled=True, look=stored["look"], futility=stored["futility"],
            seed=stored["seed"], max_cases=stored.get("max_cases"))})
    elif resume and lc.config.sequential.enabled and store.generations(
            rid, columns=("case_id",)):
        raise UserError(f"run {rid} was not a sequential run: resume it without "
                        "{sequential}", field="{sequential}", opts={"sequential": None})
    if lc.config.sequential.enabled:
        return _sequential(lc, store, plan, rid, progress=progress, skip=skip,
                           max_cost_usd=max_cost_usd, resume=resume)
    if not batch:
        done, shown = _done_before(store, plan, rid, shard, skip, progress) if resume \
            else ((), None)
        return execute(lc, store, plan, rid, progress=progress, skip=skip,
                       max_cost_usd=max_cost_usd, shard=shard, done_before=done, shown=shown)
    return _batch_passes(lc, store, plan, rid, skip=skip, wait=wait, progress=progress,
                         max_cost_usd=max_cost_usd, shard=shard, resume=resume)


def _done_before(store: Store, plan: RunPlan, rid: str, shard: tuple[int, int] | None,
                 skip: set[str], progress: Progress | None, *, say: bool = True
                 ) -> tuple[set[str], Shown]:
    """The cases a resumed run finished earlier (the one rule, runstate), which it does not
    touch again, and where its progress counts from; says "resuming RUN: 11 of 40 finished,
    29 to go" once."""
    from .runstate import run_progress

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


def _batch_passes(lc: LoadedConfig, store: Store, plan: RunPlan, rid: str, *, skip: set[str],
                  wait: bool, progress: Progress | None, resume: bool, **kw) -> RunResult:
    """Collect what is out, run a pass, submit what it deferred; again until a pass defers
    nothing. Every step is in the store, so a process may stop anywhere between."""
    from .llm import Gateway, ModelDriftError
    from .llm.batch import BatchPending, collect

    specs = [plan.gen_a, plan.gen_b, plan.judge]
    first = True
    while True:
        pinned, _ = pinned_and_spent(store, rid)
        try:
            out = collect(Gateway(store, run_id=rid, pinned=pinned), store, rid, specs,
                          wait=wait, poll_s=lc.config.batch_poll_s, progress=progress)
        except ModelDriftError as exc:
            mark_incomplete(store, rid)
            raise DriftError(f"{exc}; the run stops here, incomplete") from None
        except (IncompleteError, UserError):
            mark_incomplete(store, rid)
            raise
        if out:
            store.update_run(rid, status="incomplete")
            raise BatchPending(f"waiting for {len(out)} batch(es) at the provider ("
                               f"{', '.join(b['batch_id'] for b in out)}); `{{go_on}}` collects "
                               "them and goes on", opts={"go_on": Spelled(
                                   f"abtest run --run-id {rid} --resume --batch",
                                   resume_call(rid, batch=True))})
        if not first:   # a case that ended in error in an earlier pass stays unfinished
            skip = errored_cases(store, rid)
        done, shown = _done_before(store, plan, rid, kw.get("shard"), skip, progress,
                                   say=first and resume)
        first = False
        try:
            return execute(lc, store, plan, rid, progress=progress, skip=skip, batch=True,
                           done_before=done, shown=shown, **kw)
        except BatchPending:
            if not wait:
                raise


def _sequential(lc: LoadedConfig, store: Store, plan: RunPlan, rid: str, *,
                progress: Progress | None, skip: set[str],
                max_cost_usd: float | None, resume: bool = False) -> RunResult:
    """A sequential run (docs/STATISTICS.md §11): the fixture's units in a seeded order, a
    look after every `sequential.look` of them, a stop once the claim is decided, shown
    futile or shown undecidable. Each look runs only the cases it adds (and any an earlier
    process left unfinished): a case finished at an earlier look is never sent again, not
    even to the cache. The look itself is recomputed from the stored judgments
    (sequential.replay_run), so a resumed run continues from its last finished look in the
    same order, and its report tells the same looks."""
    from .groups import case_groups
    from .runstate import run_progress
    from .sequential import STOPS, new_record, replay_run, run_plan, taken_cases

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
    return _result(prog, status, provider_calls=calls, cache_hits=hits,
                   seconds=time.monotonic() - t0, comparison_kind=plan.comparison_kind,
                   calls_per_case=round(total_calls / n, 2) if n else 0.0)
