"""Suggest small, surgical prompt edits from a run's report; never replace a variant.

The model (the config's judge model, through the gateway, so the reply is cached)
sees the current templates of one variant and what went wrong with it in the run:
headline numbers, why the claim is not licensed, low cases, failure taxonomy,
incidents and the remediation backlog. Its reply is schema-validated JSON with the
full edited templates; the result is written as a new variant file
`<variant dir>/<name>-suggested.yaml` only when `abtest.prompts.variants.load_variant`
accepts it and it still uses every template variable the original used. The
original file is never touched.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, Field

from abtest.errors import IncompleteRunError, UserError
from abtest.core.fmt import num
from jinja2 import meta
from abtest.prompts.variants import jinja_env
from abtest.core.models import block_yaml
from abtest.prompts.variants import load_variant
from abtest.judges.common import json_schema_format, parse_json_model
from string import Template
from abtest.core.config import read_yaml
from abtest.judges.common import load_prompt, neutralise
from abtest.llm import check_credentials
from abtest.reporting import build_report
from abtest.store.runs import check_fixture_unchanged, load_run, run_config
from abtest.prompts.variants import unified_diff
from abtest.core.names import file_stem
from abtest.llm import Gateway

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.core.models import ModelSpec
    from abtest.store import Store

PROMPT_NAME = "suggest_v1"
MAX_LOW_ITEMS = 8
MAX_TEXT = 400


class Suggestion(BaseModel):
    """The model's reply: full edited templates plus what changed and why."""

    system: str = Field(json_schema_extra={"maxLength": 6000})
    user: str = Field(min_length=1, json_schema_extra={"maxLength": 6000})
    edits: list[str] = Field(default=[], json_schema_extra={"maxItems": 8})
    rationale: str = Field(default="", json_schema_extra={"maxLength": 600})


@dataclass
class SuggestResult:
    run_id: str
    side: str
    base_path: Path
    path: Path | None
    diff: str
    edits: list[str] = field(default_factory=list)
    rationale: str = ""
    warnings: list[str] = field(default_factory=list)
    similarity: float | None = None
    prompt_sha256: str = ""
    model: str = ""
    next_step: str | None = None


def _cut(text: Any, n: int = MAX_TEXT) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def low_items(report: dict, side: str, threshold: float) -> list[dict]:
    """Cases where variant `side` ('A' or 'B') did badly, worst first; faithfulness is low
    below the run's incident threshold (gates.incident_faithfulness)."""
    v, o = side.lower(), ("a" if side == "B" else "b")
    out = []
    for row in report.get("per_case") or []:
        if not row.get("finished"):
            continue
        problems = []
        if row.get("pairwise") == ("A" if side == "B" else "B"):
            problems.append(f"lost the pairwise comparison to {o.upper()} in both orders")
        f = row.get(f"faithfulness_{v}")
        if f is not None and f < threshold:
            problems.append(f"faithfulness {f:.2f} (claims not supported by the context)")
        c = row.get(f"coverage_{v}")
        if c is not None and c < 0.5:
            problems.append(f"coverage {c:.2f} (missed key points)")
        fails = row.get(f"checks_failed_{v}") or []
        if fails:
            problems.append("failed checks: " + ", ".join(fails))
        ab = row.get(f"abstained_{v}")
        if ab is True and row.get("answerable") is True:
            problems.append("refused an answerable question")
        if ab is False and row.get("answerable") is False:
            problems.append("answered a question the context cannot answer")
        if problems:
            out.append({"case_id": row["case_id"], "category": row.get("category"),
                        "answerable": row.get("answerable"), "question": row.get("question"),
                        "answer": row.get(f"answer_{v}"), "problems": problems})
    out.sort(key=lambda r: -len(r["problems"]))
    return out[:MAX_LOW_ITEMS]


def results_text(report: dict, side: str, threshold: float) -> str:
    """A compact, bounded summary of what went wrong with variant `side`."""
    m = report.get("metrics") or {}
    other = "A" if side == "B" else "B"
    names = report.get("variants") or {}
    lines = [f"Run {report.get('run_id')}: fixture {(report.get('fixture') or {}).get('name')}, "
             f"{report.get('n_cases')} cases, status {report.get('status')}.",
             f"The prompt being edited is variant {side} ({(names.get(side.lower()) or {}).get('name')}); "
             f"it was compared with variant {other} ({(names.get(other.lower()) or {}).get('name')}). "
             "Differences below are B − A."]
    pw = m.get("pairwise")
    if pw:
        lines.append(f"Pairwise (blind, both orders): B won {pw['b_wins']}, A won {pw['a_wins']}, "
                     f"no preference {pw['no_preference']}; sign test p = {num(pw.get('p_value'))}.")
    for key in ("faithfulness", "coverage", "quality", "relevance", "conformance"):
        x = m.get(key)
        if x and x.get("difference") is not None:
            lines.append(f"{key.capitalize()}: A {num(x.get('a'))}, B {num(x.get('b'))}, "
                         f"difference {num(x.get('difference'))} (Holm p {num(x.get('p_holm'))}).")
    ab = m.get("abstention") or {}
    for sub, good in (("answerable", "lower is better"), ("unanswerable", "higher is better")):
        x = ab.get(sub) or {}
        if x.get("n"):
            lines.append(f"Refusal rate on {sub} questions ({good}): A {num(x.get('a'))}, "
                         f"B {num(x.get('b'))}.")
    chk = m.get("checks") or {}
    failing = []
    for name, c in chk.items():
        rate = c.get(f"pass_rate_{side.lower()}") if isinstance(c, dict) else None
        if rate is not None and rate < 1:
            failing.append(f"{name} passed {rate:.0%}")
    if failing:
        lines.append(f"Deterministic checks of variant {side} with failures: " + ", ".join(failing) + ".")
    claim = report.get("claim") or {}
    if claim.get("reasons"):
        lines.append("Why the improvement claim is not licensed: " + "; ".join(claim["reasons"][:6]))
    if side == "B":
        tax = report.get("taxonomy") or {}
        if tax:
            lines.append("Failure taxonomy (variant B): " + "; ".join(
                f"{k.replace('_', ' ')}: {len(v)} case(s)" for k, v in tax.items()))
        backlog = report.get("remediation") or []
        if backlog:
            lines.append("Remediation backlog:")
            lines += [f"- {b['priority']} {b['item']} — cause: {b['likely_cause']} — remedy: "
                      f"{b['remedy']}" for b in backlog[:8]]
    inc = [i for i in report.get("incidents") or [] if i.get("variant") == side]
    if inc:
        lines.append(f"Hallucination incidents in variant {side}:")
        for i in inc[:5]:
            uns = "; ".join(_cut(u["claim"], 150) for u in i.get("unsupported") or [])
            lines.append(f"- case {i['case_id']}: question: {_cut(i.get('question'), 200)} | answer: "
                         f"{_cut(i.get('answer'))} | unsupported: {uns or 'n/a'}")
    low = low_items(report, side, threshold)
    if low:
        lines.append(f"Low cases for variant {side} (at most {MAX_LOW_ITEMS}):")
        for r in low:
            kind = "answerable" if r["answerable"] else "unanswerable"
            lines.append(f"- case {r['case_id']} ({r['category'] or 'uncategorised'}, {kind}): "
                         f"question: {_cut(r['question'], 200)} | answer: {_cut(r['answer'])} | "
                         f"problems: {'; '.join(r['problems'])}")
    else:
        lines.append(f"No low cases for variant {side}: prefer no edit or a very small one.")
    return "\n".join(lines)


def _template_vars(src: str) -> set[str]:


    try:
        return set(meta.find_undeclared_variables(jinja_env().parse(src)))
    except Exception:  # syntax errors are reported by load_variant
        return set()


def _dump_yaml(data: dict) -> str:

    return block_yaml(data, width=4096)


def _resolve_variant_path(lc, run: dict, side: str) -> Path:
    raw = run[f"variant_{side.lower()}_path"]
    if not raw:
        raise UserError(f"run {run['run_id']} recorded no path for variant {side}")
    p = Path(raw)
    for cand in ([p] if p.is_absolute() else [p, lc.base_dir / p]):
        if cand.is_file():
            return cand
    raise UserError(f"variant {side} file of run {run['run_id']} not found", file=raw)


def _side(run: dict, variant: str) -> str:
    v = variant.strip()
    if v.upper() in ("A", "B"):
        return v.upper()
    hits = [s for s in ("A", "B") if run[f"variant_{s.lower()}_name"] == v]
    if len(hits) == 1:
        return hits[0]
    raise UserError(f"--variant must be A, B, or a variant name of run {run['run_id']} "
                    f"({run['variant_a_name']}, {run['variant_b_name']})", field="variant")


def _candidate(base_data: dict, new_name: str, s: Suggestion, run_id: str, side: str) -> dict:
    data = dict(base_data)
    data["name"] = new_name
    system = s.system if s.system.endswith("\n") or not s.system else s.system + "\n"
    user = s.user if s.user.endswith("\n") else s.user + "\n"
    data["system"] = system
    data["user"] = user
    data["description"] = (f"suggested by `abtest suggest {run_id} --variant {side}` from "
                           f"{base_data.get('name')}; review before use")
    return data


def _check_candidate(text: str, path_dir: Path, required_vars: set[str]) -> str | None:
    """None when the candidate variant file is valid, else the problem in one line."""

    fd, tmp = tempfile.mkstemp(prefix=".suggest-", suffix=".yaml", dir=path_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        lv = load_variant(tmp)
    except UserError as exc:
        return exc.message + (f" (field {exc.field})" if exc.field else "")
    finally:
        Path(tmp).unlink(missing_ok=True)
    used = _template_vars(lv.variant.system) | _template_vars(lv.variant.user)
    dropped = required_vars - used
    if dropped:
        return (f"the edited templates no longer use {', '.join('{{ ' + d + ' }}' for d in sorted(dropped))}; "
                "keep every variable of the current templates")
    return None


def _ask(gateway: Gateway, spec: ModelSpec, messages: list[dict], *, purpose: str, run_id: str,
         max_tokens: int) -> tuple[str | None, Suggestion | None, str | None]:

    res = gateway.complete(spec, messages, purpose=purpose, case_id=run_id,
                           response_format=json_schema_format(Suggestion), max_tokens=max_tokens)
    if not res.ok:
        raise IncompleteRunError(f"suggestion model {spec.model} failed: {res.error}")
    value, err = parse_json_model(res.content, Suggestion)
    return res.content, value, err


def suggest_edits(lc, store: Store, run_id: str, *, variant: str = "B",
                  out: str | os.PathLike | None = None, force: bool = False,
                  gateway: Gateway | None = None,
                  progress: Callable[[str], None] | None = None) -> SuggestResult:
    """Ask for surgical edits to one variant of a run; write `<name>-suggested.yaml`."""


    run = load_run(store, run_id)
    side = _side(run, variant)
    base_path = _resolve_variant_path(lc, run, side)
    base = load_variant(base_path)
    if base.sha256 != run[f"variant_{side.lower()}_sha256"]:
        raise UserError(f"changed since run {run_id} (sha256 {run[f'variant_{side.lower()}_sha256'][:12]}… "
                        f"→ {base.sha256[:12]}…); the report describes the old prompt, so run again "
                        "before asking for suggestions", file=str(base_path))

    new_name = f"{base.name}-suggested"
    target = Path(out) if out else base_path.parent / f"{file_stem(new_name)}.yaml"
    if target.resolve() == base_path.resolve():
        raise UserError("refusing to overwrite the variant the suggestion is based on", file=str(target))
    if target.exists() and not force:
        raise UserError("already exists; pass {force} to replace the previous suggestion", opts={"force": True},
                        file=str(target))
    check_fixture_unchanged(run)
    report = build_report(store, run_id).as_dict()
    prompt = load_prompt(PROMPT_NAME)
    spec = lc.config.judge
    check_credentials(spec, where="judge")
    if gateway is None:

        gateway = Gateway(store, concurrency=1, timeout_s=lc.config.timeout_s,
                          max_retries=lc.config.max_retries, backoff_base_s=lc.config.retry_backoff_s)
    # The templates are the text being edited: sent as written (their <tags> must survive);
    # only the evaluation data, which holds model answers, is neutralised.
    results = results_text(report, side, run_config(run).gates.incident_faithfulness)
    content = Template(prompt.text).substitute(system=base.variant.system.rstrip("\n"),
                                               user=base.variant.user.rstrip("\n"),
                                               results=neutralise(results))
    messages = [{"role": "user", "content": content}]
    if progress:
        progress(f"asking {spec.model} for edits to variant {side} ({base.name}) of run {run_id}")
    base_data = read_yaml(base_path)
    assert isinstance(base_data, dict)  # load_variant read this file as a variant: a mapping
    required = _template_vars(base.variant.system) | _template_vars(base.variant.user)
    # room for both full templates in the reply (about 3 characters a token), never less
    # than the configured budget
    budget = max(spec.max_tokens,
                 min((len(base.variant.system) + len(base.variant.user)) // 3 + 400, 8000))
    problem = None
    text = ""
    value = None
    for attempt in range(2):  # the first reply, then one repair
        raw, value, err = _ask(gateway, spec, messages, purpose="suggest" + (":repair" if attempt else ""),
                               run_id=run_id, max_tokens=budget)
        if value is None:
            problem = f"reply was not valid ({err})"
        else:
            text = _dump_yaml(_candidate(base_data, new_name, value, run_id, side))
            problem = _check_candidate(text, target.parent if target.parent.exists() else Path.cwd(),
                                       required)
        if problem is None:
            break
        messages = messages + [
            {"role": "assistant", "content": raw or ""},
            {"role": "user", "content": f"That reply cannot be used: {problem}. Reply again with only "
                                        "the JSON object in the requested format."}]
    if problem is not None:
        raise IncompleteRunError(f"the suggestion model gave no usable variant after one repair: {problem}; "
                              "nothing was written")
    assert value is not None
    old_text = base_path.read_text(encoding="utf-8")
    diff = unified_diff(old_text, text, _shown(base_path), _shown(target))
    old_t = base.variant.system + "\n" + base.variant.user
    new_t = value.system + "\n" + value.user
    similarity = difflib.SequenceMatcher(None, old_t, new_t).ratio()
    res = SuggestResult(run_id=run_id, side=side, base_path=base_path, path=None, diff=diff,
                        edits=list(value.edits), rationale=value.rationale, similarity=similarity,
                        prompt_sha256=prompt.sha256, model=spec.model)
    if old_t.strip() == new_t.strip():
        res.warnings.append("the model suggested no change to the templates; nothing was written")
        res.diff = ""
        return res
    if similarity < 0.6:
        res.warnings.append(f"the suggestion rewrites much of the prompt (similarity {similarity:.0%}), "
                            "not a surgical edit; review it carefully")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, target)
    res.path = target
    fixture = run["fixture_path"] or "fixtures/NAME"
    try:
        fixture = os.path.relpath(fixture)
    except ValueError:  # another drive on Windows
        pass
    res.next_step = (f"review it, then measure it: abtest run --fixture {fixture} "
                     f"--a {base_path} --b {target} (nothing was replaced)")
    return res


def result_json(res: SuggestResult) -> str:
    return json.dumps({"run_id": res.run_id, "variant": res.side, "base": str(res.base_path),
                       "path": str(res.path) if res.path else None, "edits": res.edits,
                       "rationale": res.rationale, "similarity": res.similarity,
                       "warnings": res.warnings, "next_step": res.next_step, "diff": res.diff, "model": res.model,
                       "prompt_sha256": res.prompt_sha256}, indent=2)


def _shown(p: Path) -> str:
    """A path as the user would type it here: relative to the working directory when inside
    it (runs store absolute paths, so a resume works from anywhere)."""
    try:
        return str(Path(p).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)
