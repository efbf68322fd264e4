"""The frozen report's types: the JSON contract of docs/DESIGN.md written as pydantic models.

`build_report` validates what it builds against `Report` before anyone reads it, so a
key renamed, dropped or mistyped in the builder fails there rather than in a user's CI;
`undeclared` turns every key the models do not name into an error for the builder too.
Readers go the other way: `Report.model_validate_json(text)` gives typed access to a
report file, and keys a newer abtest adds are kept (the contract says more keys are
welcome), never refused. `report_schema()` is the JSON Schema published in
docs/report.schema.json.

Models are frozen, and a whole report keeps the JSON shape it was validated from: renderers
read that (`json_shape`), so a report is dumped at most once, never once per format.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, TypeVar

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo,
                      ValidatorFunctionWrapHandler, model_validator)
from abtest.store.frames import cases_frame
from abtest.store.frames import metrics_frame
from abtest.store.frames import incidents_frame
from abtest.errors import UserError
from abtest.store import Store
from abtest.store.frames import need_pandas
from abtest.reporting.display import short_repr
from abtest.reporting.display import glance_markdown
from abtest.reporting.display import glance_html

if TYPE_CHECKING:
    import pandas

Num = Optional[float]
_M = TypeVar("_M", bound="_Part")


class _Part(BaseModel):
    # readers keep unknown keys (`undeclared` lists them for the builder's own check);
    # strict: "yes" is not a boolean nor "5" a count; frozen: a report, once read or built,
    # is what every renderer shows (its JSON shape is taken once, see json_shape)
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    @model_validator(mode="after")
    def _note_undeclared(self, info: ValidationInfo) -> Any:
        # the builder's own check (_checked) learns here, where each part passes anyway, that
        # some part has a key no model declares, rather than walking 100,000 nodes after
        if self.__pydantic_extra__ and isinstance(info.context, dict):
            info.context["undeclared"] = True
        return self

    def as_dict(self) -> dict[str, Any]:
        """The plain JSON shape this part was validated from (unset defaults left out), a new
        copy each call: renderers share one through json_shape."""
        return self.model_dump(exclude_unset=True)


# --------------------------------------------------------------------------- header

class FixtureInfo(_Part):
    name: str
    corpus_version: Optional[str]
    cases_sha256: str
    retriever: Optional[str]
    captured_at: Optional[str] = None
    refresh_every_days: Optional[int] = None
    next_evaluation_date: Optional[str] = Field(
        None, description="captured_at + refresh_every_days: when the fixture is due again")
    stale_at_run: Optional[bool] = Field(
        None, description="the run started after next_evaluation_date: it describes an old "
                          "retrieval")


class VariantInfo(_Part):
    name: str
    sha256: str


class Variants(_Part):
    a: VariantInfo
    b: VariantInfo


class ModelUse(_Part):
    requested: str = Field(description="a model comparison's generators as 'm1 | m2'")
    resolved: list[str] = Field(description="every version the provider reported")
    drift: Optional[dict[str, list[str]]] = Field(
        None, description="requested model → its versions, for each that resolved to more than "
                          "one: drift withholds the claim")


class Models(_Part):
    generator: ModelUse
    judge: ModelUse


# --------------------------------------------------------------------------- judge validation

class JudgeAgreement(_Part):
    n_labels: int
    kappa: Num
    ci_low: Num
    ci_high: Num
    agreement: Num
    validated: bool
    reason: Optional[str] = None
    note: Optional[str] = None


class JudgeValidation(_Part):
    pairwise: JudgeAgreement
    faithfulness: JudgeAgreement
    coverage: JudgeAgreement
    abstention: JudgeAgreement
    claim_judges: list[str]
    validated: bool = Field(description="every judge the claim rests on is validated")
    rule: str
    min_labels: int
    min_kappa: float


# --------------------------------------------------------------------------- metrics

class Dropped(_Part):
    a_only: list[str]
    b_only: list[str]
    both: list[str]
    reasons: dict[str, dict[str, int]]
    note: Optional[str] = None


class Secondary(_Part):
    test: str
    method: Optional[str] = None
    p_value: Num
    n_used: Optional[int] = None
    statistic: Num = None


class Sensitivity(_Part):
    test: str
    p_value: Num


class ScoreSummary(_Part):
    n: int
    n_missing: int
    average: Num
    median: Num
    p25: Num
    p75: Num
    min: Num
    max: Num
    high: int
    medium: int
    low: int


class Mde(_Part):
    mde: Num
    d_z: Num
    alpha: float
    power: float
    sd_d: Num
    note: Optional[str] = None
    effective_n: Num = Field(None, description="with groups: the N the MDE is computed at, "
                                               "n / design_effect")
    df: Num = Field(None, description="with groups: the cluster-robust t's degrees of freedom")
    method: Optional[str] = Field(None, description="how it was computed when the interval is "
                                                    "the betting one (approximate)")


class DropBound(_Part):
    method: str
    imputed_b: int
    imputed_a: int
    n: int
    difference: Num
    ci_low: Num
    ci_high: Num
    p_value: Num
    holds: bool
    test: Optional[str] = None
    n_groups: Optional[int] = None
    inference: Optional[str] = None


class NonInferiority(_Part):
    margin: float
    holds: bool
    rule: str
    conf_level: Num = None
    ci_low: Num = None
    p_value: Num = None
    min_n: Optional[int] = None
    lower: Num = None
    upper: Num = None
    note: Optional[str] = None
    n_groups: Optional[int] = None
    units: Num = Field(None, description="with groups: Kish's n²/Σn_g², the independent cases "
                                         "the pairs are worth at most; compared with min_n")
    inference: Optional[str] = None


class _Paired(_Part):
    """What every paired metric reports: per-variant values, B − A with its CI, the test."""

    metric: str
    n: int
    a: Num
    b: Num
    difference: Num
    ci_low: Num
    ci_high: Num
    conf_level: Num = None
    ci_method: Optional[str] = None
    test: Optional[str]
    p_value: Num
    p_holm: Num = None
    significant: bool = False
    direction: Optional[Literal["A", "B"]] = None
    note: Optional[str] = None
    # present only when some group holds two or more of the metric's cases (docs/CLAIM_STATISTICS.md §10)
    n_groups: Optional[int] = Field(None, description="groups among the pairs used")
    design_effect: Num = Field(None, description="cluster-robust over iid variance of the "
                                                 "difference")
    effective_n: Num = Field(None, description="n / design_effect")
    icc: Num = Field(None, description="implied intra-group correlation, (DEFF − 1)/(Σn_g²/n − 1)")
    inference: Optional[str] = Field(None, description="how the test treats groups, or why "
                                                       "there is none ('none: too few groups')")


class ScoreMetric(_Paired):
    """A 0–1 score judge (faithfulness, coverage, quality, relevance, conformance)."""

    dropped: Dropped
    n_dropped: int
    a_all: Num = Field(None, description="A's mean over every case A has a score for")
    n_a_all: Optional[int] = None
    b_all: Num = Field(None, description="B's mean over every case B has a score for: the "
                                         "gate's faithfulness value")
    n_b_all: Optional[int] = None
    d_z: Num = None
    sd_d: Num = None
    secondary: Optional[Secondary] = None
    sensitivity: Optional[Sensitivity] = None
    summary_a: Optional[ScoreSummary] = None
    summary_b: Optional[ScoreSummary] = None
    effective_units: Num = Field(None, description="n / max(1, skewness², excess kurtosis) of "
                                                   "the units: from 30 the interval is the t's "
                                                   "(CR2's), below it the betting one")
    mde: Optional[Mde] = None
    no_claims: Optional[dict[str, list[str]]] = None
    note_no_claims: Optional[str] = None
    drop_bound: Optional[DropBound] = None
    at_claim_cap: Optional[dict[str, list[str]]] = Field(
        None, description="faithfulness only: per variant, the cases whose answer gave the "
                          "claim extractor as many claims as max_claims allows (more may "
                          "have gone unchecked)")
    max_claims: Optional[int] = Field(None, description="faithfulness only: the cap in force")
    margin: Num = None
    noninferiority: Optional[NonInferiority] = None
    method: Optional[str] = Field(None, description="relevance only: how it was measured")
    rubric: Optional[dict[str, Optional[str]]] = Field(
        None, description="conformance only: the one rubric both answers were scored against "
                          "(`from` A or B, `text`, `note`)")
    df: Num = Field(None, description="with groups: the cluster-robust t's degrees of freedom")
    min_groups: Optional[int] = Field(None, description="with groups: the fewest groups given "
                                                        "a test")


class Interval(_Part):
    estimate: Num = None
    ci_low: Num
    ci_high: Num
    method: Optional[str] = None


class PositionConsistency(_Part):
    estimate: Num
    ci_low: Num
    ci_high: Num
    n: Optional[int] = None
    biased_to_first: int
    biased_to_second: int


class LengthBias(_Part):
    n_decisive: int
    method: str
    separable: bool
    lc_share_b: Num
    lc_ci_low: Num
    lc_ci_high: Num
    explained_by_length: Optional[bool]
    caveat: Optional[str]
    b_longer: int
    b_shorter: int
    equal_length: int
    length_coef: Num = None
    length_p_value: Num = None
    note: Optional[str] = None


class PairwiseMetric(_Paired):
    b_wins: int
    a_wins: int
    no_preference: int
    position_inconsistent: int
    judge_errors: Optional[int] = None
    estimate: Num
    win_rate_ci: Interval
    midp: Num
    decisive_share_b: Interval
    position_consistency: PositionConsistency
    first_position_win_rate: Num
    length_ratio_b_over_a: Num
    length_bias: LengthBias
    by_group: Optional[dict[str, int]] = Field(
        None, description="with groups: groups whose votes favour b, a or none")
    secondary: Optional[Secondary] = None


class Table2x2(_Part):
    both: int
    a_only: int
    b_only: int
    neither: int


class BinaryMetric(_Paired):
    """Abstention on one subset: McNemar mid-p and a Tango interval of B − A."""

    n_dropped: int
    better: Literal["higher", "lower"]
    noninferiority: Optional[NonInferiority] = None
    table: Optional[Table2x2] = None
    secondary: Optional[dict[str, Num]] = None


class AbstentionMetrics(_Part):
    answerable: BinaryMetric
    unanswerable: BinaryMetric
    direction_note: str


class CheckMetric(_Paired):
    """One deterministic check: pass rates per variant, McNemar where both apply."""

    name: str
    n_a_applicable: int
    n_b_applicable: int
    pass_rate_a: Num
    pass_rate_b: Num
    n_a_pass: int
    n_b_pass: int
    n11: int
    n10: int
    n01: int
    n00: int
    newly_failing: list[str]
    newly_passing: list[str]


class KeywordsMetric(_Part):
    metric: str
    n: int
    summary: Optional[ScoreSummary]
    note: str


class Metrics(_Part):
    """Empty on an incomplete run: nothing is estimated until every case is finished."""

    pairwise: Optional[PairwiseMetric] = None
    faithfulness: Optional[ScoreMetric] = None
    coverage: Optional[ScoreMetric] = None
    quality: Optional[ScoreMetric] = None
    relevance: Optional[ScoreMetric] = None
    conformance: Optional[ScoreMetric] = None
    abstention: Optional[AbstentionMetrics] = None
    keywords: Optional[KeywordsMetric] = None
    checks: Optional[dict[str, CheckMetric]] = None


class Holm(_Part):
    family: list[str]
    alpha: float
    rule: Optional[str] = None
    fixed_from: Optional[str] = None
    without_data: Optional[list[str]] = None
    note: Optional[str] = None


# --------------------------------------------------------------------------- findings

class UnsupportedClaim(_Part):
    claim: str
    verdict: str


class IncidentChunk(_Part):
    id: str
    text: str = Field(description="whitespace collapsed, trimmed to 400 characters")


class Incident(_Part):
    """An answer below the incident faithfulness: its unsupported statements beside the
    frozen context they were checked against."""

    case_id: str
    variant: Literal["A", "B"]
    faithfulness: float
    question: Optional[str]
    answer: Optional[str]
    unsupported: list[UnsupportedClaim]
    context_ids: list[str]
    context: Optional[list[IncidentChunk]] = None


class PurposeCalls(_Part):
    provider_attempts: int
    cache_hits: Optional[int] = None
    errors: Optional[int] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    cost: Num = None


class CallCost(_Part):
    total: Num
    by_variant: dict[str, float]
    by_judge: dict[str, float]
    note: str


class Calls(_Part):
    by_purpose: dict[str, PurposeCalls]
    provider_attempts: int
    distinct_calls: int
    calls_per_case: Num
    cost_usd: Optional[CallCost] = None


class BudgetInfo(_Part):
    """`--max-cost`: the budget, what the run spent, and why it stopped (null: it did not)."""

    max_usd: float
    spent_usd: float
    stopped: Optional[str]


class JudgeNoise(_Part):
    repeats: int
    n_items: int
    n_comparisons: int
    agreement: float
    note: str


class PPIInterval(_Part):
    estimate: Num
    ci_low: Num
    ci_high: Num


class PPIBlock(_Part):
    estimand: str
    N: int
    n_labelled: int
    judge_only: PPIInterval
    ppi: PPIInterval
    ci_method: str
    note: Optional[str]


class PPI(_Part):
    alpha: float
    pairwise: Optional[PPIBlock] = None
    faithfulness: Optional[PPIBlock] = None


class Golden(_Part):
    is_draft: bool
    n_draft: int
    n_cases: int
    draft_ids: list[str]
    note: Optional[str]


class PromptDiff(_Part):
    case_id: str
    changed_parts: list[str]
    diff: str


class Claim(_Part):
    licensed: bool
    sentence: Optional[str] = Field(description="the one sentence a team may ship on; null "
                                                "unless every condition holds")
    reasons: list[str] = Field(description="why the claim is withheld; empty when licensed")
    scope: Optional[str] = None


class RemediationItem(_Part):
    priority: Literal["P1", "P2", "P3"]
    item: str
    likely_cause: str
    remedy: str


class CaseRow(_Part):
    case_id: str
    question: Optional[str]
    answerable: Optional[bool]
    category: Optional[str]
    finished: bool
    errors: list[str]
    answer_a: Optional[str]
    answer_b: Optional[str]
    checks_failed_a: list[str]
    checks_failed_b: list[str]
    faithfulness_a: Num = None
    faithfulness_b: Num = None
    coverage_a: Num = None
    coverage_b: Num = None
    quality_a: Num = None
    quality_b: Num = None
    relevance_a: Num = None
    relevance_b: Num = None
    conformance_a: Num = None
    conformance_b: Num = None
    abstained_a: Optional[bool] = None
    abstained_b: Optional[bool] = None
    pairwise_ab: Optional[str] = None
    pairwise_ba: Optional[str] = None
    pairwise: Optional[str] = Field(None, description="A, B, tie or inconsistent: both orders "
                                                      "taken together")
    flipped: bool


class GateRule(_Part):
    name: str
    value: Num
    threshold: float
    op: Optional[Literal[">=", "<"]] = None
    status: Literal["pass", "fail", "not_applicable"]
    note: Optional[str] = None


class Gate(_Part):
    decision: Literal["PASS", "FAIL", "INCOMPLETE"]
    exit_code: Literal[0, 1, 3]
    rules: list[GateRule]
    incidents_b: int
    reasons: list[str]


# --------------------------------------------------------------------------- the report

class _Whole(_Part):
    """A whole report: it keeps the JSON shape it was validated from (json_shape)."""

    _shape: Optional[dict] = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_shape(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        whole = handler(data)
        if isinstance(data, dict) and isinstance(whole, _Whole):
            whole._shape = data  # a report file shown again is the file, key order and all
        return whole


class LargestGroup(_Part):
    group: str
    n: int


class Groups(_Part):
    """Which cases are one group (repeats, `group`, `group_by`): the unit of inference."""

    n_cases: int
    n_groups: int
    n_repeats: Optional[int]
    n_singletons: int
    largest: Optional[LargestGroup]
    group_by: Optional[str]
    text: str


class SequentialLook(_Part):
    """One look of a sequential run: each claim metric's anytime-valid sequence, and each
    condition's state (holds, fails, open)."""

    look: int
    units: int
    cases: int
    stop: Optional[str]
    licensable: bool
    conditions: dict[str, str]
    why: dict[str, str]
    sequences: dict[str, dict[str, Any]] = Field(description="per metric: n units, cases, "
                                                 "mean, sd, ci_low/ci_high (two-sided), "
                                                 "lower/upper (one-sided), always-valid p, "
                                                 "n_star (the units its bets are tuned to)")


class Sequential(_Part):
    """A sequential run (docs/CLAIM_STATISTICS.md §11): why it stopped, what it used, its looks."""

    seed: int
    look_units: int
    futility: float
    max_cases: Optional[int]
    margins: dict[str, float] = Field(default_factory=dict, description="the margins the "
                                      "non-inferiority conditions were decided at")
    stop: Optional[Literal["decision", "futility", "undecidable", "exhausted", "max_cases"]]
    stop_text: Optional[str]
    looks_done: int
    units_total: int
    units_used: int
    cases_total: int
    cases_used: int
    cases_not_needed: Optional[int] = Field(description="cases it never took; None until it "
                                                        "stops")
    calls_saved: Optional[int] = Field(description="calls per case × cases not needed")
    cost_saved_usd: Num = Field(description="cost per case × cases not needed")
    looks: list[SequentialLook]
    note: str


class Progress(_Part):
    """Where the run is: its state (the one every surface shows) and what exists so far, as
    counts; never an estimate."""

    state: Literal["running", "interrupted", "stopped", "incomplete", "complete"]
    n_cases: int = Field(description="the fixture's cases")
    finished: int
    started: int
    errored: int
    not_started: int = Field(description="cases the run does (a sequential run: taken so far) "
                                         "with no answer yet")
    n_used: Optional[int] = Field(None, description="a sequential run's cases taken so far; "
                                                    "None for any other run")
    not_needed: Optional[int] = Field(None, description="a stopped sequential run's cases it "
                                                        "never took (n_cases − n_used); None "
                                                        "before it stops and for other runs")
    stop: Optional[str] = Field(None, description="why a sequential run stopped")
    counts: str = Field(description="the counts as every surface prints them, e.g. '16 of 30 "
                                    "cases finished' or '60 of 120 used, 60 not needed "
                                    "(futility)'")
    line: str
    judged: dict[str, int] = Field(description="per judge, cases it judged without error "
                                               "(both sides where it has two)")


class Report(_Whole):
    """`abtest report RUN --format json`, key for key and in this order."""

    schema_version: int
    run_id: str
    kind: str
    status: Literal["running", "interrupted", "stopped", "incomplete", "complete"]
    generated_at: str
    created_at: Optional[str]
    n_cases: int = Field(description="the fixture's cases (a sequential run's too, taken or not)")
    n_finished: int
    n_used: Optional[int] = Field(None, description="a sequential run's cases taken so far")
    n_not_needed: Optional[int] = Field(None, description="a stopped sequential run's cases it "
                                                          "never took")
    unfinished_cases: list[str]
    unfinished_reasons: dict[str, list[str]]
    progress: Optional[Progress] = Field(None, description="the run's state and what exists so "
                                                           "far (absent in older reports)")
    fixture: FixtureInfo
    variants: Variants
    groups: Optional[Groups] = Field(None, description="the run's cases in groups; None when "
                                                       "its fixture is not readable")
    models: Models
    git_commit: Optional[str]
    comparison_kind: Optional[Literal["prompt", "pipeline_change", "model"]]
    pipeline_reasons: list[str]
    self_judge: bool
    self_judge_model: Optional[str] = None
    demo_judge: Optional[str] = Field(None, description="present when the embedded model judged "
                                      "only because the config names no judge: its verdicts "
                                      "are for demonstration only")
    judges: list[str]
    judge_validation: JudgeValidation
    metrics: Metrics
    sequential: Optional[Sequential] = Field(None, description="present for a sequential run")
    stat_warnings: list[str] = Field(default_factory=list, description="what the statistics "
                                     "libraries warned while computing the metrics (a report "
                                     "note, never stderr)")
    holm: Holm
    incidents: list[Incident]
    calls: Calls
    budget: Optional[BudgetInfo] = Field(None, description="present when the run had a budget")
    estimates_withheld: Optional[str] = Field(None, description="present on an incomplete "
                                                                "run only")
    resume: Optional[str] = Field(None, description="the command that continues an unfinished "
                                  "run (interrupted, stopped or incomplete; never a running "
                                  "one: that would start a second writer)")
    judge_noise: Optional[JudgeNoise] = None
    ppi: Optional[PPI] = Field(None, description="present once a human label is imported")
    golden: Optional[Golden] = None
    prompt_diff: Optional[PromptDiff] = None
    claim: Claim
    taxonomy: dict[str, list[str]]
    remediation: list[RemediationItem]
    per_case: list[CaseRow]
    flipped: list[str]
    gate: Gate

    # the store this report was built from (`abtest.report`, `RunHandle.report()`): where
    # the frames read their rows; a report read from a file names its store in the call
    _store_path: Optional[str] = PrivateAttr(default=None)

    def cases_frame(self, *, store: str | os.PathLike | None = None) -> pandas.DataFrame:
        """One row per case (ids, question, both answers, every judge's verdict and score,
        incidents, finished), from the store by DuckDB. Needs pandas (`abtest[pandas]`)."""

        return self._frame(cases_frame, store)

    def metrics_frame(self, *, store: str | os.PathLike | None = None) -> pandas.DataFrame:
        """One row per metric: A, B, difference, CI, p, Holm p, N, groups."""

        return self._frame(metrics_frame, store)

    def incidents_frame(self, *, store: str | os.PathLike | None = None) -> pandas.DataFrame:
        """One row per hallucination incident: case, variant, faithfulness, answer, the
        statements the context does not support."""

        return self._frame(incidents_frame, store)

    def _frame(self, build: Callable[..., pandas.DataFrame],
               store: str | os.PathLike | None) -> pandas.DataFrame:

        need_pandas(f"Report.{build.__name__}()")
        path = store if store is not None else self._store_path
        if path is None:
            raise UserError("this report was read from a file: name its store "
                            "(store='results/abtest.duckdb')", field="store")
        st = Store(path, read_only=True, create=False)
        try:
            return build(st, json_shape(self))
        finally:
            st.close()

    def to_markdown(self) -> str:
        """The report as `abtest report RUN` prints it (Markdown)."""
        return _render(self, "md")

    def to_html(self) -> str:
        """The report as `abtest report RUN --format html` writes it (one self-contained page)."""
        return _render(self, "html")

    def to_json(self) -> str:
        """The report as `abtest report RUN --format json` prints it (docs/report.schema.json)."""
        return _render(self, "json")

    # a notebook shows a glance (under 2 KB), not the tens of kilobytes of every field
    def __repr__(self) -> str:

        return short_repr(json_shape(self))

    def _repr_markdown_(self) -> str:

        return glance_markdown(json_shape(self))

    def _repr_html_(self) -> str:

        return glance_html(json_shape(self))


# The renderers read reports through this module (json_shape), so it cannot import them (an
# import circle): the package that owns them, abtest/reporting/__init__.py, which Python
# always runs before it hands this module out, gives its one `render` here.
_RENDERER: list[Callable[[Report, str], str]] = []


def set_renderer(render: Callable[[Report, str], str]) -> None:
    """The renderer `Report.to_markdown()`, `.to_html()` and `.to_json()` use: the CLI's."""
    _RENDERER[:] = [render]


def _render(report: Report, fmt: str) -> str:
    return _RENDERER[0](report, fmt)


# --------------------------------------------------------------------------- the live report

class LiveGolden(_Part):
    name: str
    path: Optional[str]
    sha256: str


class LiveVariant(VariantInfo):
    target: Optional[str]


class LiveVariants(_Part):
    a: LiveVariant
    b: LiveVariant


class LiveTargets(_Part):
    a: Optional[str]
    b: Optional[str]


class RetrievalMetric(ScoreMetric):
    """Context precision or recall of one variant's retrieval against the golden ids."""

    n_excluded_no_relevant_ids: int
    excluded_no_relevant_ids: list[str]
    definition: str


class Retrieval(_Part):
    context_precision: RetrievalMetric
    context_recall: RetrievalMetric
    same_retrieval_share: Num
    note_same_retrieval: str


class Latency(_Part):
    p50_ms_a: Num
    p95_ms_a: Num
    mean_ms_a: Num
    n_a: int
    p50_ms_b: Num
    p95_ms_b: Num
    mean_ms_b: Num
    n_b: int
    latency_kind: list[str]
    method: str


class LivePairwise(PairwiseMetric):
    judge_context: Optional[str] = None


class LiveMetrics(Metrics):
    """Empty on an incomplete run, as the frozen report's."""

    pairwise: Optional[LivePairwise] = None
    retrieval: Optional[Retrieval] = None
    latency: Optional[Latency] = None


class LiveHolm(_Part):
    """Holm's family is absent on an incomplete live run."""

    family: Optional[list[str]] = None
    alpha: float
    rule: Optional[str] = None
    fixed_from: Optional[str] = None
    without_data: Optional[list[str]] = None
    note: Optional[str] = None


class LiveClaim(Claim):
    """The live claim, or the frozen run's beside it: `statement` reads either way."""

    statement: str
    run_id: Optional[str] = None


class LiveClaims(_Part):
    frozen: Optional[LiveClaim]
    live: LiveClaim


class LiveIncident(Incident):
    question: Optional[str]


class LiveCaseRow(_Part):
    case_id: str
    question: Optional[str]
    answerable: Optional[bool]
    category: Optional[str]
    finished: bool
    errors: list[str]
    relevant_chunk_ids: list[str]
    answer_a: Optional[str] = None
    retrieved_a: list[str] = []
    scores_a: list[Any] = []
    latency_ms_a: Num = None
    version_a: Optional[str] = None
    context_precision_a: Num = None
    context_recall_a: Num = None
    faithfulness_a: Num = None
    coverage_a: Num = None
    quality_a: Num = None
    relevance_a: Num = None
    abstained_a: Optional[bool] = None
    checks_failed_a: Optional[list[str]] = None
    answer_b: Optional[str] = None
    retrieved_b: list[str] = []
    scores_b: list[Any] = []
    latency_ms_b: Num = None
    version_b: Optional[str] = None
    context_precision_b: Num = None
    context_recall_b: Num = None
    faithfulness_b: Num = None
    coverage_b: Num = None
    quality_b: Num = None
    relevance_b: Num = None
    abstained_b: Optional[bool] = None
    checks_failed_b: Optional[list[str]] = None
    pairwise: Optional[str] = None


class FrozenComparisonCases(_Part):
    n: int
    frozen_only: int
    live_only: int
    note: str


class FrozenComparisonRow(_Part):
    metric: str
    n: int
    frozen_a: Num
    frozen_b: Num
    frozen_difference: Num
    live_a: Num
    live_b: Num
    live_difference: Num
    ratio: Num
    survival: str
    measure: Optional[str]


class LiveReport(_Whole):
    """`abtest report LIVE_RUN --format json`: the frozen report's top-level keys, the live
    run's own (golden questions, targets, versions, retrieval and latency) and both claims."""

    schema_version: int
    run_id: str
    kind: Literal["live"]
    status: Literal["running", "interrupted", "stopped", "incomplete", "complete"]
    generated_at: str
    created_at: Optional[str]
    n_cases: int
    n_finished: int
    unfinished_cases: list[str]
    unfinished_reasons: dict[str, list[str]]
    incomplete_reason: Optional[str]
    golden: LiveGolden
    fixture: FixtureInfo
    retriever: Optional[str]
    corpus_version: Optional[str]
    targets: LiveTargets
    variants: LiveVariants
    versions: dict[str, list[str]]
    models: Models
    comparison_kind: Literal["live"]
    git_commit: Optional[str]
    judges: list[str]
    judge_validation: JudgeValidation
    metrics: LiveMetrics
    holm: LiveHolm
    incidents: list[LiveIncident]
    calls: Calls
    estimates_withheld: Optional[str] = None
    frozen_comparison: Optional[list[FrozenComparisonRow]] = None
    frozen_comparison_note: Optional[str] = None
    claim: LiveClaim
    claims: LiveClaims
    frozen_run_id: Optional[str] = None
    per_case: list[LiveCaseRow]
    frozen_comparison_cases: Optional[FrozenComparisonCases] = None
    gate: Gate


def undeclared(node: Any, path: str = "") -> list[str]:
    """Every key below `node` that no model declares, as dotted paths."""
    out: list[str] = []
    if isinstance(node, BaseModel):
        out += [f"{path}.{k}".lstrip(".") for k in (node.model_extra or {})]
        for name, v in node.__dict__.items():  # declared fields only; leaves are skipped
            if isinstance(v, _BRANCHES):
                out += undeclared(v, f"{path}.{name}")
    elif isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, _BRANCHES):
                out += undeclared(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if isinstance(v, _BRANCHES):
                out += undeclared(v, f"{path}[{i}]")
    return out


_BRANCHES = (BaseModel, dict, list)


def validate_report(report: dict) -> Report:
    """The report as built, checked against the contract: a type mismatch or a key the models
    do not declare is the builder's bug, raised here before the report is shown."""
    return _checked(Report, report)


def validate_live_report(report: dict) -> LiveReport:
    """The live report as built, checked the same way."""
    return _checked(LiveReport, report)


# set (tests/conftest.py sets it) to prove, on every report built, what _checked relies on
CHECK_SHAPE = "ABTEST_CHECK_REPORT_SHAPE"


def _checked(cls: type[_M], built: dict) -> _M:
    context: dict = {}
    model = cls.model_validate(built, context=context)
    if context.get("undeclared"):
        extra = undeclared(model)
        raise ValueError(f"report keys not in abtest.reporting.model: {', '.join(extra[:10])}")
    # Renderers read the dict that was built (the model keeps it: _Whole), not a dump of the
    # model, which would cost ~0.5 s per rendering at 10,000 cases. The two are the same
    # document because the builder writes each value in its contract type (a float where a
    # float is due: strict validation would turn an int into one) and declares every key
    # (just checked); every report the test suite builds proves it (CHECK_SHAPE). Only the
    # order of keys may differ (a dump follows the models, the JSON the builder).
    if os.environ.get(CHECK_SHAPE):
        where = shape_difference(built, model.as_dict(), ordered=False)
        if where:
            raise AssertionError(f"the built report differs from its model's dump at {where}")
    return model


def shape_difference(a: Any, b: Any, path: str = "", ordered: bool = True) -> str | None:
    """Where two JSON shapes first differ, in value, type (1 is not 1.0 in a report file) or
    key order (unless not `ordered`); None when they are the same document."""
    if type(a) is not type(b):
        return f"{path or '.'} ({type(a).__name__} vs {type(b).__name__})"
    if isinstance(a, dict):
        if (list(a) != list(b)) if ordered else (a.keys() != b.keys()):
            return f"{path or '.'} (keys {list(a)} vs {list(b)})"
        for k in a:
            where = shape_difference(a[k], b[k], f"{path}.{k}", ordered)
            if where:
                return where
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path or '.'} (length {len(a)} vs {len(b)})"
        for i, (x, y) in enumerate(zip(a, b)):
            where = shape_difference(x, y, f"{path}[{i}]", ordered)
            if where:
                return where
        return None
    same = a == b or (isinstance(a, float) and a != a and b != b)  # NaN is itself here
    return None if same else f"{path or '.'} ({a!r} vs {b!r})"


def json_shape(report: Report | LiveReport | dict) -> dict:
    """What a renderer reads: a built report's JSON shape, or a report file's JSON as loaded
    (renderers show whatever a file holds, even keys and values this version would refuse).
    A model's shape is taken once and shared by every rendering: read it, never change it
    (`as_dict()` gives a copy to change)."""
    if isinstance(report, _Whole):
        if report._shape is None:
            report._shape = report.as_dict()
        return report._shape
    return report.as_dict() if isinstance(report, _Part) else report


def report_schema() -> dict:
    return Report.model_json_schema()
