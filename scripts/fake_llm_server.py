#!/usr/bin/env python3
"""A small OpenAI-compatible fake LLM server for tests and dry runs (stdlib only).

Endpoints (with or without the ``/v1`` prefix):

* ``POST /v1/chat/completions`` - deterministic replies; JSON built from
  ``response_format.json_schema`` (or when the prompt asks for JSON); optional SSE
  streaming when ``"stream": true``.
* ``POST /v1/embeddings`` - deterministic, normalised pseudo-embeddings (dimension 16,
  or ``dimensions`` if the request sets it); ``encoding_format`` float or base64.
* ``GET /v1/models`` - one fake model.
* ``POST /v1/files``, ``GET /v1/files/ID[/content]``, ``POST /v1/batches``,
  ``GET /v1/batches/ID`` - the OpenAI Batch API: a batch does its requests (each recorded as
  a request, path ``/batch/v1/chat/completions``) once ``batch_seconds`` have passed and it is
  read; ``batch_expire`` makes it expire with half done, ``batch_fail_first_n`` fails that
  many requests of each batch (500 in the error file).

Rate limits per model (``limits={"judge": {"rpm": 600, "tpm": 120000}}``, ``"*"`` for every
other model; ``--limit judge=600/120000``): at most ``rpm`` requests and ``tpm`` tokens in
any sliding window of ``window_s`` seconds (60; scaled, the window holds ``rpm x
window_s / 60``). A request's tokens are its usage (prompt + completion words, as the reply
reports them), counted when it arrives. A request past a limit is answered 429 with
``Retry-After`` (when there is room again) and counts against the requests (as OpenAI
documents: unsuccessful requests count); one larger than the whole window is answered 429
"Request too large". Every reply for a limited model carries OpenAI's headers:
``x-ratelimit-limit-{requests,tokens}`` (per minute), ``-remaining-`` (left in the window)
and ``-reset-`` (until the window is empty, as ``1.5s`` / ``120ms``). With ``bucket_s``
(``--bucket-s``) the limits are enforced as hosted providers do, over short periods: a
continuous bucket per limit refilled at limit / 60 a second holding ``bucket_s`` seconds'
worth (remaining: its level; reset: until it is full). With ``charge="estimate"``
(``--charge estimate``) a request counts on arrival its prompt's characters / 4 plus its
``max_tokens`` (``default_max_tokens`` when unset), as hosted providers charge, instead of
its usage.

Faults can be injected by rate (seeded) or deterministically for the first N attempts of
each request hash: ``429`` (with ``Retry-After``), ``500``, ``503``, ``timeout`` (hang),
``malformed`` (200 with a non-JSON body), ``truncated_json`` (200, content is a JSON
object cut in half) and ``empty`` (200, content ``""``).

Use as a script::

    python scripts/fake_llm_server.py --port 0 --latency 0.2 --fault-rate 0.3 \
        --max-seconds 600 --dump requests.json

or in-process::

    with FakeLLMServer(latency=0.1, faults={"429": 0.1}) as srv:
        base_url = srv.base_url      # http://127.0.0.1:PORT/v1
        ...
    srv.counts                       # {request_hash: count}
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import random
import re
import signal
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

FAULT_KINDS = ("429", "500", "503", "timeout", "malformed", "truncated_json", "empty")
_FAULT_ALIASES = {"hang": "timeout", "rate_limit": "429", "truncated": "truncated_json",
                  "malformed_json": "malformed"}
VOLATILE_FIELDS = ("stream", "user", "metadata")
SYSTEM_FINGERPRINT = "fp_fake_1"
EMBEDDING_DIM = 16

Responder = Callable[[dict], "str | dict"]


# --------------------------------------------------------------------------- helpers

def request_hash(body: Any) -> str:
    """sha256 of the canonical JSON of ``body`` minus volatile fields."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in VOLATILE_FIELDS}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                       default=str)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _text_of(content: Any) -> str:
    """Text of a message ``content`` (string or list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text")
                if isinstance(t, str):
                    parts.append(t)
        return " ".join(parts)
    return str(content)


def _word_count(text: str) -> int:
    return len(text.split())


def _last_message(messages: list, roles: tuple[str, ...]) -> str | None:
    for m in reversed(messages or []):
        if isinstance(m, dict) and m.get("role") in roles:
            return _text_of(m.get("content"))
    return None


def normalise_faults(faults: dict | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in (faults or {}).items():
        kind = _FAULT_ALIASES.get(str(k), str(k))
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {k!r}; choose from {', '.join(FAULT_KINDS)}")
        rate = float(v)
        if rate < 0:
            raise ValueError(f"negative fault rate for {k!r}")
        out[kind] = out.get(kind, 0.0) + rate
    total = sum(out.values())
    if total > 1.0 + 1e-9:
        raise ValueError(f"fault rates sum to {total:.3f} > 1")
    return out


def parse_faults_arg(spec: str) -> dict[str, float]:
    """``"429=0.1,500=0.05"`` -> ``{"429": 0.1, "500": 0.05}``."""
    out: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        if "=" not in item:
            raise ValueError(f"bad fault spec {item!r}; expected KIND=RATE")
        k, v = item.split("=", 1)
        out[k.strip()] = float(v)
    return normalise_faults(out)


# ----------------------------------------------------------------- schema -> instance

def _resolve_ref(ref: str, root: dict) -> dict:
    if not ref.startswith("#/"):
        return {}
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return {}
        node = node[part]
    return node if isinstance(node, dict) else {}


def instance_from_schema(schema: Any, root: dict | None = None, _depth: int = 0) -> Any:
    """A minimal instance valid for a (reasonable subset of) JSON Schema.

    enums -> first value, strings -> "x", numbers -> 0.5, integers -> 0, booleans -> False,
    arrays -> empty (or ``minItems`` items), objects -> required properties only.
    """
    if root is None:
        root = schema if isinstance(schema, dict) else {}
    if not isinstance(schema, dict) or _depth > 32:
        return None
    if "$ref" in schema:
        return instance_from_schema(_resolve_ref(schema["$ref"], root), root, _depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        opts = schema.get(key)
        if isinstance(opts, list) and opts:
            non_null = [o for o in opts if not (isinstance(o, dict) and o.get("type") == "null")]
            return instance_from_schema((non_null or opts)[0], root, _depth + 1)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            if isinstance(sub, dict) and "$ref" in sub:
                sub = _resolve_ref(sub["$ref"], root)
            if not isinstance(sub, dict):
                continue
            for k, v in sub.items():
                if k == "properties":
                    merged.setdefault("properties", {}).update(v)
                elif k == "required":
                    merged["required"] = list(dict.fromkeys(list(merged.get("required", [])) + list(v)))
                else:
                    merged.setdefault(k, v)
        return instance_from_schema(merged, root, _depth + 1)

    typ = schema.get("type")
    if isinstance(typ, list):
        non_null = [t for t in typ if t != "null"]
        typ = non_null[0] if non_null else "null"
    if typ is None:
        if "properties" in schema or "required" in schema:
            typ = "object"
        elif "items" in schema:
            typ = "array"
        else:
            typ = "string"

    if typ == "object":
        props = schema.get("properties") or {}
        obj = {}
        for name in schema.get("required") or []:
            obj[name] = instance_from_schema(props.get(name, {}), root, _depth + 1)
        return obj
    if typ == "array":
        n = int(schema.get("minItems") or 0)
        items = schema.get("items")
        if isinstance(schema.get("prefixItems"), list):
            pre = [instance_from_schema(s, root, _depth + 1) for s in schema["prefixItems"]]
            return pre[:max(n, len(pre))]
        return [instance_from_schema(items if isinstance(items, dict) else {}, root, _depth + 1)
                for _ in range(n)]
    if typ == "string":
        n = max(1, int(schema.get("minLength") or 1))
        fmt = schema.get("format")
        if fmt == "date-time":
            return "2024-01-01T00:00:00Z"
        if fmt == "date":
            return "2024-01-01"
        s = "x" * n
        if schema.get("maxLength") is not None:
            s = s[: int(schema["maxLength"])]
        return s
    if typ in ("number", "integer"):
        v: float = 0.5 if typ == "number" else 0
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        if isinstance(lo, (int, float)) and not isinstance(lo, bool) and v < lo:
            v = lo if "minimum" in schema else lo + (0.5 if typ == "number" else 1)
        if isinstance(hi, (int, float)) and not isinstance(hi, bool) and v > hi:
            v = hi if "maximum" in schema else hi - (0.5 if typ == "number" else 1)
        return int(v) if typ == "integer" else float(v)
    if typ == "boolean":
        return False
    if typ == "null":
        return None
    return "x"


def _balanced_objects(text: str) -> list[str]:
    """Top-level ``{...}`` substrings of ``text`` (string-aware brace matching)."""
    out, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
    return out


def _looks_like_schema(obj: Any) -> bool:
    return isinstance(obj, dict) and (
        "properties" in obj or obj.get("type") in ("object", "array") or "$schema" in obj)


def json_reply_for(body: dict) -> Any | None:
    """The JSON object to return for ``body``, or None if no JSON is wanted."""
    rf = body.get("response_format")
    if isinstance(rf, dict):
        if rf.get("type") == "json_schema":
            js = rf.get("json_schema") or {}
            schema = js.get("schema") if isinstance(js, dict) else None
            if schema is None and isinstance(js, dict) and _looks_like_schema(js):
                schema = js
            return instance_from_schema(schema or {"type": "object"})
        wants_json = rf.get("type") == "json_object"
    else:
        wants_json = False
    messages = body.get("messages") or []
    texts = [t for t in (_last_message(messages, ("user",)), _last_message(messages, ("system",)))
             if t]
    if not wants_json and not any(re.search(r"\bjson\b", t, re.I) for t in texts):
        return None
    # The prompt asks for JSON: use an embedded schema, or echo an embedded example object.
    for t in texts:
        for frag in _balanced_objects(t):
            try:
                obj = json.loads(frag)
            except ValueError:
                continue
            if _looks_like_schema(obj):
                return instance_from_schema(obj)
            if isinstance(obj, dict) and obj:
                return _fill_example(obj)
    return {"answer": "x"}


def _fill_example(obj: Any) -> Any:
    """An example like ``{"verdict": "A|B|tie"}`` -> ``{"verdict": "A"}``."""
    if isinstance(obj, dict):
        return {k: _fill_example(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_fill_example(v) for v in obj[:1]]
    if isinstance(obj, str) and "|" in obj:
        return obj.split("|", 1)[0].strip()
    return obj


def default_content(body: dict) -> str:
    js = json_reply_for(body)
    if js is not None:
        return json.dumps(js, separators=(",", ":"))
    last = _last_message(body.get("messages") or [], ("user",))
    if last is None:
        last = _last_message(body.get("messages") or [], ("system", "assistant", "developer")) or ""
    return "Answer to: " + " ".join(last.split())[:60]


def fake_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    vals: list[float] = []
    counter = 0
    while len(vals) < dim:
        h = hashlib.sha256(f"{counter}:{text}".encode("utf-8")).digest()
        for i in range(0, len(h), 4):
            vals.append(int.from_bytes(h[i:i + 4], "big") / 0xFFFFFFFF * 2.0 - 1.0)
        counter += 1
    vals = vals[:dim]
    norm = math.sqrt(sum(v * v for v in vals)) or 1.0
    return [v / norm for v in vals]


# ------------------------------------------------------------------- rate windows

def go_duration(seconds: float) -> str:
    """OpenAI's reset format: ``120ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    rest_txt = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{rest_txt}s" if minutes else f"{rest_txt}s"


class RateWindow:
    """One model's sliding window of requests and tokens."""

    def __init__(self, rpm: float | None, tpm: float | None, window_s: float = 60.0,
                 count_rejected: bool = True):
        self.rpm, self.tpm, self.window_s = rpm, tpm, float(window_s)
        self.rcap = max(1.0, rpm * window_s / 60) if rpm else None
        self.tcap = max(1.0, tpm * window_s / 60) if tpm else None
        self.count_rejected = count_rejected
        self.reqs: list[float] = []               # arrival times (sorted)
        self.toks: list[tuple[float, int]] = []   # (arrival, tokens)
        self.tok_sum = 0

    def _expire(self, now: float) -> None:
        cut = now - self.window_s
        i = 0
        while i < len(self.reqs) and self.reqs[i] <= cut:
            i += 1
        del self.reqs[:i]
        j = 0
        while j < len(self.toks) and self.toks[j][0] <= cut:
            self.tok_sum -= self.toks[j][1]
            j += 1
        del self.toks[:j]

    def admit(self, tokens: int, now: float) -> tuple[bool, str | None, float | None]:
        """(admitted, why not: "requests" | "tokens" | "too_large", seconds until room)."""
        self._expire(now)
        if self.tcap is not None and tokens > self.tcap:
            return False, "too_large", None
        waits: dict[str, float] = {}
        if self.rcap is not None and len(self.reqs) + 1 > self.rcap:
            k = len(self.reqs) + 1 - int(self.rcap)       # this many must leave the window
            waits["requests"] = self.reqs[k - 1] + self.window_s - now
        if self.tcap is not None and self.tok_sum + tokens > self.tcap:
            need, acc = self.tok_sum + tokens - self.tcap, 0
            for t, n in self.toks:
                acc += n
                if acc >= need:
                    waits["tokens"] = t + self.window_s - now
                    break
        if waits:
            if self.count_rejected:
                self.reqs.append(now)
            why = max(waits, key=waits.get)
            return False, why, max(0.001, waits[why])
        self.reqs.append(now)
        self.toks.append((now, tokens))
        self.tok_sum += tokens
        return True, None, None

    def headers(self, now: float) -> dict[str, str]:
        self._expire(now)
        out = {}
        for kind, limit, cap, used, last in (
                ("requests", self.rpm, self.rcap, len(self.reqs),
                 self.reqs[-1] if self.reqs else None),
                ("tokens", self.tpm, self.tcap, self.tok_sum,
                 self.toks[-1][0] if self.toks else None)):
            if limit is None:
                continue
            out[f"x-ratelimit-limit-{kind}"] = str(int(limit))
            out[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(cap - used)))
            out[f"x-ratelimit-reset-{kind}"] = go_duration(
                0.0 if last is None else max(0.0, last + self.window_s - now))
        return out


class RateBucket:
    """One model's continuous buckets of requests and tokens, as hosted providers enforce a
    minute's limit: refilled at limit / 60 a second, holding `bucket_s` seconds' worth (a 600
    rpm limit is ~10 requests a second, at most 10 x bucket_s at once). Same interface as
    RateWindow; a request past a limit waits (Retry-After) until the bucket holds it."""

    def __init__(self, rpm: float | None, tpm: float | None, bucket_s: float = 3.0,
                 count_rejected: bool = True):
        self.rpm, self.tpm, self.bucket_s = rpm, tpm, float(bucket_s)
        self.caps = {k: max(1.0, v * bucket_s / 60) for k, v in
                     (("requests", rpm), ("tokens", tpm)) if v}
        self.rates = {k: v / 60 for k, v in (("requests", rpm), ("tokens", tpm)) if v}
        self.levels = dict(self.caps)
        self.t: float | None = None
        self.count_rejected = count_rejected

    def _refill(self, now: float) -> None:
        if self.t is not None and now > self.t:
            for k in self.levels:
                self.levels[k] = min(self.caps[k], self.levels[k] + (now - self.t) * self.rates[k])
        self.t = now if self.t is None else max(self.t, now)

    def admit(self, tokens: int, now: float) -> tuple[bool, str | None, float | None]:
        """(admitted, why not: "requests" | "tokens" | "too_large", seconds until room)."""
        self._refill(now)
        if "tokens" in self.caps and tokens > self.caps["tokens"]:
            return False, "too_large", None
        need = {"requests": 1.0, "tokens": float(tokens)}
        waits = {k: (need[k] - self.levels[k]) / self.rates[k] for k in self.levels
                 if self.levels[k] < need[k]}
        if waits:
            if self.count_rejected and "requests" in self.levels:
                self.levels["requests"] = max(0.0, self.levels["requests"] - 1)
            why = max(waits, key=waits.get)
            return False, why, max(0.001, waits[why])
        for k in self.levels:
            self.levels[k] -= need[k]
        return True, None, None

    def headers(self, now: float) -> dict[str, str]:
        self._refill(now)
        out = {}
        for kind, limit in (("requests", self.rpm), ("tokens", self.tpm)):
            if not limit:
                continue
            level = self.levels[kind]
            out[f"x-ratelimit-limit-{kind}"] = str(int(limit))
            out[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(level)))
            out[f"x-ratelimit-reset-{kind}"] = go_duration(
                max(0.0, (self.caps[kind] - level) / self.rates[kind]))
        return out


def parse_limit_arg(spec: str) -> tuple[str, dict]:
    """``"judge=600/120000"`` -> ``("judge", {"rpm": 600, "tpm": 120000})``; ``-`` for none."""
    model, sep, rates = spec.partition("=")
    rpm, _, tpm = rates.partition("/")
    if not sep or not model:
        raise ValueError(f"bad limit {spec!r}; expected MODEL=RPM/TPM (- for none)")
    def val(x: str) -> float | None:
        return None if x.strip() in ("", "-") else float(x)

    return model.strip(), {"rpm": val(rpm), "tpm": val(tpm)}


# --------------------------------------------------------------------------- server

class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True          # handler threads never block interpreter exit
    block_on_close = False         # server_close() does not join hanging handlers
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return   # a client that went away (killed, or its timeout fired): nothing to say
        super().handle_error(request, client_address)


class FakeLLMServer:
    """In-process fake OpenAI-compatible server. See module docstring."""

    def __init__(self, latency: float = 0.0, faults: dict | None = None, seed: int = 0,
                 max_seconds: float | None = 600, responder: Responder | None = None, *,
                 port: int = 0, host: str = "127.0.0.1", retry_after: float = 1,
                 hang_seconds: float = 30.0, fault_first_n: int = 0,
                 fault_first_n_kind: str | list[str] = "500",
                 deterministic_faults_by_hash: bool = False,
                 fault_embeddings: bool = False, verbose: bool = False, keep_alive: bool = False,
                 batch_seconds: float = 0.0, batch_expire: bool = False,
                 batch_fail_first_n: int = 0, batch_api: bool = True,
                 limits: dict[str, dict] | None = None, window_s: float = 60.0,
                 rate_headers: bool = True, count_rejected: bool = True,
                 bucket_s: float | None = None, charge: str = "usage",
                 default_max_tokens: int = 4096):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("FakeLLMServer only binds to loopback")
        self.latency = float(latency)
        self.faults = normalise_faults(faults)
        self.seed = seed
        self.max_seconds = max_seconds
        self.responder = responder
        self.port = port
        self.host = "127.0.0.1" if host == "localhost" else host
        self.retry_after = retry_after
        self.hang_seconds = float(hang_seconds)
        self.fault_first_n = int(fault_first_n)
        kinds = [fault_first_n_kind] if isinstance(fault_first_n_kind, str) else list(fault_first_n_kind)
        self.fault_first_n_kinds = [_FAULT_ALIASES.get(k, k) for k in kinds]
        for k in self.fault_first_n_kinds:
            if k not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {k!r}")
        if self.fault_first_n and not self.fault_first_n_kinds:
            raise ValueError("fault_first_n needs at least one fault_first_n_kind")
        self.deterministic_faults_by_hash = deterministic_faults_by_hash
        self.fault_embeddings = fault_embeddings
        self.verbose = verbose
        # HTTP/1.1 keep-alive, as real providers speak (benchmarks); off by default so that
        # after stop() no connection lingers for the tests that stop a server mid-run
        self.keep_alive = keep_alive
        # batches: a batch finishes batch_seconds after it is created (checked when it is read);
        # batch_expire: it expires then instead, with only its first half of requests done;
        # batch_fail_first_n: that many requests of each batch fail (the error file says why)
        self.batch_seconds = float(batch_seconds)
        self.batch_expire = batch_expire
        self.batch_fail_first_n = int(batch_fail_first_n)
        self.batch_api = batch_api      # False: /v1/files and /v1/batches answer 404 (llama.cpp)
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        # rate limits: one sliding window per model (see the module docstring)
        self.limits = {m: {"rpm": v.get("rpm"), "tpm": v.get("tpm")}
                       for m, v in (limits or {}).items()}
        self.window_s = float(window_s)
        # bucket_s: continuous buckets holding that many seconds' worth instead of the window
        self.bucket_s = bucket_s
        # what a request is charged against the tokens limit: "usage" (the reply's usage) or
        # "estimate" (as hosted providers do on arrival: prompt characters / 4 + max_tokens,
        # default_max_tokens when the request sets none)
        if charge not in ("usage", "estimate"):
            raise ValueError(f"charge must be usage or estimate, not {charge!r}")
        self.charge, self.default_max_tokens = charge, int(default_max_tokens)
        self.rate_headers = rate_headers
        self.count_rejected = count_rejected
        self.windows: dict[str, RateWindow | RateBucket] = {}
        self.rate_stats: dict[str, dict[str, int]] = {}   # model -> requests, rejected, tokens

        self.counts: dict[str, int] = {}
        self.fault_counts: dict[str, int] = {}
        self.requests: list[dict] = []
        self.first_request_at: float | None = None
        self.last_request_at: float | None = None
        self.in_flight = 0        # POST requests being served now
        self.max_in_flight = 0    # the most ever served at once (a client's concurrency bound)
        self.base_url: str | None = None
        self.stopped = threading.Event()     # set once the server has fully stopped
        self.stopped_by_watchdog = False

        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)   # notified at every request
        self._stop_event = threading.Event()   # wakes sleeping/hanging handlers
        self._stop_lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Timer | None = None
        self._id_counter = 0

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> str:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        attrs: dict[str, Any] = {"fake": self}
        if self.keep_alive:
            attrs.update(protocol_version="HTTP/1.1", timeout=30, disable_nagle_algorithm=True)
        handler = type("_BoundHandler", (_Handler,), attrs)
        self._httpd = _HTTPServer((self.host, self.port), handler)
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-llm-server", daemon=True)
        self._thread.start()
        if self.max_seconds is not None and self.max_seconds > 0:
            self._watchdog = threading.Timer(self.max_seconds, self._watchdog_fire)
            self._watchdog.daemon = True
            self._watchdog.start()
        return self.base_url

    def _watchdog_fire(self) -> None:
        self.stopped_by_watchdog = True
        if self.verbose:
            print(f"fake_llm_server: watchdog stopping after {self.max_seconds}s",
                  file=sys.stderr, flush=True)
        self.stop()

    def stop(self) -> None:
        with self._stop_lock:
            if self._httpd is None or self.stopped.is_set():
                return
            self._stop_event.set()
            if self._watchdog is not None and threading.current_thread() is not self._watchdog:
                self._watchdog.cancel()
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(timeout=5)
            self.stopped.set()

    @property
    def running(self) -> bool:
        return self._httpd is not None and not self.stopped.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (e.g. by the watchdog)."""
        return self.stopped.wait(timeout)

    def __enter__(self) -> "FakeLLMServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- recording
    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.fault_counts.clear()
            self.requests.clear()
            self.max_in_flight = 0
            self.first_request_at = self.last_request_at = None
            self.windows.clear()
            self.rate_stats.clear()

    def _register(self, path: str, body: Any) -> tuple[str, int, float]:
        h = request_hash(body)
        now = time.time()
        with self._lock:
            attempt = self.counts.get(h, 0)
            self.counts[h] = attempt + 1
            if self.first_request_at is None:
                self.first_request_at = now
            self.last_request_at = now
            self.requests.append({"ts": now, "path": path, "hash": h, "attempt": attempt,
                                  "fault": None, "body": body})
            idx = len(self.requests) - 1
            self._arrived.notify_all()
        return h, attempt, idx

    def wait_for_requests(self, n: int, timeout: float) -> bool:
        """True once `n` requests have arrived, False if `timeout` seconds pass first: a
        caller waits for what the server saw instead of guessing a time."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= n, timeout)

    def _choose_fault(self, h: str, attempt: int) -> str | None:
        if attempt < self.fault_first_n:
            return self.fault_first_n_kinds[attempt % len(self.fault_first_n_kinds)]
        if not self.faults:
            return None
        if self.deterministic_faults_by_hash:
            key = f"{self.seed}:{h}:{attempt}".encode()
            r = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big")).random()
        else:
            with self._lock:
                r = self._rng.random()
        acc = 0.0
        for kind in FAULT_KINDS:
            acc += self.faults.get(kind, 0.0)
            if r < acc:
                return kind
        return None

    def _note_fault(self, idx: int, kind: str | None) -> None:
        if kind is None:
            return
        with self._lock:
            self.fault_counts[kind] = self.fault_counts.get(kind, 0) + 1
            if idx < len(self.requests):
                self.requests[idx]["fault"] = kind

    def window_for(self, model: str | None) -> RateWindow | RateBucket | None:
        lim = self.limits.get(model or "", self.limits.get("*"))
        if not lim or not (lim.get("rpm") or lim.get("tpm")):
            return None
        key = model or ""
        if key not in self.windows:
            self.windows[key] = (
                RateBucket(lim.get("rpm"), lim.get("tpm"), self.bucket_s, self.count_rejected)
                if self.bucket_s else
                RateWindow(lim.get("rpm"), lim.get("tpm"), self.window_s, self.count_rejected))
        return self.windows[key]

    def admit(self, idx: int, body: dict, tokens: int) -> tuple[bool, dict, str | None,
                                                                  float | None]:
        """Count one chat request against its model's window: (admitted, the headers for
        its reply, why not, Retry-After seconds)."""
        model = body.get("model") or ""
        with self._lock:
            win = self.window_for(model)
            st = self.rate_stats.setdefault(model, {"requests": 0, "rejected": 0, "tokens": 0})
            st["requests"] += 1
            if win is None:
                st["tokens"] += tokens
                return True, {}, None, None
            now = time.monotonic()
            ok, why, wait = win.admit(tokens, now)
            if ok:
                st["tokens"] += tokens
            else:
                st["rejected"] += 1
            headers = win.headers(now) if self.rate_headers else {}
            if idx < len(self.requests):
                self.requests[idx].update(model=model, tokens=tokens, status=200 if ok else 429)
        return ok, headers, why, wait

    def _next_id(self) -> str:
        with self._lock:
            self._id_counter += 1
            n = self._id_counter
        return f"chatcmpl-fake{n:08d}"

    def summary(self) -> dict:
        with self._lock:
            return {
                "base_url": self.base_url,
                "config": {"latency": self.latency, "faults": self.faults, "seed": self.seed,
                           "max_seconds": self.max_seconds, "retry_after": self.retry_after,
                           "hang_seconds": self.hang_seconds, "fault_first_n": self.fault_first_n,
                           "fault_first_n_kind": self.fault_first_n_kinds,
                           "deterministic_faults_by_hash": self.deterministic_faults_by_hash,
                           "limits": self.limits, "window_s": self.window_s},
                "rate_stats": {m: dict(v) for m, v in self.rate_stats.items()},
                "n_requests": len(self.requests),
                "max_in_flight": self.max_in_flight,
                "counts": dict(self.counts),
                "fault_counts": dict(self.fault_counts),
                "first_request_at": self.first_request_at,
                "last_request_at": self.last_request_at,
                "stopped_by_watchdog": self.stopped_by_watchdog,
                "requests": list(self.requests),
            }

    def dump(self, path: str) -> None:
        data = self.summary()
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, default=str)

    # ------------------------------------------------------------ files and batches
    def add_file(self, content: bytes, filename: str, purpose: str) -> dict:
        with self._lock:
            fid = f"file-fake{len(self.files) + 1:06d}"
            meta = {"id": fid, "object": "file", "bytes": len(content),
                    "created_at": int(time.time()), "filename": filename, "purpose": purpose,
                    "status": "processed", "status_details": None}
            self.files[fid] = {"meta": meta, "content": content}
        return meta

    def create_batch(self, body: dict) -> tuple[int, dict]:
        fid = body.get("input_file_id")
        if fid not in self.files:
            return 404, {"error": {"message": f"No such File object: {fid}",
                                   "type": "invalid_request_error", "code": "not_found"}}
        if body.get("endpoint") != "/v1/chat/completions":
            return 400, {"error": {"message": "endpoint must be /v1/chat/completions",
                                   "type": "invalid_request_error", "code": None}}
        lines = [json.loads(x) for x in self.files[fid]["content"].decode("utf-8").splitlines()
                 if x.strip()]
        now = int(time.time())
        with self._lock:
            bid = f"batch_fake{len(self.batches) + 1:06d}"
            batch = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                     "input_file_id": fid,
                     "completion_window": body.get("completion_window", "24h"),
                     "status": "in_progress", "output_file_id": None, "error_file_id": None,
                     "created_at": now, "in_progress_at": now, "expires_at": now + 86400,
                     "finalizing_at": None, "completed_at": None, "failed_at": None,
                     "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                     "metadata": body.get("metadata")}
            self.batches[bid] = {"batch": batch, "lines": lines,
                                 "due": time.monotonic() + self.batch_seconds}
        return 200, batch

    def make_batches_due(self) -> int:
        """Every batch created so far is due now (a test's clock, instead of waiting out
        batch_seconds); the number made due. A batch does its requests when next read."""
        with self._lock:
            n = 0
            for entry in self.batches.values():
                if entry["batch"]["status"] == "in_progress":
                    entry["due"] = time.monotonic()
                    n += 1
            return n

    def read_batch(self, bid: str) -> dict | None:
        """The batch as it is now: it does its requests once it is due."""
        entry = self.batches.get(bid)
        if entry is None:
            return None
        batch = entry["batch"]
        if batch["status"] == "in_progress" and time.monotonic() >= entry["due"]:
            self._finish_batch(entry)
        return batch

    def _finish_batch(self, entry: dict) -> None:
        batch, lines = entry["batch"], entry["lines"]
        n_do = (len(lines) + 1) // 2 if self.batch_expire else len(lines)
        out, err = [], []
        for i, line in enumerate(lines):
            cid, body = line.get("custom_id"), line.get("body") or {}
            if i >= n_do:
                err.append({"id": f"batch_req_{i}", "custom_id": cid, "response": None,
                            "error": {"code": "batch_expired", "message": "This request could "
                                      "not be executed before the completion window expired."}})
                continue
            h, attempt, idx = self._register("/batch" + line.get("url", ""), body)
            if i < self.batch_fail_first_n:
                err.append({"id": f"batch_req_{i}", "custom_id": cid, "response": {
                    "status_code": 500, "request_id": f"req_{i}", "body": {"error": {
                        "message": "The server had an error (injected fault).",
                        "type": "server_error", "code": "internal_error"}}}, "error": None})
                continue
            reply = self.completion(body, self.content_for(body))
            out.append({"id": f"batch_req_{i}", "custom_id": cid, "response": {
                "status_code": 200, "request_id": f"req_{i}", "body": reply}, "error": None})
        now = int(time.time())
        for rows, key in ((out, "output_file_id"), (err, "error_file_id")):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
                batch[key] = self.add_file(data, f"{batch['id']}_{key}.jsonl",
                                           "batch_output")["id"]
        batch["request_counts"] = {"total": len(lines), "completed": len(out),
                                   "failed": len(err)}
        if self.batch_expire:
            batch.update(status="expired", expired_at=now)
        else:
            batch.update(status="completed", finalizing_at=now, completed_at=now)

    # ------------------------------------------------------------ replies
    def content_for(self, body: dict, fault: str | None = None) -> str:
        """The reply text for a chat request (a responder's dict replies are HTTP-only)."""
        if fault == "empty":
            return ""
        if fault == "truncated_json":
            js = json_reply_for(body) or {"verdict": "A", "reasoning": "truncated by fake server"}
            full = json.dumps(js, separators=(",", ":"))
            return full[: max(1, len(full) // 2)]
        if self.responder is not None:
            out = self.responder(body)
            return "" if out is None or isinstance(out, dict) else str(out)
        return default_content(body)

    @staticmethod
    def usage_of(body: dict, content: str) -> tuple[int, int]:
        """(prompt tokens, completion tokens) as the reply reports them: words."""
        prompt_tokens = sum(_word_count(_text_of(m.get("content"))) for m in
                            body.get("messages") or [] if isinstance(m, dict))
        return prompt_tokens, _word_count(content) * max(1, int(body.get("n") or 1))

    def charge_of(self, body: dict, content: str) -> int:
        """What a request counts against its model's tokens limit (see `charge`)."""
        if self.charge == "usage":
            return sum(self.usage_of(body, content))
        chars = sum(len(_text_of(m.get("content"))) for m in body.get("messages") or []
                    if isinstance(m, dict))
        out = body.get("max_completion_tokens") or body.get("max_tokens")
        return math.ceil(chars / 4) + int(out or self.default_max_tokens)

    def plain_content(self, body: dict) -> str | None:
        """The reply text, or None when the responder answers with a raw HTTP reply."""
        if self.responder is not None:
            out = self.responder(body)
            return None if isinstance(out, dict) else ("" if out is None else str(out))
        return default_content(body)

    def completion(self, body: dict, content: str) -> dict:
        prompt_tokens, completion_tokens = self.usage_of(body, content)
        n = max(1, int(body.get("n") or 1))
        return {"id": self._next_id(), "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model") or "fake", "system_fingerprint": SYSTEM_FINGERPRINT,
                "choices": [{"index": i, "message": {"role": "assistant", "content": content},
                             "logprobs": None, "finish_reason": "stop"} for i in range(n)],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    # ------------------------------------------------------------ sleep helpers
    def _sleep(self, seconds: float) -> bool:
        """Sleep, waking early on stop. True if the server is stopping."""
        if seconds <= 0:
            return self._stop_event.is_set()
        return self._stop_event.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer            # set on the per-server subclass
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after stop
    server_version = "FakeLLM/1.0"

    def log_message(self, fmt: str, *args: Any) -> None:  # noqa: D401
        if self.fake.verbose:
            sys.stderr.write("fake_llm_server: " + (fmt % args) + "\n")

    # ---------------------------------------------------------------- plumbing
    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/v1/"):
            path = path[3:]
        elif path == "/v1":
            path = ""
        return path

    def _send(self, status: int, payload: Any, headers: dict | None = None,
              content_type: str = "application/json") -> None:
        if isinstance(payload, (bytes, bytearray)):
            data = bytes(payload)
        elif isinstance(payload, str):
            data = payload.encode("utf-8")
        else:
            data = json.dumps(payload).encode("utf-8")
        if self._await_latency():
            return  # stopping: drop the connection
        headers = {**getattr(self, "_rate_headers", {}), **(headers or {})}
        self._rate_headers = {}
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            pass  # client gave up (e.g. its timeout fired)

    def _await_latency(self) -> bool:
        """Hold the first byte of a reply until arrival + latency. True if the server is stopping."""
        arrived, self._arrived = getattr(self, "_arrived", None), None
        if arrived is None:
            return False
        return self.fake._sleep(self.fake.latency - (time.monotonic() - arrived))

    def _error(self, status: int, message: str, etype: str, code: str | None = None,
               headers: dict | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": etype, "param": None,
                                      "code": code}}, headers)

    def _read_body(self) -> tuple[Any, str | None]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            return (json.loads(raw.decode("utf-8")) if raw else {}), None
        except (ValueError, UnicodeDecodeError) as e:
            return None, f"request body is not valid JSON: {e}"

    # ---------------------------------------------------------------- GET
    def do_GET(self) -> None:
        route = self._route()
        if route == "/models":
            self._send(200, {"object": "list", "data": [
                {"id": "fake", "object": "model", "created": 0, "owned_by": "fake-llm-server"}]})
        elif route.startswith("/models/"):
            mid = route[len("/models/"):]
            self._send(200, {"id": mid, "object": "model", "created": 0,
                             "owned_by": "fake-llm-server"})
        elif not self.fake.batch_api and route.split("/")[1] in ("files", "batches"):
            self._error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")
        elif route == "/batches":
            batches = [e["batch"] for e in self.fake.batches.values()]
            self._send(200, {"object": "list", "data": batches[::-1][:20], "has_more": False,
                             "first_id": None, "last_id": None})
        elif route.startswith("/files/") or route.startswith("/batches/"):
            self._get_file_or_batch(route)
        elif route in ("", "/health", "/healthz"):
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")

    def _get_file_or_batch(self, route: str) -> None:
        fake = self.fake
        parts = route.strip("/").split("/")
        if parts[0] == "batches" and len(parts) == 2:
            batch = fake.read_batch(parts[1])
            if batch is not None:
                self._send(200, batch)
                return
        elif parts[0] == "files" and parts[1] in fake.files and len(parts) in (2, 3):
            f = fake.files[parts[1]]
            if len(parts) == 2:
                self._send(200, f["meta"])
                return
            if parts[2] == "content":
                self._send(200, f["content"], content_type="application/octet-stream")
                return
        self._error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")

    def _upload(self) -> None:
        """POST /v1/files: a multipart form with `purpose` and `file`."""
        from email.parser import BytesParser
        from email.policy import HTTP

        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        head = f"Content-Type: {self.headers.get('Content-Type', '')}\r\n\r\n".encode()
        msg = BytesParser(policy=HTTP).parsebytes(head + raw)
        fields = {}
        for part in msg.iter_parts() if msg.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            fields[name] = (part.get_filename(), part.get_payload(decode=True))
        if "file" not in fields:
            self._error(400, "a multipart form with a file is required",
                        "invalid_request_error", None)
            return
        purpose = (fields.get("purpose") or (None, b"batch"))[1].decode("utf-8")
        self._send(200, self.fake.add_file(fields["file"][1], fields["file"][0] or "upload",
                                           purpose))

    # ---------------------------------------------------------------- POST
    def do_POST(self) -> None:
        fake = self.fake
        with fake._lock:
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            self._post()
        finally:
            with fake._lock:
                fake.in_flight -= 1

    def _post(self) -> None:
        self._arrived = time.monotonic()  # latency counts from here: replies leave at arrival + L
        route = self._route()
        if route in ("/files", "/batches") and not self.fake.batch_api:
            self._arrived = None
            self._read_body()
            self._error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")
            return
        if route == "/files":
            self._arrived = None
            self._upload()
            return
        if route == "/batches":
            self._arrived = None
            body, err = self._read_body()
            status, payload = (400, {"error": {"message": err or "a JSON object is required",
                                               "type": "invalid_request_error", "code": None}}) \
                if err or not isinstance(body, dict) else self.fake.create_batch(body)
            self._send(status, payload)
            return
        if route not in ("/chat/completions", "/embeddings"):
            self._arrived = None
            self._read_body()
            self._error(404, f"unknown path {self.path}", "invalid_request_error", "not_found")
            return
        body, err = self._read_body()
        if err is not None or not isinstance(body, dict):
            self._arrived = None
            self._error(400, err or "request body must be a JSON object",
                        "invalid_request_error", "invalid_json")
            return
        fake = self.fake
        h, attempt, idx = fake._register(route, body)
        is_chat = route == "/chat/completions"
        content = None
        if is_chat and fake.limits:
            content = fake.plain_content(body)   # its usage is what the model's window counts
            ok, self._rate_headers, why, wait = fake.admit(
                idx, body, fake.charge_of(body, content or ""))
            if not ok:
                self._send_rate_limited(body, why, wait)
                return
        fault = fake._choose_fault(h, attempt) if (is_chat or fake.fault_embeddings) else None
        fake._note_fault(idx, fault)

        if fault is None or fault in ("empty", "truncated_json"):
            if is_chat:
                self._chat(body, fault, content)
            else:
                self._embeddings(body)
            return
        if self._await_latency():
            return  # stopping: drop the connection
        if fault == "timeout":
            if fake._sleep(fake.hang_seconds):
                return
        if fault in ("429", "500", "503"):
            self._send_http_fault(fault)
            return
        if fault == "malformed":
            self._send(200, b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"mess')

    def _send_rate_limited(self, body: dict, why: str | None, wait: float | None) -> None:
        model = body.get("model") or "fake"
        win = self.fake.window_for(model)
        if why == "too_large":
            assert win is not None and win.tpm is not None
            self._error(429, f"Request too large for {model} on tokens per min (TPM): Limit "
                             f"{int(win.tpm)}. The input or output tokens must be reduced.",
                        "tokens", "rate_limit_exceeded")
            return
        kind = "requests per min (RPM)" if why == "requests" else "tokens per min (TPM)"
        limit = win.rpm if why == "requests" else win.tpm
        wait = float(wait or 0.001)
        self._error(429, f"Rate limit reached for {model} on {kind}: Limit {int(limit)}. "
                         f"Please try again in {go_duration(wait)}.", why or "requests",
                    "rate_limit_exceeded",
                    {"Retry-After": f"{wait:.3f}",
                     "retry-after-ms": str(max(1, round(wait * 1000)))})

    def _send_http_fault(self, kind: str) -> None:
        if kind == "429":
            ra = self.fake.retry_after
            ra_txt = str(int(ra)) if float(ra).is_integer() else repr(float(ra))
            self._error(429, "Rate limit reached for fake model (injected fault).",
                        "rate_limit_error", "rate_limit_exceeded",
                        {"Retry-After": ra_txt, "retry-after-ms": str(int(float(ra) * 1000))})
        elif kind == "500":
            self._error(500, "The server had an error while processing your request (injected fault).",
                        "server_error", "internal_error")
        else:
            self._error(503, "The engine is currently overloaded (injected fault).",
                        "server_error", "service_unavailable")

    # ---------------------------------------------------------------- chat
    def _chat(self, body: dict, fault: str | None, content: str | None = None) -> None:
        fake = self.fake
        if fault is None and content is not None:
            pass   # computed when the request was counted against its window
        elif fault is None and fake.responder is not None:
            out = fake.responder(body)
            if isinstance(out, dict):
                status = int(out.get("status", 200))
                payload = out.get("body", "")
                ctype = out.get("content_type", "application/json")
                self._send(status, payload, out.get("headers"), ctype)
                return
            content = "" if out is None else str(out)
        else:
            content = fake.content_for(body, fault)
        reply = fake.completion(body, content)
        if body.get("stream"):
            self._stream(reply["id"], reply["created"], reply["model"], content,
                         len(reply["choices"]), reply["usage"], body)
            return
        self._send(200, reply)

    def _stream(self, cid: str, created: int, model: str, content: str, n: int,
                usage: dict, body: dict) -> None:
        def chunk(delta: dict, finish: str | None, i: int = 0, with_usage: bool = False) -> bytes:
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "system_fingerprint": SYSTEM_FINGERPRINT,
                   "choices": [{"index": i, "delta": delta, "logprobs": None,
                                "finish_reason": finish}]}
            if with_usage:
                obj["choices"] = []
                obj["usage"] = usage
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        if self._await_latency():
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for i in range(n):
                self.wfile.write(chunk({"role": "assistant", "content": ""}, None, i))
                words = re.findall(r"\S+\s*", content) or ([content] if content else [])
                for w in words:
                    self.wfile.write(chunk({"content": w}, None, i))
                self.wfile.write(chunk({}, "stop", i))
            if (body.get("stream_options") or {}).get("include_usage"):
                self.wfile.write(chunk({}, None, 0, with_usage=True))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            pass

    # ---------------------------------------------------------------- embeddings
    def _embeddings(self, body: dict) -> None:
        inp = body.get("input", "")
        items = inp if isinstance(inp, list) and (not inp or not isinstance(inp[0], int)) else [inp]
        dim = int(body.get("dimensions") or EMBEDDING_DIM)
        as_b64 = body.get("encoding_format") == "base64"
        data, tokens = [], 0
        for i, item in enumerate(items):
            text = item if isinstance(item, str) else json.dumps(item)
            tokens += _word_count(text) if isinstance(item, str) else len(item)
            vec = fake_embedding(text, dim)
            emb: Any = (base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
                        if as_b64 else vec)
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self._send(200, {"object": "list", "data": data, "model": body.get("model") or "fake",
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


# --------------------------------------------------------------------------- CLI

def build_arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="OpenAI-compatible fake LLM server (loopback only).")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = pick a free one)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each reply")
    p.add_argument("--fault-rate", type=float, default=0.0,
                   help="total fault rate, spread evenly over all fault kinds")
    p.add_argument("--faults", default="",
                   help="explicit per-kind rates, e.g. 429=0.1,500=0.05,timeout=0.02 "
                        f"(kinds: {', '.join(FAULT_KINDS)}); overrides --fault-rate")
    p.add_argument("--fault-kinds", default=",".join(FAULT_KINDS),
                   help="kinds that --fault-rate is spread over (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=600,
                   help="watchdog: stop after this many seconds (0 = never)")
    p.add_argument("--retry-after", type=float, default=1, help="Retry-After seconds on 429")
    p.add_argument("--hang-seconds", type=float, default=30.0, help="sleep for 'timeout' faults")
    p.add_argument("--fault-first-n", type=int, default=0,
                   help="fail the first N attempts of every request hash")
    p.add_argument("--fault-first-n-kind", default="500",
                   help="kind(s) for --fault-first-n; comma list cycles per attempt")
    p.add_argument("--deterministic-faults-by-hash", action="store_true",
                   help="fault decision depends only on (seed, request hash, attempt)")
    p.add_argument("--fault-embeddings", action="store_true",
                   help="also inject faults on /v1/embeddings")
    p.add_argument("--batch-seconds", type=float, default=0.0,
                   help="a batch finishes this long after it is created")
    p.add_argument("--batch-expire", action="store_true",
                   help="batches expire instead, with half their requests done")
    p.add_argument("--batch-fail-first-n", type=int, default=0,
                   help="fail this many requests of each batch (500 in its error file)")
    p.add_argument("--limit", action="append", default=[], metavar="MODEL=RPM/TPM",
                   help="a model's requests and tokens per minute, e.g. judge=600/120000 "
                        "(- for none, * for every other model); repeatable")
    p.add_argument("--window-s", type=float, default=60.0,
                   help="the rate window in seconds (limits stay per minute; shorter: a "
                        "time-scaled provider)")
    p.add_argument("--bucket-s", type=float, default=None,
                   help="enforce limits as continuous buckets holding this many seconds' "
                        "worth (as hosted providers do) instead of the window")
    p.add_argument("--charge", choices=("usage", "estimate"), default="usage",
                   help="tokens a request counts: its usage, or (estimate) prompt characters "
                        "/ 4 + max_tokens on arrival, as hosted providers do")
    p.add_argument("--default-max-tokens", type=int, default=4096,
                   help="what --charge estimate counts for a request without max_tokens")
    p.add_argument("--no-rate-headers", action="store_true",
                   help="send no x-ratelimit-* headers (429s keep their Retry-After)")
    p.add_argument("--dump", default=None, help="write counts and requests as JSON here on exit")
    p.add_argument("--verbose", action="store_true", help="log requests to stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    if args.faults:
        faults = parse_faults_arg(args.faults)
    elif args.fault_rate > 0:
        kinds = [k.strip() for k in args.fault_kinds.split(",") if k.strip()]
        faults = normalise_faults({k: args.fault_rate / len(kinds) for k in kinds})
    else:
        faults = {}
    srv = FakeLLMServer(latency=args.latency, faults=faults, seed=args.seed,
                        max_seconds=args.max_seconds or None, port=args.port,
                        retry_after=args.retry_after, hang_seconds=args.hang_seconds,
                        fault_first_n=args.fault_first_n,
                        fault_first_n_kind=[k.strip() for k in args.fault_first_n_kind.split(",")
                                            if k.strip()],
                        deterministic_faults_by_hash=args.deterministic_faults_by_hash,
                        fault_embeddings=args.fault_embeddings, verbose=args.verbose,
                        batch_seconds=args.batch_seconds, batch_expire=args.batch_expire,
                        batch_fail_first_n=args.batch_fail_first_n,
                        limits=dict(parse_limit_arg(x) for x in args.limit),
                        window_s=args.window_s, rate_headers=not args.no_rate_headers,
                        bucket_s=args.bucket_s, charge=args.charge,
                        default_max_tokens=args.default_max_tokens)

    stop_asked = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        stop_asked.set()
        threading.Thread(target=srv.stop, daemon=True).start()

    # the handlers go in before the URL is printed: a caller that reads the URL and then
    # sends SIGTERM at once still gets the dump (it used to race the handler's install)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    base_url = srv.start()
    print(f"listening on {base_url}", flush=True)
    try:
        while not srv.wait(0.2) and not stop_asked.is_set():
            pass
    finally:
        srv.stop()
        if args.dump:
            srv.dump(args.dump)
        if args.verbose:
            print(f"fake_llm_server: stopped after {len(srv.requests)} requests",
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
