"""Data shapes shared by every stage. Unknown keys are rejected so typos surface."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
import yaml
from pydantic import ValidationError
from abtest.core.groups import parse_group_by
from abtest.errors import pydantic_error_line

CATEGORIES = ("factual", "multi_chunk", "out_of_scope", "edge", "temporal")
AWKWARD_TAGS = ("no_relevant_chunk", "superseded", "contradictory")
FIXTURE_SCHEMA_VERSION = 2  # 2: manifest_sha256 seals the manifest's own fields


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Chunk(Strict):
    id: str = Field(min_length=1)
    text: str = Field(min_length=1, description="verbatim chunk text; data, never instructions")
    meta: dict[str, Any] | None = Field(default=None, description=(
        "what the source said about the chunk besides id, text and score (its `metadata`, "
        "`title`, other fields), verbatim; sealed, shown to a model only by a context "
        "template that names it"))
    title: str | None = Field(default=None, description="older fixtures; imports write meta")
    metadata: dict[str, Any] | None = Field(default=None, description="older fixtures; "
                                            "imports write meta")

    @field_validator("id")
    @classmethod
    def _id_clean(cls, v: str) -> str:
        if v != v.strip():
            raise ValueError("chunk id has leading/trailing whitespace")
        return v


def _group_text(v: str | None) -> str | None:
    if v is not None and not v.strip():
        raise ValueError("group is empty (leave it out for a case of its own)")
    return v


def _question_text(v: str) -> str:
    if not v.strip():
        raise ValueError("question is empty")
    return v


# a case and a question for capture hold their question and group under one rule
QuestionText = Annotated[str, Field(min_length=1), AfterValidator(_question_text)]
GroupName = Annotated[str | None, AfterValidator(_group_text)]


class Case(Strict):
    """One frozen question with the exact context retrieval returned for it."""

    id: str = Field(min_length=1)
    question: QuestionText
    context: list[Chunk]
    corpus_version: str = Field(min_length=1)
    retriever: str = Field(min_length=1)
    answerable: bool
    category: Literal["factual", "multi_chunk", "out_of_scope", "edge", "temporal"] | None = None
    reference_answer: str | None = None
    key_points: list[str] | None = None
    expected_citations: list[str] | None = None
    relevant_chunk_ids: list[str] | None = None
    must_not_say: list[str] | None = None
    tags: list[str] | None = None
    keywords: list[str] | None = None
    search_terms: str | None = None
    retrieval_scores: list[float] | None = None
    draft: bool | None = None
    group: GroupName = Field(default=None, description=(
        "cases that are not independent draws share a group (one source document, one "
        "session); abtest.core.groups decides groups from it (docs/DESIGN.md)"))
    meta: dict[str, Any] | None = Field(default=None, description="provenance, free-form")

    @model_validator(mode="after")
    def _unique_chunks(self) -> "Case":
        ids = [c.id for c in self.context]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"duplicate chunk id {dup!r} in context")
        if self.retrieval_scores is not None and len(self.retrieval_scores) != len(self.context):
            raise ValueError("retrieval_scores must have one score per context chunk")
        return self


class Question(BaseModel):
    """A question for `abtest capture`; known golden fields are copied onto the case."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    question: QuestionText
    answerable: bool = True
    category: Literal["factual", "multi_chunk", "out_of_scope", "edge", "temporal"] | None = None
    reference_answer: str | None = None
    key_points: list[str] | None = None
    relevant_chunk_ids: list[str] | None = None
    expected_citations: list[str] | None = None
    must_not_say: list[str] | None = None
    tags: list[str] | None = None
    draft: bool | None = None
    group: GroupName = None
    meta: dict[str, Any] | None = Field(default=None, description=(
        "the source's own labels under names abtest uses otherwise (a foreign `category`), "
        "kept on the case's meta"))

    def golden_fields(self) -> dict[str, Any]:
        keep = ("category", "reference_answer", "key_points", "relevant_chunk_ids",
                "expected_citations", "must_not_say", "tags", "draft", "group", "meta")
        return {k: getattr(self, k) for k in keep if getattr(self, k) is not None}


class CaseHash(Strict):
    id: str
    sha256: str


class FixtureManifest(Strict):
    schema_version: int = FIXTURE_SCHEMA_VERSION
    name: str
    corpus_version: str
    retriever: str
    captured_at: str = Field(description="UTC ISO-8601")
    refresh_every_days: int = 30
    n_cases: int
    cases_sha256: str
    cases: list[CaseHash]
    notes: dict[str, Any] | None = None
    manifest_sha256: str | None = Field(
        default=None, description="sha256 of the canonical JSON of every other field but `cases` "
                          "(each case has its own seal, and cases_sha256 covers them all)")

    def captured(self) -> datetime:
        return datetime.fromisoformat(self.captured_at.replace("Z", "+00:00"))

    def due(self) -> datetime:
        """When the fixture is due for re-capture (what makes it stale after)."""
        return self.captured() + timedelta(days=self.refresh_every_days)

    def stale_at(self, when: datetime) -> bool:
        """Whether the fixture is past its refresh date at `when`: the one staleness rule
        (fixture status, the warning before a run, the report's `stale_at_run`)."""
        return when > self.due()


class OutputSpec(Strict):
    format: Literal["text", "json"] = "text"
    required_keys: list[str] = []
    json_schema: dict[str, Any] | None = None


class ChecksSpec(Strict):
    citation_pattern: str = r"\[([^\[\]]+)\]"
    require_citations: bool = False
    must_not_say: list[str] = []
    length: tuple[int, int] | None = None
    length_words: tuple[int, int] | None = None



def block_yaml(data: Any, *, width: int) -> str:
    """YAML as one writes it by hand: keys in the given order, unicode as it is, and text of
    several lines as a block (YAML quotes it instead where a block cannot hold it exactly)."""

    class BlockDumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                       style="|" if "\n" in value else None)

    BlockDumper.add_representer(str, text)
    return yaml.dump(data, Dumper=BlockDumper, sort_keys=False, allow_unicode=True, width=width)

class Variant(Strict):
    """A prompt variant: what a variant YAML file holds (docs/DESIGN.md), or the same built
    in memory, `Variant(name=…, system=…, user=…)`, which fails as a file would (one line
    naming the field) and is checked as one before a run uses it (`load_variant`)."""

    def __init__(self, **data: Any) -> None:

        try:
            super().__init__(**data)
        except ValidationError as exc:

            raise pydantic_error_line(exc, file=f"Variant({data.get('name')!r})") from None

    # validation from a file (`model_validate`) keeps pydantic's error for its caller to name
    # the file: pydantic runs a custom __init__ there too unless told it is the base one
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def to_yaml(self) -> str:
        """The variant as a YAML file holds it (the keys that differ from the defaults, in
        the model's order): what its sha256 is taken over."""
        return block_yaml(self.model_dump(mode="json", exclude_defaults=True), width=100)

    name: str = Field(min_length=1)
    system: str = ""
    user: str = Field(min_length=1)
    output: OutputSpec = OutputSpec()
    checks: ChecksSpec = ChecksSpec()
    model: str | None = None
    context_template: str | None = Field(
        default=None, description="overriding the config's template makes the run a pipeline change")
    style: bool = Field(default=False, description="comparison is stylistic: run the conformance judge")
    rubric: str | None = None
    description: str | None = None
    context: Literal["none"] | None = Field(
        default=None, description="`none`: this prompt shows no retrieved context on purpose; "
                                  "otherwise it must use {{ context }} or {{ chunks }}")


class Price(Strict):
    """USD per million tokens: what `--max-cost` counts for a model litellm has no price for
    (a local server, a private deployment), or to override litellm's table."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class ModelSpec(Strict):
    model: str = "local/smollm2"
    temperature: float = 0.0
    max_tokens: int = 400
    api_base: str | None = None
    api_key_env: str | None = None
    seed: int | None = 0
    extra: dict[str, Any] = {}
    price: Price | None = None
    concurrency: int | None = Field(default=None, ge=1, le=1024, description=(
        "requests in flight to this model at most (default: the run's concurrency)"))
    rpm: float | None = Field(default=None, gt=0, description=(
        "the provider's requests per minute for this model: calls are paced under it"))
    tpm: float | None = Field(default=None, gt=0, description=(
        "the provider's tokens per minute (prompt + completion): calls are paced under it"))


class Gates(Strict):
    faithfulness: float = 0.90
    checks: float = Field(default=1.0, ge=0, le=1, description=(
        "each deterministic check variant B defines (json, citations, must_not_say, length) "
        "must pass on at least this share of B's answers it applies to"))
    answer_relevance: float = 0.80
    context_precision: float = 0.75
    context_recall: float = 0.75
    out_of_scope: float = 1.0
    citation_accuracy: float = 0.90
    p95_latency_ms: float = 5000.0
    incident_faithfulness: float = 0.85


class ReviewConfig(Strict):
    """A judge is validated when at least min_labels human labels of its own items agree with
    it so well that the lower (1 - alpha) confidence limit of Cohen's kappa is >= min_kappa."""

    min_labels: int = Field(default=30, ge=2)
    min_kappa: float = Field(default=0.6, gt=-1, le=1)


class Margins(Strict):
    """Non-inferiority margins, fixed before the run (docs/CLAIM_STATISTICS.md justifies them)."""

    coverage: float = Field(default=0.05, ge=0, lt=1, description=(
        "key-point coverage of B may be at most this much lower than A's (0-1 scale)"))
    abstention_answerable: float = Field(default=0.05, ge=0, lt=1, description=(
        "B may refuse answerable questions at most this much more often than A"))
    abstention_unanswerable: float = Field(default=0.10, ge=0, lt=1, description=(
        "B may abstain correctly on unanswerable questions at most this much less often than A"))


JUDGE_NAMES = ("pairwise", "faithfulness", "coverage", "abstention", "quality", "keywords",
               "conformance", "relevance")


class RetrieverConfig(Strict):
    """`abtest capture`'s retriever, so a scheduled capture needs no long command line; the
    command's options win over these. HTTP options apply to an http(s) spec only."""

    spec: str | None = Field(default=None, min_length=1,
                             description="local:INDEX | http(s)://URL | python:pkg.mod:fn | jsonl:FILE")
    k: int | None = Field(default=None, ge=1, le=1000)
    max_chars: int | None = Field(default=None, ge=1)
    chunks_path: str | None = None
    id_field: str | None = None
    text_field: str | None = None
    score_field: str | None = None
    metadata_field: str | None = None
    body_template: dict | list | str | None = None
    headers: dict[str, str] | None = Field(default=None, description=(
        "values may name environment variables: {Authorization: 'Bearer $RAG_TOKEN'}"))
    auth_env: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    retries: int | None = Field(default=None, ge=0, le=20)

    def options(self) -> dict:
        """The retriever's keyword options that are set (names as get_retriever takes them)."""
        out = {k: v for k, v in self.model_dump(exclude={"spec", "k", "timeout_s"}).items()
               if v is not None}
        if self.timeout_s is not None:
            out["timeout"] = self.timeout_s
        return out


class SequentialConfig(Strict):
    """A sequential run (abtest.stats.looks): units taken in a seeded order, a look after
    every `look` units, a stop as soon as the claim is decided or shown futile."""

    enabled: bool = Field(default=False, description="run --sequential sets it")
    look: int = Field(default=20, ge=5, le=10_000, description="units (groups) per look")
    futility: float = Field(default=0.05, gt=0, lt=1, description=(
        "stop when faithfulness B − A is shown to lie within ±this"))
    seed: int = Field(default=0, description="the order the units are taken in")
    max_cases: int | None = Field(default=None, ge=1, description=(
        "take no more cases than this (whole units): a cap on cost"))


class Config(Strict):
    """abtest.yaml's keys (docs/DESIGN.md). Built in memory, `Config(judge={…})` fails as the
    file would: one line naming the field."""

    def __init__(self, **data: Any) -> None:

        try:
            super().__init__(**data)
        except ValidationError as exc:

            raise pydantic_error_line(exc, file="Config(...)") from None

    # validation from a file (`model_validate`) keeps pydantic's error for its caller to name
    # the file: pydantic runs a custom __init__ there too unless told it is the base one
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    generator: ModelSpec = ModelSpec()
    judge: ModelSpec = ModelSpec(max_tokens=512)

    @field_validator("generator", "judge", mode="before")
    @classmethod
    def _embedded(cls, v: Any, info: Any) -> Any:
        # `judge: embedded` (or generator): the embedded model, named on purpose
        if v == "embedded":
            return ModelSpec(max_tokens=512) if info.field_name == "judge" else ModelSpec()
        return v

    def judge_is_fallback(self) -> bool:
        """The judge is the embedded model only because the config names none: its verdicts
        demonstrate the machinery and nobody should act on them (`judge: embedded` says it is
        deliberate)."""
        return (bool(self.judges) and "judge" not in self.model_fields_set
                and self.judge.model == ModelSpec().model)
    concurrency: int = Field(default=8, ge=1, le=256, description=(
        "requests in flight per model, for a model that sets no concurrency of its own"))
    timeout_s: float = Field(default=120, gt=0)
    max_retries: int = Field(default=6, ge=0, le=50)
    retry_backoff_s: float = Field(default=0.5, ge=0)
    max_input_tokens: int = Field(default=8192, gt=0)
    context_template: str = "[{{ chunk.id }}] {{ chunk.text }}"
    context_separator: str = "\n\n"
    store: str = "results/abtest.duckdb"
    gates: Gates = Gates()
    judges: list[str] = ["pairwise", "faithfulness", "coverage", "abstention"]
    allow_self_judge: bool = False
    margins: Margins = Margins()
    noninferiority_margin: float | None = Field(default=None, ge=0, lt=1, description=(
        "deprecated: one margin for coverage and answerable refusals; use margins"))
    alpha: float = Field(default=0.05, gt=0, lt=0.5)
    review: ReviewConfig = ReviewConfig()
    seed: int = 0
    embedding: ModelSpec | None = Field(default=None, description="local retriever: vector search + RRF")
    reranker: ModelSpec | None = Field(default=None, description="local retriever: optional rerank")
    retriever: RetrieverConfig = RetrieverConfig()
    max_claims: int = Field(default=8, ge=1, le=30, description="claims extracted per answer")
    judge_repeats: int = Field(default=0, ge=0, le=10, description="re-ask a sample K times")
    judge_repeat_cases: int = Field(default=10, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0, description=(
        "hard budget per run: stop before the call that could cross it (--max-cost wins)"))
    batch_poll_s: float = Field(default=30.0, gt=0, le=3600, description=(
        "run --batch: seconds between looks at the provider's batches"))
    group_by: str | None = Field(default=None, description=(
        "what makes cases one group besides repeats: a case field, meta.KEY or document "
        "(the chunk ids' source document); default the cases' own `group` (abtest.core.groups)"))
    sequential: SequentialConfig = SequentialConfig()

    @model_validator(mode="after")
    def _limits_on_chat_models(self) -> "Config":
        for name in ("embedding", "reranker"):
            spec = getattr(self, name)
            if spec is not None and (spec.concurrency or spec.rpm or spec.tpm):
                raise ValueError(f"{name}: concurrency, rpm and tpm pace the generator's and the "
                                 "judge's calls only; remove them here")
        return self

    @model_validator(mode="after")
    def _legacy_margin(self) -> "Config":
        if self.noninferiority_margin is not None and "margins" not in self.model_fields_set:
            m = self.noninferiority_margin
            self.margins = Margins(coverage=m, abstention_answerable=m)
        return self

    @field_validator("group_by")
    @classmethod
    def _groupable(cls, v: str | None) -> str | None:

        parse_group_by(v)   # a ValueError saying what can be grouped by
        return v

    @field_validator("judges")
    @classmethod
    def _known_judges(cls, v: list[str]) -> list[str]:
        for j in v:
            if j not in JUDGE_NAMES:
                raise ValueError(f"unknown judge {j!r}; choose from {', '.join(JUDGE_NAMES)}")
        return v
