"""Live confirmation: how much of a frozen effect survives real retrieval, end to end.

`abtest live --golden QUESTIONS --a TARGET --b TARGET [--frozen-run RUN_ID]` asks two
running assistants (A and B: same system, different prompt) every golden question,
stores each answer with the chunks the live system actually retrieved, then scores
them with the same judges as a frozen run (the same Gateway and judge functions,
the judge model from the config), against those live contexts. Metrics only a live
run has: context precision / recall against the golden `relevant_chunk_ids`, and
latency. `abtest.report.live.build_live_report` turns the stored rows into the report.

A TARGET is either

* an HTTP endpoint `http(s)://host[:port][/base]`: by default `POST {endpoint}/chat`
  with `{"message": question, "conversationId": "eval-<index>"}`; the answer, the
  retrieved chunks (id, text, score) and the assistant version are read from JSON
  paths (`answer`, `chunks`, `version` by default). A `text/event-stream` response
  is read as server-sent events (`data: {...}` lines; text deltas at `delta`), and
  its latency is the time to the first non-empty delta; otherwise latency is the
  total time of the successful attempt. 429/5xx and connection failures are retried
  (tenacity, exponential backoff with jitter, honouring Retry-After); or
* a Python pipeline `python:package.module:function`, called as `function(question)`
  (plus `conversation_id=` / `case_id=` / `index=` when its signature takes them),
  returning `{"answer", "chunks", "version"?}`, a tuple `(answer, chunks[, version])`
  or an object with those attributes.

Every item is written as soon as it exists (table `live_items`). Calls are made one
at a time so a measured latency is not inflated by our own load; judging starts only
after the last call. An endpoint unreachable or failing past its retries stops the
run cleanly: finished items are kept (and judged), the run is marked incomplete and
`LiveIncomplete` (an `IncompleteError`, exit 3) says "incomplete — endpoint
unreachable". Nothing is estimated; unfinished questions are never scored.
"""

from __future__ import annotations

import abc

import hashlib
import http.client
import inspect
import json
import os
import random
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .errors import IncompleteError, UserError

Progress = Callable[[str], None]

DEFAULT_TEMPLATE: dict[str, Any] = {"message": "{question}", "conversationId": "{conversation_id}"}
VARIANTS = ("A", "B")
UNREACHABLE = "endpoint unreachable"      # connection, timeout, 429/5xx past the retries
BAD_ANSWER = "endpoint answered badly"    # 4xx, not JSON, no answer at the configured path


# --------------------------------------------------------------------------- targets
@dataclass
class TargetOptions:
    """How to talk to a target; shared by A and B (two deployments of one assistant)."""

    chat_path: str = "/chat"
    request_template: Any = None          # dict/list/str JSON; None -> DEFAULT_TEMPLATE
    answer_path: str = "answer"
    chunks_path: str = "chunks"
    chunk_id_field: str | None = "id"     # None: ids derived from the text
    chunk_text_field: str = "text"
    chunk_score_field: str | None = "score"
    scores_path: str | None = None        # a separate list of scores, aligned with the chunks
    version_path: str | None = "version"
    delta_path: str = "delta"             # text delta in a streamed event
    stream: bool = False                  # ask for a stream: adds "stream": true to the default body
    auth_env: str | None = None           # env var holding the key; its value is never stored
    auth_header: str = "Authorization"
    auth_scheme: str = "Bearer"
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 30.0

    def public(self) -> dict:
        """The options as recorded on the run (no secret: auth_env is a variable name)."""
        return asdict(self)


@dataclass
class LiveAnswer:
    answer: str
    chunks: list  # list[RetrievedChunk]
    latency_ms: float
    latency_kind: str  # "ttft" (streamed: time to first token) or "total"
    version: str | None = None
    attempts: int = 1


class TargetError(Exception):
    """A target call failed; `unreachable` = connection/timeout/429/5xx (retryable)."""

    def __init__(self, message: str, *, unreachable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable
        self.retry_after = retry_after
        self.attempts = 1


class LiveIncomplete(IncompleteError):
    """The live run stopped early; finished items are saved. Carries the run id."""

    def __init__(self, message: str, run_id: str, result: "LiveResult | None" = None):
        super().__init__(message)
        self.run_id = run_id
        self.result = result


def _redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def _coerce_chunks(items: Any, scores: Any, opts: TargetOptions, source: str, where: str) -> list:
    from .retrieval.base import RetrievedChunk, coerce_chunk

    if not isinstance(items, (list, tuple)):
        raise TargetError(f"{where}: no chunk list at {opts.chunks_path!r} (got "
                          f"{type(items).__name__}); set --chunks-path", unreachable=False)
    fields = {"id": opts.chunk_id_field, "text": opts.chunk_text_field,
              "score": opts.chunk_score_field, "metadata": None}
    out: list = []
    seen: dict[str, str] = {}
    for i, it in enumerate(items):
        try:
            c = coerce_chunk(it, source=source, where=f"{where}, chunk {i}", fields=fields)
        except UserError as exc:
            raise TargetError(exc.line(), unreachable=False) from None
        if scores is not None:
            if not isinstance(scores, (list, tuple)) or len(scores) != len(items):
                raise TargetError(f"{where}: scores at {opts.scores_path!r} are not a list aligned "
                                  "with the chunks", unreachable=False)
            s = scores[i]
            if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float))):
                raise TargetError(f"{where}: score {s!r} is not a number", unreachable=False)
            c = RetrievedChunk(c.id, c.text, None if s is None else float(s), c.metadata, c.title)
        if c.id in seen:
            continue  # a repeated chunk: the model saw it once; the first rank counts
        seen[c.id] = c.text
        out.append(c)
    return out


def _dig(obj: Any, path: str | None) -> Any:
    from .retrieval.base import dig

    return dig(obj, path) if path else None


class Target(abc.ABC):
    kind = "?"

    def __init__(self, spec: str, opts: TargetOptions):
        self.spec = spec
        self.opts = opts

    @property
    def shown(self) -> str:
        return self.spec

    def check(self) -> None:
        """Raise UserError for anything wrong before the first call."""

    @abc.abstractmethod
    def _once(self, index: int, qid: str, question: str, variant: str) -> LiveAnswer:
        """One request to the target (retries are the caller's)."""

    def ask(self, index: int, qid: str, question: str, variant: str) -> LiveAnswer:
        """One question, with retries on retryable failures (tenacity)."""
        from tenacity import (RetryError, Retrying, retry_if_exception, stop_after_attempt)

        attempts = 0
        rng = random.Random(f"{qid}/{variant}")

        def wait(state) -> float:
            exc = state.outcome.exception()
            delay = min(self.opts.backoff_max_s, self.opts.backoff_s * 2 ** (state.attempt_number - 1))
            delay *= 0.5 + rng.random() / 2
            ra = getattr(exc, "retry_after", None)
            if ra is not None:
                delay = max(delay, min(ra, self.opts.backoff_max_s))
            return delay

        def once() -> LiveAnswer:
            nonlocal attempts
            attempts += 1
            return self._once(index, qid, question, variant)

        retrying = Retrying(
            stop=stop_after_attempt(max(0, self.opts.retries) + 1), wait=wait,
            retry=retry_if_exception(lambda e: isinstance(e, TargetError) and e.unreachable),
            reraise=True)
        try:
            res = retrying(once)
        except TargetError as exc:
            exc.attempts = attempts
            if attempts > 1:
                exc.message = f"{exc.message} (after {attempts} attempts)"
            raise
        except RetryError as exc:  # pragma: no cover - reraise=True makes this unreachable
            raise TargetError(str(exc), unreachable=True) from None
        res.attempts = attempts
        return res


class HttpTarget(Target):
    kind = "http"

    def __init__(self, spec: str, opts: TargetOptions):
        super().__init__(spec, opts)
        base = spec.rstrip("/")
        path = opts.chat_path or ""
        if path and not path.startswith("/"):
            path = "/" + path
        self.url = base if (not path or base.endswith(path)) else base + path
        tpl = opts.request_template
        if isinstance(tpl, str):
            try:
                tpl = json.loads(tpl)
            except json.JSONDecodeError as exc:
                raise UserError(f"request template is not valid JSON ({exc.msg})",
                                field="request_template") from None
        if tpl is None:
            tpl = dict(DEFAULT_TEMPLATE)
            if opts.stream:
                tpl["stream"] = True
        self.template = tpl
        if not isinstance(opts.timeout_s, (int, float)) or opts.timeout_s <= 0:
            raise UserError("timeout must be a positive number of seconds", field="timeout")

    @property
    def shown(self) -> str:
        from .retrieval.http_api import redact_url

        return redact_url(self.url)

    def _secret(self) -> str | None:
        return os.environ.get(self.opts.auth_env) if self.opts.auth_env else None

    def check(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError("expected an http(s) URL or python:package.module:function",
                            file=self.spec)
        if self.opts.auth_env and not os.environ.get(self.opts.auth_env):
            raise UserError(f"environment variable {self.opts.auth_env} is not set (it holds the "
                            "endpoint's key)", field="auth_env")

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        token = self._secret()
        if token:
            h[self.opts.auth_header] = (f"{self.opts.auth_scheme} {token}"
                                        if self.opts.auth_scheme else token)
        return h

    def _once(self, index: int, qid: str, question: str, variant: str) -> LiveAnswer:
        where = f"{self.shown}: question {qid}"
        secret = self._secret()
        from .retrieval.base import fill_template

        body = fill_template(self.template, {"question": question, "index": index, "id": qid,
                                             "conversation_id": f"eval-{index}", "variant": variant})
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        req = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
        t0 = time.perf_counter()
        ttft = None
        try:
            with urllib.request.urlopen(req, timeout=self.opts.timeout_s) as resp:
                header_version = resp.headers.get("X-Assistant-Version")
                streamed = None
                if resp.headers.get_content_type() == "text/event-stream":
                    payload, ttft, streamed = self._read_stream(resp, t0, where)
                else:
                    raw = resp.read()
                    try:
                        payload = json.loads(raw)
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        head = raw[:80].decode("utf-8", "replace")
                        raise TargetError(f"{where}: the answer is not JSON (starts with "
                                          f"{head!r})", unreachable=False) from None
        except TargetError:
            raise
        except urllib.error.HTTPError as exc:
            ra = None
            try:
                ra = float(exc.headers.get("Retry-After")) if exc.headers else None
            except (TypeError, ValueError):
                ra = None
            retryable = exc.code == 429 or exc.code >= 500
            raise TargetError(_redact(f"{where}: HTTP {exc.code} {exc.reason}", secret),
                              unreachable=retryable, retry_after=ra) from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError,
                http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise TargetError(_redact(f"{where}: unreachable ({type(reason).__name__}: {reason})",
                                      secret), unreachable=True) from None
        total = (time.perf_counter() - t0) * 1000
        return self._parse(payload, where, total, ttft, header_version, streamed)

    def _read_stream(self, resp, t0: float, where: str) -> tuple[dict, float | None, str]:
        """Server-sent events: text deltas at delta_path; other keys merged (last wins)."""
        merged: dict[str, Any] = {}
        parts: list[str] = []
        ttft = None
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            chunk = line[5:].strip()
            if chunk == "[DONE]":
                break
            try:
                ev = json.loads(chunk)
            except json.JSONDecodeError:
                raise TargetError(f"{where}: a streamed event is not JSON ({chunk[:60]!r})",
                                  unreachable=False) from None
            if not isinstance(ev, dict):
                continue
            delta = _dig(ev, self.opts.delta_path)
            if isinstance(delta, str) and delta:
                if ttft is None:
                    ttft = (time.perf_counter() - t0) * 1000
                parts.append(delta)
            merged.update(ev)
        return merged, ttft, "".join(parts)

    def _parse(self, payload: Any, where: str, total: float, ttft: float | None,
               header_version: str | None, streamed: str | None = None) -> LiveAnswer:
        o = self.opts
        answer = _dig(payload, o.answer_path)
        if not isinstance(answer, str) and streamed is not None:
            answer = streamed  # a stream without a final full-answer event
        if not isinstance(answer, str):
            keys = f" (top-level keys: {', '.join(map(str, payload))})" if isinstance(payload, dict) else ""
            raise TargetError(f"{where}: no answer text at {o.answer_path!r}{keys}; set "
                              "--answer-path", unreachable=False)
        chunks = _coerce_chunks(_dig(payload, o.chunks_path), _dig(payload, o.scores_path),
                                o, self.shown, where)
        version = _dig(payload, o.version_path) if o.version_path else None
        version = str(version) if version is not None else header_version
        if ttft is not None:
            return LiveAnswer(answer, chunks, ttft, "ttft", version)
        return LiveAnswer(answer, chunks, total, "total", version)


class PythonTarget(Target):
    kind = "python"

    def __init__(self, spec: str, target: str, opts: TargetOptions, base_dir: str):
        super().__init__(spec, opts)
        module, _, func = target.rpartition(":")
        if not module or not func:
            raise UserError("expected python:package.module:function", file=spec)
        self.module_name, self.func_name, self.base_dir = module, func, base_dir
        self._fn: Any = None
        self._kwargs: set[str] = set()

    def check(self) -> None:
        import importlib

        if self.base_dir and self.base_dir not in sys.path:
            sys.path.insert(0, self.base_dir)
        try:
            mod = importlib.import_module(self.module_name)
        except ModuleNotFoundError as exc:
            if exc.name and self.module_name.startswith(exc.name):
                raise UserError(f"cannot import module {self.module_name!r} (run from the project "
                                "directory or install the package)", file=self.spec) from None
            raise UserError(f"importing {self.module_name!r} failed: {exc}", file=self.spec) from None
        except Exception as exc:
            raise UserError(f"importing {self.module_name!r} failed: {type(exc).__name__}: {exc}",
                            file=self.spec) from None
        fn = getattr(mod, self.func_name, None)
        if fn is None or not callable(fn):
            raise UserError(f"module {self.module_name!r} has no function {self.func_name!r}",
                            file=self.spec)
        self._fn = fn
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        self._kwargs = {n for n in ("conversation_id", "case_id", "index")
                        if var_kw or n in params}

    def _once(self, index: int, qid: str, question: str, variant: str) -> LiveAnswer:
        if self._fn is None:
            self.check()
        where = f"{self.spec}: question {qid}"
        values = {"conversation_id": f"eval-{index}", "case_id": qid, "index": index}
        kwargs = {k: v for k, v in values.items() if k in self._kwargs}
        t0 = time.perf_counter()
        try:
            got = self._fn(question, **kwargs)
        except (OSError, TimeoutError, ConnectionError) as exc:
            raise TargetError(f"{where}: unreachable ({type(exc).__name__}: {exc})",
                              unreachable=True) from None
        except Exception as exc:
            raise TargetError(f"{where}: the pipeline raised {type(exc).__name__}: {exc}",
                              unreachable=False) from None
        total = (time.perf_counter() - t0) * 1000
        o = self.opts
        version = None
        if isinstance(got, dict):
            answer, chunks = _dig(got, o.answer_path), _dig(got, o.chunks_path)
            scores = _dig(got, o.scores_path)
            version = _dig(got, o.version_path) if o.version_path else None
        elif isinstance(got, (tuple, list)) and len(got) in (2, 3):
            answer, chunks, scores = got[0], got[1], None
            version = got[2] if len(got) == 3 else None
        elif hasattr(got, "answer"):
            answer, chunks = getattr(got, "answer"), getattr(got, "chunks", None)
            scores, version = None, getattr(got, "version", None)
        else:
            raise TargetError(f"{where}: expected a dict with answer and chunks, a tuple (answer, "
                              f"chunks[, version]) or an object; got {type(got).__name__}",
                              unreachable=False)
        if not isinstance(answer, str):
            raise TargetError(f"{where}: the answer is not a string ({type(answer).__name__})",
                              unreachable=False)
        return LiveAnswer(answer, _coerce_chunks(chunks, scores, o, self.spec, where), total,
                          "total", None if version is None else str(version))


def parse_target(spec: str, opts: TargetOptions | None = None, *, base_dir: str = ".") -> Target:
    """`http(s)://…` or `python:package.module:function` → a Target (nothing is called)."""
    opts = opts or TargetOptions()
    if not isinstance(spec, str) or not spec.strip():
        raise UserError("empty target (use an http(s) URL or python:package.module:function)")
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    if kind.lower() in ("http", "https"):
        return HttpTarget(spec, opts)
    if kind.lower() == "python":
        return PythonTarget(spec, rest, opts, os.fspath(base_dir))
    raise UserError("unknown target kind (use an http(s) URL or python:package.module:function)",
                    file=spec)


# --------------------------------------------------------------------------- metrics (pure)
def context_precision_recall(retrieved_ids: list[str], relevant_ids: list[str] | None
                             ) -> tuple[float | None, float | None]:
    """precision = relevant retrieved / retrieved; recall = relevant retrieved / relevant.

    (None, None) when the question has no relevant ids (excluded from the averages);
    nothing retrieved gives precision 0 (the system offered no relevant material).
    """
    rel = set(relevant_ids or [])
    if not rel:
        return None, None
    got = list(dict.fromkeys(retrieved_ids))
    hit = sum(1 for c in got if c in rel)
    precision = hit / len(got) if got else 0.0
    return precision, hit / len(rel)


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), None for no values."""
    if not values:
        return None
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


# --------------------------------------------------------------------------- the run
@dataclass
class LiveResult:
    run_id: str
    status: str
    n_cases: int
    n_items: int
    unfinished: list[str]
    seconds: float
    stopped: str | None = None  # why the run stopped early, if it did
    judge_errors: list[str] = field(default_factory=list)


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stub_variant(name: str, citation_pattern: str | None):
    from .models import ChecksSpec, Variant

    checks = ChecksSpec(citation_pattern=citation_pattern) if citation_pattern else ChecksSpec()
    return Variant(name=name, user="{{ question }}", checks=checks)


def question_record(q) -> dict:
    """What a live report needs of a golden question (stored on the run)."""
    return {"id": q.id, "question": q.question, "answerable": q.answerable,
            "category": q.category, "reference_answer": q.reference_answer,
            "key_points": q.key_points, "relevant_chunk_ids": q.relevant_chunk_ids,
            "expected_citations": q.expected_citations, "must_not_say": q.must_not_say,
            "tags": q.tags}


def build_case(q: dict, chunks: list[dict], *, retriever: str, corpus_version: str):
    """A judge-ready Case holding the context the live system actually retrieved."""
    from .models import Case, Chunk

    seen: set[str] = set()
    ctx = []
    for c in chunks:
        if c["id"] in seen or not (c.get("text") or "").strip():
            continue
        seen.add(c["id"])
        ctx.append(Chunk(id=c["id"], text=c["text"]))
    return Case(id=q["id"], question=q["question"], context=ctx, corpus_version=corpus_version,
                retriever=retriever, answerable=q["answerable"], category=q.get("category"),
                reference_answer=q.get("reference_answer"), key_points=q.get("key_points"),
                expected_citations=q.get("expected_citations"),
                relevant_chunk_ids=q.get("relevant_chunk_ids"),
                must_not_say=q.get("must_not_say"), tags=q.get("tags"))


def _item_row(run_id: str, idx: int, q, v: str, *, ans: LiveAnswer | None = None,
              error: str | None = None, attempts: int | None = None) -> dict:
    row = {"run_id": run_id, "case_id": q.id, "variant": v, "idx": idx, "question": q.question,
           "answer": None, "retrieved_json": None, "scores_json": None, "latency_ms": None,
           "latency_kind": None, "assistant_version": None, "attempts": attempts, "error": error,
           "created_at": datetime.now(timezone.utc).replace(tzinfo=None)}
    if ans is not None:
        row.update({"answer": ans.answer,
                    "retrieved_json": json.dumps([{"id": c.id, "text": c.text, "score": c.score}
                                                  for c in ans.chunks], ensure_ascii=False),
                    "scores_json": json.dumps([c.score for c in ans.chunks]),
                    "latency_ms": ans.latency_ms, "latency_kind": ans.latency_kind,
                    "assistant_version": ans.version, "attempts": ans.attempts})
    return row


def judge_question(gw, cfg, store, run_id: str, q: dict, items: dict[str, dict], *,
                   citation_pattern: str | None, corpus_version: str) -> list[str]:
    """Checks and judges for one question whose A and B answers both exist."""
    from . import judges as J
    from .checks import run_checks

    spec = cfg.judge
    js = cfg.judges
    errors: list[str] = []
    chunks = {v: json.loads(items[v]["retrieved_json"] or "[]") for v in VARIANTS}
    cases = {v: build_case(q, chunks[v], retriever=f"live:{v}", corpus_version=corpus_version)
             for v in VARIANTS}
    answers = {v: items[v]["answer"] or "" for v in VARIANTS}

    def put(row, claims=None):
        row = {"run_id": run_id, **row}
        store.put_judgment(row, claims)
        if row.get("error"):
            errors.append(f"{row['judge']}[{row['subject']}]: {row['error']}")

    for v in VARIANTS:
        res = run_checks(answers[v], cases[v], _stub_variant(f"live-{v}", citation_pattern))
        store.put_checks(run_id, q["id"], v, [r.model_dump() for r in res])
    if "pairwise" in js:
        # the judge sees everything either system retrieved (A's chunks, then B's new ones)
        both = build_case(q, chunks["A"] + chunks["B"], retriever="live:A+B",
                          corpus_version=corpus_version)
        for row in J.pairwise(gw, spec, both, answers["A"], answers["B"]):
            put(row)
    points, perr = (J.key_points_for(gw, spec, cases["A"]) if "coverage" in js else (None, None))
    for v in VARIANTS:
        case, ans = cases[v], answers[v]
        for row, claims in J.claims_and_abstention(gw, spec, case, ans, v, js,
                                                    max_claims=cfg.max_claims):
            put(row, claims)
        if "coverage" in js and case.answerable:
            if perr:
                put({"case_id": case.id, "judge": "coverage", "subject": v, "error": perr})
            elif points:
                put(J.coverage(gw, spec, case, ans, v, points))
        if "quality" in js:
            put(J.rubric(gw, spec, case, "quality", v, {"question": case.question,
                                                         "context": J.context_block(case.context),
                                                         "answer": ans}))
        if "relevance" in js:
            put(J.rubric(gw, spec, case, "relevance", v, {"question": case.question, "answer": ans}))
    return errors


def run_live(lc, golden, a_target: str, b_target: str, *, frozen_run: str | None = None,
             options: TargetOptions | None = None, run_id: str | None = None,
             resume: bool = False, a_name: str | None = None, b_name: str | None = None,
             retriever_label: str | None = None, corpus_version: str | None = None,
             citation_pattern: str | None = None, progress: Progress | None = None) -> LiveResult:
    """Ask A and B every golden question, store each item at once, then judge.

    Raises UserError (exit 2) for bad input before anything is written, and
    LiveIncomplete (exit 3) after saving when a target stops answering.
    """
    from .checks import validate_case_patterns, validate_patterns
    from .fixtures import load_questions
    from .llm import check_credentials, preload
    from .runner import _config_record, _git_commit, new_run_id
    from .store import Store

    preload()
    cfg = lc.config
    say = progress or (lambda _m: None)
    golden = Path(golden)
    if not golden.is_absolute() and not golden.exists():
        golden = lc.resolve(golden)
    questions = load_questions(golden)
    opts = options or TargetOptions()
    base_dir = str(Path.cwd())
    targets = {"A": parse_target(a_target, opts, base_dir=base_dir),
               "B": parse_target(b_target, opts, base_dir=base_dir)}
    for t in targets.values():
        t.check()
    stub = _stub_variant("live", citation_pattern)
    validate_patterns(stub)
    for q in questions:
        validate_case_patterns(build_case(question_record(q), [], retriever="live",
                                          corpus_version="live"))
    check_credentials(cfg.judge, where="judge")
    if resume and not run_id:
        raise UserError("--resume needs --run-id (the live run to continue)")

    store = Store(lc.store_path)
    try:
        frozen = None
        if frozen_run:
            frozen = store.get_run(frozen_run)
            if frozen is None:
                raise UserError(f"--frozen-run: no run {frozen_run!r} in the store",
                                file=str(store.path))
            if frozen["kind"] != "frozen":
                raise UserError(f"--frozen-run: run {frozen_run!r} is a {frozen['kind']} run, not "
                                "a frozen one")
        golden_sha = _sha256_file(golden)
        records = [question_record(q) for q in questions]
        cv = corpus_version or "unstated"
        rl = retriever_label or "as deployed"
        target_sha = {v: hashlib.sha256(json.dumps({"spec": targets[v].shown,
                                                    "options": opts.public()},
                                                   sort_keys=True).encode()).hexdigest()
                      for v in VARIANTS}
        if resume:
            run = store.get_run(run_id)
            if run is None or run["kind"] != "live":
                raise UserError(f"--resume: no live run {run_id!r} in the store",
                                file=str(store.path))
            if run["fixture_sha256"] != golden_sha:
                raise UserError(f"golden questions changed since live run {run_id} started; start "
                                "a new run", file=str(golden))
            for v in VARIANTS:
                if run[f"variant_{v.lower()}_sha256"] != target_sha[v]:
                    raise UserError(f"target {v} (or its options) changed since live run {run_id} "
                                    "started; start a new run")
            store.update_run(run_id, status="running")
        else:
            run_id = run_id or new_run_id()
            if store.get_run(run_id) is not None:
                raise UserError(f"run id {run_id!r} already exists; use --resume to continue it")
            info = {"questions": records, "targets": {v: targets[v].shown for v in VARIANTS},
                    "target_kinds": {v: targets[v].kind for v in VARIANTS},
                    "options": opts.public(), "frozen_run_id": frozen_run,
                    "retriever_label": rl, "corpus_version": cv,
                    "citation_pattern": citation_pattern, "judges": cfg.judges,
                    "python": sys.version.split()[0]}
            store.create_run({
                "run_id": run_id, "kind": "live", "fixture_name": golden.name,
                "fixture_path": str(golden.resolve()), "fixture_sha256": golden_sha,
                "corpus_version": cv, "retriever": rl, "n_cases": len(questions),
                "variant_a_name": a_name or "A", "variant_a_sha256": target_sha["A"],
                "variant_a_path": targets["A"].shown,
                "variant_b_name": b_name or "B", "variant_b_sha256": target_sha["B"],
                "variant_b_path": targets["B"].shown,
                "generator_model": f"live: A={targets['A'].shown} | B={targets['B'].shown}",
                "judge_model": cfg.judge.model, "comparison_kind": "live",
                "git_commit": _git_commit(Path.cwd()), "config_json": _config_record(lc),
                "info_json": json.dumps(info, sort_keys=True)})
        say(f"live run {run_id}: {len(questions)} questions, A={targets['A'].shown} "
            f"B={targets['B'].shown}, judge {cfg.judge.model}")
        return _execute(lc, store, run_id, questions, records, targets, cv, citation_pattern,
                        say, resume)
    finally:
        store.close()


def _execute(lc, store, run_id, questions, records, targets, corpus_version, citation_pattern,
             say, resume) -> LiveResult:
    from .llm import Gateway, ModelDriftError

    cfg = lc.config
    t0 = time.monotonic()
    done = {(r["case_id"], r["variant"]): r for r in store.live_items(run_id)
            if r["error"] is None and r["answer"] is not None} if resume else {}
    stopped: str | None = None
    n = len(questions)
    # phase 1: ask, one call at a time, each item stored the moment it exists
    for idx, q in enumerate(questions, start=1):
        for v in VARIANTS:
            if (q.id, v) in done:
                continue
            try:
                ans = targets[v].ask(idx, q.id, q.question, v)
            except TargetError as exc:
                kind = UNREACHABLE if exc.unreachable else BAD_ANSWER
                store.put_live_item(_item_row(run_id, idx, q, v, error=f"{kind}: {exc.message}",
                                              attempts=exc.attempts))
                stopped = f"{kind}: {exc.message}"
                say(f"[{idx}/{n}] {q.id} {v}: FAILED ({exc.message})")
                break
            store.put_live_item(_item_row(run_id, idx, q, v, ans=ans))
            say(f"[{idx}/{n}] {q.id} {v}: {ans.latency_ms:.0f} ms ({ans.latency_kind}), "
                f"{len(ans.chunks)} chunk(s)" + (f", version {ans.version}" if ans.version else ""))
        if stopped:
            break
    # phase 2: judge every question whose A and B answers both exist
    items: dict[tuple[str, str], dict] = {(r["case_id"], r["variant"]): r
                                          for r in store.live_items(run_id)}
    ready = [rec for rec in records
             if all((items.get((rec["id"], v)) or {}).get("answer") is not None
                    and (items.get((rec["id"], v)) or {}).get("error") is None for v in VARIANTS)]
    gw = Gateway(store, concurrency=cfg.concurrency, timeout_s=cfg.timeout_s,
                 max_retries=cfg.max_retries, backoff_base_s=cfg.retry_backoff_s, run_id=run_id)
    judge_errors: dict[str, list[str]] = {}
    lock = threading.Lock()
    if ready:
        say(f"judging {len(ready)} question(s) with {cfg.judge.model}")
        with ThreadPoolExecutor(max_workers=max(1, min(cfg.concurrency, len(ready))),
                                thread_name_prefix="abtest-live-judge") as pool:
            futs = {pool.submit(judge_question, gw, cfg, store, run_id, rec,
                                {v: items[(rec["id"], v)] for v in VARIANTS},
                                citation_pattern=citation_pattern,
                                corpus_version=corpus_version): rec["id"] for rec in ready}
            for fut in as_completed(futs):
                cid = futs[fut]
                try:
                    errs = fut.result()
                except ModelDriftError as exc:
                    errs = [str(exc)]
                if errs:
                    with lock:
                        judge_errors[cid] = errs
                    say(f"judge {cid}: INCOMPLETE ({errs[0][:80]})")
    ready_ids = {rec["id"] for rec in ready}
    unfinished = sorted({q.id for q in questions if q.id not in ready_ids} | set(judge_errors))
    status = "complete" if not unfinished and not stopped else "incomplete"
    store.update_run(run_id, status=status,
                     finished_at=datetime.now(timezone.utc).replace(tzinfo=None))
    result = LiveResult(run_id, status, n, len([r for r in items.values() if r["error"] is None]),
                        unfinished, time.monotonic() - t0, stopped,
                        [e for errs in judge_errors.values() for e in errs])
    if stopped:
        finished = n - len(unfinished)
        raise LiveIncomplete(f"incomplete — {stopped}; run {run_id}: {finished} of {n} question(s) "
                             "finished and saved, the rest not scored (nothing is estimated)",
                             run_id, result)
    return result
