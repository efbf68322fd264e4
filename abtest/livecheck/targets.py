"""The two assistants a live run asks: an HTTP endpoint or a Python pipeline.

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
"""

from __future__ import annotations

import abc
import http.client
import inspect
import json
import os
import random
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from abtest.errors import ProviderError, UserError
from abtest.retrieval.base import RetrievedChunk, coerce_chunk
from abtest.retrieval.base import dig
from tenacity import (RetryError, Retrying, retry_if_exception, stop_after_attempt)
from abtest.retrieval.http_api import redact_url
from abtest.retrieval.base import fill_template
import importlib

DEFAULT_TEMPLATE: dict[str, Any] = {"message": "{question}", "conversationId": "{conversation_id}"}
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


class TargetError(ProviderError):
    """A target call failed; `unreachable` = connection/timeout/429/5xx (retryable)."""

    def __init__(self, message: str, *, unreachable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable
        self.retry_after = retry_after
        self.attempts = 1



def _redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def _coerce_chunks(items: Any, scores: Any, opts: TargetOptions, source: str, where: str) -> list:

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

    return dig(obj, path) if path else None


class Target(abc.ABC):
    kind = "?"

    def __init__(self, spec: str, opts: TargetOptions):
        self.spec = spec
        self.opts = opts

    @property
    def shown(self) -> str:
        return self.spec

    def check(self) -> None:  # noqa: B027 -- an optional hook: most targets have nothing to check
        """Raise UserError for anything wrong before the first call."""

    @abc.abstractmethod
    def _once(self, index: int, qid: str, question: str, variant: str) -> LiveAnswer:
        """One request to the target (retries are the caller's)."""

    def ask(self, index: int, qid: str, question: str, variant: str) -> LiveAnswer:
        """One question, with retries on retryable failures (tenacity)."""

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
            said = exc.headers.get("Retry-After") if exc.headers else None
            try:
                ra = float(said) if said is not None else None
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
        params: Mapping[str, inspect.Parameter]
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
            answer, chunks = got.answer, getattr(got, "chunks", None)
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
