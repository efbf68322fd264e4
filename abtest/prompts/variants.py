"""Prompt variants: load, validate, render, snapshot.

The context block is rendered once per case by abtest (never by a variant), so A
and B receive byte-identical context; its sha256 is stored with every generation.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from abtest.errors import UserError, pydantic_error_line
from abtest.core.models import Case, Variant
import jinja2
from jinja2 import meta
from pydantic import ValidationError
from abtest.core.config import read_yaml
from abtest.prompts.checks import validate_patterns

TEMPLATE_VARS = {"question", "context", "chunks", "case"}
CONTEXT_VARS = {"chunk", "index", "case"}


@dataclass(frozen=True)
class LoadedVariant:
    variant: Variant
    path: Path
    sha256: str  # of the file bytes: the prompt version

    @property
    def name(self) -> str:
        return self.variant.name


@lru_cache(maxsize=None)
def jinja_env():

    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


@lru_cache(maxsize=256)
def _template(src: str):
    """Compiled once per source: compiling costs ~100x rendering, and a run renders each
    template once per case (templates are immutable, so sharing them across threads is safe)."""
    return jinja_env().from_string(src)


def _check_template(src: str, allowed: set[str], *, file: str, field: str) -> set[str]:

    env = jinja_env()
    try:
        ast = env.parse(src)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"template syntax error: {exc.message}", file=file,
                        where=f"template line {exc.lineno}", field=field) from None
    used = meta.find_undeclared_variables(ast)
    unknown = used - allowed
    if unknown:
        raise UserError(f"unknown template variable(s) {', '.join(sorted(unknown))}; available: "
                        f"{', '.join(sorted(allowed))}", file=file, field=field)
    return used


def check_context_template(src: str, *, file: str = "abtest.yaml",
                           field: str = "context_template") -> None:
    _check_template(src, CONTEXT_VARS, file=file, field=field)


def load_variant(path: str | os.PathLike | Variant) -> LoadedVariant:
    """A variant file (or an in-memory `Variant`) checked as a run checks it. An in-memory
    variant's sha256 is that of its YAML (`Variant.to_yaml()`): the file that text makes has
    the same sha256, so the two are one prompt version."""


    if isinstance(path, Variant):
        label = f"Variant({path.name!r})"
        check_variant(path, file=label)
        return LoadedVariant(path, Path(label),
                             hashlib.sha256(path.to_yaml().encode("utf-8")).hexdigest())
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise UserError("expected a mapping with name, system, user", file=str(path))
    try:
        variant = Variant.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error_line(exc, file=str(path)) from None
    check_variant(variant, file=str(path))
    return LoadedVariant(variant, path, hashlib.sha256(path.read_bytes()).hexdigest())


def check_variant(variant: Variant, *, file: str) -> None:
    """What a variant must hold beyond its shape: templates that use only known values, a
    prompt that shows the retrieved context (unless `context: none`), valid check patterns.
    One check for files and in-memory variants, so both fail with the same line."""
    used = _check_template(variant.system, TEMPLATE_VARS, file=file, field="system")
    used |= _check_template(variant.user, TEMPLATE_VARS, file=file, field="user")
    if not used & {"context", "chunks"} and variant.context != "none":
        # a RAG comparison whose prompt never shows the retrieved context measures nothing
        # about grounding; say so unless the variant says it is deliberate
        raise UserError("the prompt never shows the retrieved context: use {{ context }} (or loop "
                        "over {{ chunks }}) in system or user, or set `context: none` if this "
                        "variant answers without it on purpose", file=file, field="user")
    if variant.context_template is not None:
        check_context_template(variant.context_template, file=file, field="context_template")

    try:
        validate_patterns(variant)
    except UserError as exc:
        raise UserError(exc.message, file=file, where=exc.where, field=exc.field) from None


def render_context(case: Case, template: str, separator: str = "\n\n") -> str:
    """The one context block both variants receive."""

    tpl = _template(template)
    parts = []
    for i, chunk in enumerate(case.context):
        try:
            parts.append(tpl.render(chunk=chunk, index=i + 1, case=case))
        except jinja2.UndefinedError as exc:
            raise UserError(f"context_template: {exc.message}", where=f"case {case.id}") from None
    return separator.join(parts)


def render_messages(lv: LoadedVariant, case: Case, context_block: str) -> list[dict]:

    values = {"question": case.question, "context": context_block,
              "chunks": [c.model_dump() for c in case.context], "case": case.model_dump()}
    msgs = []
    for role, src in (("system", lv.variant.system), ("user", lv.variant.user)):
        if role == "system" and not src.strip():
            continue
        try:
            text = _template(src).render(**values)
        except jinja2.UndefinedError as exc:
            raise UserError(exc.message or "undefined template value", file=str(lv.path),
                            where=f"case {case.id}", field=role) from None
        msgs.append({"role": role, "content": text})
    return msgs


def messages_sha256(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


def messages_text(messages: list[dict]) -> str:
    """Readable, byte-faithful rendering of messages for snapshots and diffs."""
    out = []
    for m in messages:
        out.append(f"===== {m['role']} =====\n{m['content']}")
        if not m["content"].endswith("\n"):
            out.append("\n")
        else:
            out.append("")
    return "\n".join(out)


def unified_diff(a_text: str, b_text: str, a_name: str, b_name: str) -> str:
    return "".join(difflib.unified_diff(a_text.splitlines(keepends=True),
                                        b_text.splitlines(keepends=True), a_name, b_name))
