"""Everything decided before the first provider call: the inputs loaded and verified, the
prompts rendered (template errors surface before any call), the comparison's kind, token
fit, what a dry run would cost, and the run's id and recorded config."""

from __future__ import annotations

import json
import secrets
import subprocess
from array import array
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from abtest.core.config import LoadedConfig
from abtest.errors import (UserError)
from abtest.core.fixture_set import Fixture, load_fixture
from abtest.core.models import Case, ModelSpec, Variant
from abtest.prompts.variants import (LoadedVariant, load_variant, render_context, render_messages)
from abtest.llm import check_credentials
from abtest.prompts.variants import check_context_template
from abtest.llm import estimate_cost, provider_keys_missing
from abtest.llm.provider import cost_of
from abtest.stats.sizing import minimum_n, minimum_n_text
from abtest.llm import LOCAL_PREFIX
from abtest.llm import count_tokens
from abtest.llm.embedded import N_CTX

if TYPE_CHECKING:
    pass


DEMO_JUDGE = ("the judge is the embedded model because the config names none: its verdicts are "
              "for demonstration only (set `judge:` to a real model, or `judge: embedded` to "
              "mean it)")


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

    cfg = lc.config
    if isinstance(fixture_path, Fixture):   # loaded already (the Python API): verified then
        fx = fixture_path
    else:
        fx = load_fixture(lc.resolve(fixture_path) if not Path(fixture_path).is_absolute() and
                          not Path(fixture_path).exists() else fixture_path)
    if not len(fx):
        raise UserError("fixture has no cases", file=str(fx.path))
    a, b = (v if isinstance(v, LoadedVariant) else load_variant(v) for v in (a_path, b_path))

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

        self.plan = plan
        budget = cfg.max_input_tokens
        if plan.gen_a.model.startswith(LOCAL_PREFIX) or plan.gen_b.model.startswith(LOCAL_PREFIX):

            budget = min(budget, N_CTX)
        self.budget = budget
        self.method = ""

    def add(self, cid: str, ma: list[dict], mb: list[dict]) -> None:

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
    if not m.stale_at(datetime.now(timezone.utc)):
        return None
    due = m.due()
    return (f"fixture {fixture.name} is past its refresh date (captured "
            f"{m.captured_at}, due for re-capture on {due.date().isoformat()}); "
            "the run measures retrieval as it was then: `abtest capture` again for a current one")


def claim_minimum_n(lc: LoadedConfig, plan: RunPlan) -> dict:
    """Can this fixture license a claim at all at the configured margins?"""

    mn = minimum_n(lc.config, plan.n_answerable, len(plan.fixture) - plan.n_answerable)
    mn["text"] = minimum_n_text(mn)
    return mn


def config_record(lc: LoadedConfig) -> str:
    # api_key_env holds a variable *name*, never a key; nothing secret is in the config
    return json.dumps(lc.config.model_dump(mode="json"), sort_keys=True)


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
