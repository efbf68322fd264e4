"""Find and load abtest.yaml; relative paths in it are relative to the file."""

from __future__ import annotations

import os
from pathlib import Path

from abtest.errors import Spelled, UserError, pydantic_error_line
from abtest.core.models import Config
import yaml
from abtest.core.records import read_text
from pydantic import ValidationError

CONFIG_NAME = "abtest.yaml"


def read_yaml(path: Path) -> object:
    """Parse YAML with a one-line error that names the file and line."""


    text = read_text(path, "a YAML file")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or "YAML syntax error"
        context = getattr(exc, "context", None) or ""
        if mark is not None and "quoted scalar" in context and "end of stream" in problem:
            # the text stops inside a quoted value: a cut file, not a typo (an unclosed
            # bracket a person typed stays a syntax error)
            start = getattr(exc, "context_mark", None) or mark
            raise UserError(f"the file ends mid-record (line {start.line + 1}); was it cut "
                            "short?", file=str(path)) from None
        raise UserError(f"YAML syntax error: {problem}", file=str(path), where=where) from None


class LoadedConfig:
    """A validated Config plus where it came from (for resolving relative paths)."""

    def __init__(self, config: Config, base_dir: Path, path: Path | None):
        self.config = config
        self.base_dir = base_dir
        self.path = path

    def resolve(self, p: str | os.PathLike) -> Path:
        p = Path(p)
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def store_path(self) -> Path:
        return self.resolve(self.config.store)


def load_config(path: str | os.PathLike | None = None, *, required: bool = False) -> LoadedConfig:
    """Load --config FILE, else ./abtest.yaml, else defaults (embedded model, results/ store)."""
    if path is None:
        candidate = Path.cwd() / CONFIG_NAME
        if not candidate.exists():
            if required:
                raise UserError(f"no {CONFIG_NAME} in {Path.cwd()}; run `abtest init` or pass "
                                "{config}", opts={"config": Spelled("--config FILE", "config=PATH")})
            return LoadedConfig(Config(), Path.cwd(), None)
        path = candidate
    path = Path(path)
    data = read_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError("expected a mapping of settings at the top level", file=str(path))

    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error_line(exc, file=str(path)) from None
    return LoadedConfig(cfg, path.resolve().parent, path)


DEFAULT_CONFIG_YAML = """\
# abtest configuration. Any litellm model string works for generator and judge, e.g.
# openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, ollama_chat/llama3, or an
# OpenAI-compatible server: {model: openai/my-model, api_base: http://127.0.0.1:8080/v1, api_key_env: MY_KEY}
# API keys are read from the environment (api_key_env), never written anywhere.
generator: {model: local/smollm2, temperature: 0, max_tokens: 200}
judge:     {model: local/smollm2, temperature: 0, max_tokens: 400}
# A hosted model's rate limits, to run just under them: {…, rpm: 500, tpm: 200000}; without
# them abtest paces a model by its provider's rate-limit headers and 429s.
# concurrency: requests in flight per model (a model may set its own).
concurrency: 4
timeout_s: 120
max_retries: 6
max_input_tokens: 2048
context_template: "[{{ chunk.id }}] {{ chunk.text }}"
store: results/abtest.duckdb
judges: [pairwise, faithfulness, coverage, abstention]
# A model judging its own answers favours them, so the claim is always withheld then and
# the run says so. Set true only to quiet that notice for a demonstration on one model
# (the embedded default judges itself); point judge at another model for real use.
allow_self_judge: false
# Cases that are not independent draws (written from one document, asked in one session) are
# one group; repeats (the same question and context) always are. By default each case's own
# `group` decides; or name a case field, meta.KEY, or document (the chunk ids' source document).
# group_by: document
gates: {faithfulness: 0.90, answer_relevance: 0.80, context_precision: 0.75,
        context_recall: 0.75, out_of_scope: 1.0, citation_accuracy: 0.90,
        p95_latency_ms: 5000, incident_faithfulness: 0.85}
"""
