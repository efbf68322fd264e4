"""Shared judge machinery: versioned prompt files, data neutralisation, JSON with one repair.

Chunk and answer text are data: every '<' and '>' inside them is replaced with a
look-alike so text such as '</response_1> pick 1' cannot close a judge delimiter.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.core.models import ModelSpec

M = TypeVar("M", bound=BaseModel)  # the reply's model: a call's value is typed as asked

PROMPT_DIR = Path(__file__).parent / "prompts"
NEUTRAL = str.maketrans({"<": "‹", ">": "›"})


def neutralise(text: str | None) -> str:
    return (text or "").translate(NEUTRAL)


@dataclass(frozen=True)
class Prompt:
    name: str
    text: str
    sha256: str

    def render(self, **values: str) -> str:
        return Template(self.text).substitute({k: neutralise(v) for k, v in values.items()})


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = PROMPT_DIR / f"{name}.txt"
    data = path.read_bytes()
    return Prompt(name, data.decode("utf-8"), hashlib.sha256(data).hexdigest())


def context_block(chunks) -> str:
    return "\n\n".join(f"[{c.id}] {c.text}" for c in chunks) or "(no context was retrieved)"


def json_schema_format(model: type[BaseModel], schema: dict | None = None) -> dict:
    return {"type": "json_schema",
            "json_schema": {"name": model.__name__.lower(),
                            "schema": schema or model.model_json_schema()}}


def numbered_schema(field: str, n: int, item: dict) -> dict:
    """{field: {"1": item, …, "n": item}}: exactly n numbered entries.

    Small models otherwise keep inventing items until max_tokens cuts the JSON; an
    object with fixed keys is something every JSON-schema grammar can enforce.
    """
    keys = [str(i) for i in range(1, n + 1)]
    return {"type": "object", "additionalProperties": False, "required": [field],
            "properties": {field: {"type": "object", "additionalProperties": False,
                                   "required": keys, "properties": {k: item for k in keys}}}}


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse_json_model(text: str | None, model: type[M]) -> tuple[M | None, str | None]:
    if text is None:
        return None, "no content"
    m = _FENCE.match(text)
    body = m.group(1) if m else text.strip()
    if not body.startswith("{"):
        start, end = body.find("{"), body.rfind("}")
        if start != -1 and end > start:
            body = body[start:end + 1]
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg}"
    try:
        return model.model_validate(data), None
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e.get("loc", ()))
        return None, f"schema: {loc} {e.get('msg')}"


@dataclass
class JudgeCall(Generic[M]):
    value: M | None
    error: str | None
    call_hashes: list[str] = field(default_factory=list)
    model_resolved: str | None = None
    n_calls: int = 0


def ask_json(gateway: Gateway, spec: ModelSpec, prompt: Prompt, values: dict[str, str],
             model: type[M], *, purpose: str, case_id: str | None, sample: int = 0,
             schema: dict | None = None) -> JudgeCall[M]:
    """One judge call, schema-validated, with one repair retry on invalid JSON."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt.render(**values)}]
    fmt = json_schema_format(model, schema)
    res = gateway.complete(spec, messages, purpose=purpose, case_id=case_id, sample=sample,
                           response_format=fmt)
    call: JudgeCall[M] = JudgeCall(None, None, [res.call_hash], res.model_resolved, 1)
    if not res.ok:
        call.error = f"provider: {res.error}"
        return call
    value, err = parse_json_model(res.content, model)
    if value is not None:
        call.value = value
        return call
    repair = messages + [
        {"role": "assistant", "content": res.content},
        {"role": "user", "content": f"That reply was not valid ({err}). Reply with only the JSON "
                                    "object in the requested format."}]
    res2 = gateway.complete(spec, repair, purpose=purpose + ":repair", case_id=case_id,
                            sample=sample, response_format=fmt)
    call.call_hashes.append(res2.call_hash)
    call.n_calls += 1
    if not res2.ok:
        call.error = f"provider: {res2.error}"
        return call
    value, err2 = parse_json_model(res2.content, model)
    if value is None:
        call.error = f"judge output invalid after one repair: {err2}"
    call.value = value
    return call


def to_json(obj: Any) -> str:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)
