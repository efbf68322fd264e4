"""The LLM gateway: the ONLY module that imports litellm.

Retries, backoff, the response cache and the call log live here rather than in
litellm (its own retries and caches were unreliable in checks), so that a
repeated or resumed run makes no provider call for work already finished, and
every attempt leaves a row in `llm_calls`. API keys come from the environment at
call time and are never stored or logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import UserError
from ..models import ModelSpec

_IMPORT_LOCK = threading.Lock()
_LITELLM = None
_PRELOAD: threading.Thread | None = None
_LOCAL_REGISTERED = False
_TEST_PROVIDERS: dict[str, Callable[[list[dict], dict], Any]] = {}

LOCAL_PREFIX = "local/"


def _setup_env() -> None:
    # Before `import litellm`: no price-map fetch from the internet, no .env loading.
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")


def preload() -> None:
    """Start importing litellm in the background (it takes seconds) while other work runs."""
    global _PRELOAD
    with _IMPORT_LOCK:
        if _LITELLM is None and _PRELOAD is None:
            from ..background import start

            _PRELOAD = start(_import_and_warm, "litellm-import")


def _import_and_warm() -> None:
    """Import litellm, then let it import what its first call would (~0.3 s of lazy imports)
    before the first real request, so that the first requests are not held up by it."""
    litellm = _litellm()
    from ..gcpause import gc_paused

    # a warm-up only (the real call reports any real problem): a mock response, so no network,
    # no provider, nothing cached or logged by abtest
    with gc_paused(freeze=True), contextlib.suppress(Exception):
        litellm.completion(model="openai/abtest-warmup", api_base="http://127.0.0.1:9/v1",
                           api_key="sk-no-key", messages=[{"role": "user", "content": "warm-up"}],
                           mock_response="ok", max_tokens=1)
        for mod in ("litellm._service_logger", "litellm.proxy.spend_tracking.savings"):
            __import__(mod)


def _litellm():
    global _LITELLM
    if _LITELLM is not None:
        return _LITELLM
    with _IMPORT_LOCK:
        if _LITELLM is None:
            _setup_env()
            from ..gcpause import gc_paused

            # litellm allocates hundreds of thousands of long-lived objects at import: the cyclic
            # collector re-scanning them costs ~1.2 s during the import and ~1.3 s again at
            # interpreter exit, so it is paused for the import and the result frozen.
            with gc_paused(freeze=True):
                import litellm
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            litellm.drop_params = True
            _install_client_session(litellm)
            _LITELLM = litellm
    return _LITELLM


# --- concurrency on the wire ---------------------------------------------------------------
# A gateway's `concurrency` bounds provider requests in flight. Where litellm sends a call
# through the OpenAI SDK (OpenAI and every OpenAI-compatible server), the slot is held only
# while the request is on the wire: litellm's own CPU work before and after (request
# building, response parsing, cost lookup) and abtest's store writes then overlap with other
# requests instead of lengthening every slot. Calls that do not pass through this transport
# (other SDK paths, custom providers, a user-supplied `litellm.client_session`, a proxy)
# hold a slot for the whole call, as before.
_TLS = threading.local()


class _LoopHolder:
    """Closes a thread's event loop when the thread ends (its thread-locals are dropped)."""

    def __init__(self, loop):
        self.loop = loop

    def __del__(self):
        if self.loop is not None and not self.loop.is_running():
            self.loop.close()


def _thread_event_loop() -> None:
    """Give the calling thread an event loop once.

    litellm times every sync call with a hook that, on a thread without an event loop, runs
    asyncio.run(): a new loop per call (~0.15 ms, an epoll instance and a socket pair each).
    With one loop per thread it reuses that loop instead.
    """
    if getattr(_TLS, "loop", None) is not None:
        return
    import asyncio

    _TLS.loop = _LoopHolder(None)
    if threading.current_thread() is threading.main_thread():
        return  # asyncio keeps one loop for the main thread already
    try:
        asyncio.get_event_loop_policy().get_event_loop()
        return  # the thread has a loop (or runs one): litellm uses it
    except RuntimeError:
        pass
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    _TLS.loop = _LoopHolder(loop)
_SESSION_OURS = False


@dataclass
class _Wire:
    """Per-call state shared between the gateway and the transport (same thread)."""

    slot: threading.BoundedSemaphore | None  # None: the caller already holds a slot
    seen: bool = False
    wire_ms: float | None = None


def _install_client_session(litellm) -> None:
    global _SESSION_OURS
    if litellm.client_session is not None:
        return
    import httpx
    from litellm.llms.custom_httpx.http_handler import get_ssl_configuration, http2_enabled

    class _ReleasingStream(httpx.SyncByteStream):
        def __init__(self, inner, release):
            self._inner, self._release = inner, release

        def __iter__(self):
            yield from self._inner

        def close(self):
            try:
                self._inner.close()
            finally:
                self._release()

    class SlotTransport(httpx.BaseTransport):
        def __init__(self, inner: httpx.BaseTransport):
            self._inner = inner

        def handle_request(self, request):
            wire = getattr(_TLS, "wire", None)
            if wire is None:  # not a gateway call (embeddings, reranking): no slot
                return self._inner.handle_request(request)
            wire.seen = True
            if wire.slot is not None:
                wire.slot.acquire()
            t0 = time.monotonic()
            once = threading.Lock()
            done = [False]

            def release():
                with once:
                    if done[0]:
                        return
                    done[0] = True
                wire.wire_ms = (time.monotonic() - t0) * 1000
                if wire.slot is not None:
                    wire.slot.release()

            try:
                resp = self._inner.handle_request(request)
            except BaseException:
                release()
                raise
            # the slot is released when the body has been read (httpx closes the stream then)
            return httpx.Response(resp.status_code, headers=resp.headers,
                                  stream=_ReleasingStream(resp.stream, release),
                                  extensions=resp.extensions)

        def close(self):
            self._inner.close()

    verify = get_ssl_configuration()
    http2 = http2_enabled()
    litellm.client_session = httpx.Client(
        transport=SlotTransport(httpx.HTTPTransport(verify=verify, http2=http2)),
        verify=verify, follow_redirects=True)
    _SESSION_OURS = True


def _make_handler(chat_fn: Callable[[dict], dict]):
    """A litellm CustomLLM that forwards an OpenAI-shaped request dict to chat_fn."""
    litellm = _litellm()

    class Handler(litellm.CustomLLM):
        def completion(self, model, messages, *args, **kwargs):
            params = dict(kwargs.get("optional_params") or {})
            req = {"model": model, "messages": messages, **params}
            out = chat_fn(req)
            return litellm.ModelResponse(**out)

        async def acompletion(self, model, messages, *args, **kwargs):
            import asyncio

            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return Handler()


def _register_providers() -> None:
    litellm = _litellm()
    global _LOCAL_REGISTERED
    entries = []
    if not _LOCAL_REGISTERED:
        from . import embedded as local_model

        entries.append({"provider": "local", "custom_handler": _make_handler(local_model.chat)})
        _LOCAL_REGISTERED = True
    for name, fn in _TEST_PROVIDERS.items():
        if not any(e.get("provider") == name for e in litellm.custom_provider_map):
            entries.append({"provider": name, "custom_handler": _make_handler(_scripted(fn))})
    if entries:
        litellm.custom_provider_map = [*litellm.custom_provider_map, *entries]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()


def _scripted(fn: Callable[[list[dict], dict], Any]) -> Callable[[dict], dict]:
    def chat(req: dict) -> dict:
        out = fn(req["messages"], req)
        if isinstance(out, Exception):
            raise out
        if isinstance(out, dict) and "choices" in out:
            return out
        text = out if isinstance(out, str) else json.dumps(out)
        words = sum(len(str(m.get("content", "")).split()) for m in req["messages"])
        return {"id": "scripted", "object": "chat.completion", "created": 0,
                "model": req["model"], "system_fingerprint": "scripted-1",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": words, "completion_tokens": len(text.split()),
                          "total_tokens": words + len(text.split())}}
    return chat


def register_scripted_provider(name: str, fn: Callable[[list[dict], dict], Any]) -> None:
    """Register an in-process provider `name/...` (tests, demos): the real litellm path runs."""
    _TEST_PROVIDERS[name] = fn
    if _LITELLM is not None:
        litellm = _LITELLM
        litellm.custom_provider_map = [e for e in litellm.custom_provider_map
                                       if e.get("provider") != name]
        litellm.custom_provider_map.append({"provider": name,
                                            "custom_handler": _make_handler(_scripted(fn))})
        from litellm.utils import custom_llm_setup

        custom_llm_setup()


def canonical_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode("utf-8")).hexdigest()


def call_hash(spec: ModelSpec, messages: list[dict], *, response_format: dict | None = None,
              sample: int = 0, max_tokens: int | None = None) -> str:
    """Cache key: everything that can change the answer, nothing secret."""
    return canonical_hash({
        "model": spec.model, "api_base": spec.api_base, "messages": messages,
        "temperature": spec.temperature, "max_tokens": max_tokens or spec.max_tokens,
        "seed": spec.seed, "response_format": response_format, "sample": sample,
        "extra": spec.extra})


def check_credentials(spec: ModelSpec, *, where: str) -> None:
    """Fail before the first call when a model cannot answer: a remote model's key is
    missing, or the embedded model's weights or runtime are not installed (otherwise every
    case would fail on its own, and the run would end incomplete instead of saying why)."""
    if spec.model.startswith(LOCAL_PREFIX):
        from . import embedded

        embedded.preflight(where)
    if spec.api_key_env and not os.environ.get(spec.api_key_env):
        raise UserError(f"environment variable {spec.api_key_env} is not set (API key for model "
                        f"{spec.model})", field=f"{where}.api_key_env")


def provider_keys_missing(spec: ModelSpec) -> list[str]:
    """The provider's key variables litellm looks for and does not find (no api_key_env, no
    api_base: a hosted provider); names only, never values."""
    if spec.model.startswith(LOCAL_PREFIX) or spec.api_key_env or spec.api_base:
        return []
    if spec.model.split("/", 1)[0] in _TEST_PROVIDERS:
        return []
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints a provider list
            found = _litellm().validate_environment(model=spec.model)
    except Exception:  # an unknown provider: litellm cannot say, the call will
        return []
    return [k for k in found.get("missing_keys") or [] if k.endswith("_KEY") or "TOKEN" in k]


@dataclass
class LLMResult:
    content: str | None
    error: str | None = None
    model_resolved: str | None = None
    system_fingerprint: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    latency_ms: float | None = None
    cached: bool = False
    model_detail: str | None = None  # what the provider said when model_resolved shortens it
    call_hash: str = ""
    attempts: int = 0
    retryable: bool = False
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.content is not None


@dataclass
class GatewayStats:
    provider_calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    first_request: float | None = None
    last_response: float | None = None
    by_purpose: dict[str, int] = field(default_factory=dict)


class ModelDriftError(Exception):
    """The resolved model changed under a run: the comparison would not be like for like."""


class Gateway:
    """Concurrency-limited, retrying, caching access to any litellm model."""

    def __init__(self, store, *, concurrency: int = 8, timeout_s: float = 120, max_retries: int = 6,
                 backoff_base_s: float = 0.5, backoff_max_s: float = 30.0, run_id: str | None = None,
                 pinned: dict[str, str] | None = None, budget=None, batch=None):
        self.store = store
        self.batch = batch    # llm.batch.BatchQueue: calls it takes wait for a provider batch
        self.budget = budget  # llm.budget.Budget: every provider attempt is held against it
        self.sem = threading.BoundedSemaphore(concurrency)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.run_id = run_id
        self.stats = GatewayStats()
        self._stats_lock = threading.Lock()
        self.pinned: dict[str, str] = dict(pinned or {})
        self._rng = random.Random(0)
        self._inflight: dict[str, threading.Event] = {}
        # calls whose requests pass through the wire-level slot may prepare and finish outside
        # it; this bounds them too, so at most 2 x concurrency calls are sent-but-unsaved
        self.workers = threading.BoundedSemaphore(2 * concurrency)
        self._on_wire: set[tuple[str, str | None]] = set()

    # -- public -----------------------------------------------------------
    def complete(self, spec: ModelSpec, messages: list[dict], *, purpose: str,
                 case_id: str | None = None, sample: int = 0, response_format: dict | None = None,
                 max_tokens: int | None = None) -> LLMResult:
        h = call_hash(spec, messages, response_format=response_format, sample=sample,
                      max_tokens=max_tokens)
        # single flight: an identical call already in flight is waited for, not repeated
        with self._stats_lock:
            leader = h not in self._inflight
            if leader:
                self._inflight[h] = threading.Event()
            event = self._inflight[h]
        if not leader:
            event.wait()
        try:
            return self._complete(spec, messages, h, purpose=purpose, case_id=case_id,
                                  response_format=response_format, max_tokens=max_tokens)
        finally:
            if leader:
                with self._stats_lock:
                    self._inflight.pop(h, None)
                event.set()

    def _complete(self, spec, messages, h, *, purpose, case_id, response_format,
                  max_tokens) -> LLMResult:
        hit = self.store.cached_response(h) if self.store is not None else None
        if hit is not None:
            self._pin(spec.model, hit["model_resolved"])
            res = LLMResult(content=hit["content"], model_resolved=hit["model_resolved"],
                            system_fingerprint=hit["system_fingerprint"],
                            prompt_tokens=hit["prompt_tokens"],
                            completion_tokens=hit["completion_tokens"], cost=hit["cost"],
                            latency_ms=hit["latency_ms"], cached=True, call_hash=h)
            self._log(res, spec, purpose, case_id, attempt=0)
            with self._stats_lock:
                self.stats.cache_hits += 1
            return res
        if self.batch is not None and self.batch.takes(spec, h):
            self._defer(spec, messages, h, purpose, case_id, response_format, max_tokens)
        return self._call_with_retries(spec, messages, h, purpose=purpose, case_id=case_id,
                                       response_format=response_format, max_tokens=max_tokens)

    def _defer(self, spec, messages, h, purpose, case_id, response_format, max_tokens):
        """Queue the call for this pass's batch (its worst case held against the budget)."""
        from .batch import Deferred, Request, request_body

        if not self.batch.has(h):
            kw = self._kwargs(spec, messages, response_format, max_tokens)
            if self.budget is not None:   # held until the pass ends: the batch may cost it
                self.budget.reserve(spec, kw["messages"], kw["max_tokens"])
            self.batch.add(Request(h, spec, request_body(spec, kw), purpose, case_id))
        raise Deferred(h)

    # -- internals ----------------------------------------------------------
    def _pin(self, requested: str, resolved: str | None) -> None:
        if not resolved:
            return
        with self._stats_lock:
            prev = self.pinned.setdefault(requested, resolved)
        if prev != resolved:
            raise ModelDriftError(f"model version drift: {requested} resolved to {prev!r} and then "
                                  f"to {resolved!r}; the comparison would not be like for like")

    pin = _pin   # batch collection pins what a batch answered, as a single call does

    def call_rows(self, res: LLMResult, spec: ModelSpec, purpose: str, case_id: str | None,
                  attempt: int) -> tuple[dict, dict | None]:
        """The call's llm_calls row, and its response_cache row when it succeeded."""
        row = {"call_hash": res.call_hash, "run_id": self.run_id, "purpose": purpose,
               "case_id": case_id, "model_requested": spec.model,
               "model_resolved": res.model_resolved, "system_fingerprint": res.system_fingerprint,
               "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
               "cost": res.cost, "latency_ms": res.latency_ms, "error": res.error,
               "attempt": attempt, "cached": res.cached, "model_detail": res.model_detail}
        cache = None
        if res.error is None and not res.cached:
            cache = {"call_hash": res.call_hash, "model_requested": spec.model,
                     "model_resolved": res.model_resolved,
                     "system_fingerprint": res.system_fingerprint, "content": res.content,
                     "prompt_tokens": res.prompt_tokens,
                     "completion_tokens": res.completion_tokens, "cost": res.cost,
                     "latency_ms": res.latency_ms}
        return row, cache

    def _log(self, res: LLMResult, spec: ModelSpec, purpose: str, case_id: str | None,
             attempt: int) -> None:
        if self.store is None:
            return
        row, cache = self.call_rows(res, spec, purpose, case_id, attempt)
        self.store.log_call(row, cache=cache)

    def _kwargs(self, spec: ModelSpec, messages, response_format, max_tokens) -> dict:
        kw = _aux_kwargs(spec, self.timeout_s)
        kw.update({"messages": messages, "temperature": spec.temperature,
                   "max_tokens": max_tokens or spec.max_tokens, "max_retries": 0, "num_retries": 0})
        if spec.seed is not None:
            kw["seed"] = spec.seed
        if response_format is not None:
            kw["response_format"] = response_format
        kw.update(spec.extra)
        return kw

    def _attempt(self, litellm, spec, kw, h, purpose, case_id, attempt_no) -> LLMResult:
        """One provider attempt, held against the budget first (if any)."""
        if self.budget is None:
            return self._attempt_once(litellm, spec, kw, h, purpose, case_id, attempt_no)
        from .budget import cost_of

        held = self.budget.reserve(spec, kw["messages"], kw["max_tokens"])
        res = None
        try:
            res = self._attempt_once(litellm, spec, kw, h, purpose, case_id, attempt_no)
        finally:
            if res is None or (res.error and res.prompt_tokens is None and res.content is None):
                actual = 0.0 if res is not None else None   # nothing answered: nothing billed
            else:
                actual = cost_of(spec, res.prompt_tokens, res.completion_tokens)
            self.budget.settle(held, actual)
        return res

    def _attempt_once(self, litellm, spec, kw, h, purpose, case_id, attempt_no) -> LLMResult:
        """One provider attempt, logged and (if good) cached before its worker slot is released,
        so a crash can lose at most 2 x concurrency calls that were sent but not yet saved."""
        key = (spec.model, spec.api_base)
        on_wire = key in self._on_wire
        with self.workers if on_wire else self.sem:
            wire = _Wire(slot=self.sem if on_wire else None)
            t0 = time.monotonic()
            with self._stats_lock:
                self.stats.provider_calls += 1
                self.stats.by_purpose[purpose] = self.stats.by_purpose.get(purpose, 0) + 1
                if self.stats.first_request is None:
                    self.stats.first_request = time.time()
            _TLS.wire = wire
            _thread_event_loop()
            try:
                resp = litellm.completion(**kw)
                exc = None
            except Exception as e:  # classified below
                resp, exc = None, e
            finally:
                _TLS.wire = None
            if _SESSION_OURS and wire.seen != on_wire:
                with self._stats_lock:  # learn (or unlearn) that this model's calls use the wire slot
                    (self._on_wire.add if wire.seen else self._on_wire.discard)(key)
            with self._stats_lock:
                self.stats.last_response = time.time()
            latency = wire.wire_ms if wire.wire_ms is not None else (time.monotonic() - t0) * 1000
            if resp is not None:
                res = _result_from(litellm, resp, h, latency)
                if spec.price is not None:  # the configured price wins over litellm's table
                    from .budget import cost_of

                    res.cost = cost_of(spec, res.prompt_tokens, res.completion_tokens)
                if not res.content or not res.content.strip():
                    res.error, res.retryable = "empty content from provider", True
            else:
                res = LLMResult(content=None, error=_describe_for(spec, exc), latency_ms=latency,
                                call_hash=h,
                                retryable=_retryable(litellm, exc), retry_after=_retry_after(exc))
            res.attempts = attempt_no
            self._log(res, spec, purpose, case_id, attempt_no)
        return res

    def _wait(self, state) -> float:
        """Exponential backoff with jitter, never shorter than the provider's Retry-After."""
        res: LLMResult = state.outcome.result()
        delay = min(self.backoff_max_s, self.backoff_base_s * (2 ** (state.attempt_number - 1)))
        delay *= 0.5 + self._rng.random() / 2
        if res.retry_after is not None:
            delay = max(delay, min(res.retry_after, self.backoff_max_s))
        return delay

    def _call_with_retries(self, spec, messages, h, *, purpose, case_id, response_format,
                           max_tokens) -> LLMResult:
        from tenacity import Retrying, retry_if_result, stop_after_attempt

        litellm = _litellm()
        if spec.model.startswith(LOCAL_PREFIX) or any(
                spec.model.startswith(p + "/") for p in _TEST_PROVIDERS):
            _register_providers()
        kw = self._kwargs(spec, messages, response_format, max_tokens)
        counter = iter(range(1, 10_000))
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1), wait=self._wait,
            retry=retry_if_result(lambda r: r.error is not None and r.retryable),
            retry_error_callback=lambda state: state.outcome.result())
        res = retrying(lambda: self._attempt(litellm, spec, kw, h, purpose, case_id, next(counter)))
        if res.error is None:
            self._pin(spec.model, res.model_resolved)
            return res
        with self._stats_lock:
            self.stats.errors += 1
        if res.attempts > 1:
            res.error = f"{res.error} (after {res.attempts} attempts)"
        return res


def _result_from(litellm, resp, h: str, latency_ms: float) -> LLMResult:
    try:
        content = resp.choices[0].message.content
    except (AttributeError, IndexError):
        content = None
    usage = getattr(resp, "usage", None)
    hidden = getattr(resp, "_hidden_params", None) or {}
    if "response_cost" in hidden:  # litellm priced it already (None: a model it has no price for)
        cost = hidden["response_cost"]
        cost = float(cost) if cost is not None else None
    else:
        try:
            cost = float(litellm.completion_cost(completion_response=resp))
        except Exception:
            cost = None
    model, detail = model_id(getattr(resp, "model", None))
    return LLMResult(
        content=content, model_resolved=model, model_detail=detail,
        system_fingerprint=getattr(resp, "system_fingerprint", None),
        prompt_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
        completion_tokens=getattr(usage, "completion_tokens", None) if usage else None,
        cost=cost, latency_ms=latency_ms, call_hash=h)


_MODEL_FILE = (".gguf", ".ggml", ".bin", ".safetensors", ".onnx")


def model_id(resolved):
    """(the model's id, detail): a local OpenAI-compatible server (llama.cpp, …) reports the
    model file's path as its model; the id shown is the file's name and the path stays as
    detail (the store's llm_calls.model_detail), out of reports."""
    if not isinstance(resolved, str):
        return resolved, None
    looks_like_path = resolved.startswith(("/", "./", "../", "~")) or \
        (len(resolved) > 2 and resolved[1] == ":" and resolved[2] in "\\/") or \
        ("/" in resolved or "\\" in resolved) and resolved.lower().endswith(_MODEL_FILE)
    if not looks_like_path:
        return resolved, None
    name = resolved.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return (name or resolved), resolved


def _describe(exc: Exception, secret: str | None = None) -> str:
    """One line for a failed call. A provider may echo the key in its error message, so the
    model's own key (whatever its variable is called) and every key-like variable's value are
    masked, before the line is cut: a key straddling the cut must not leave its first half."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {msg}"
    secrets = [secret] if secret and len(secret) >= 8 else []
    secrets += [value for name, value in os.environ.items()
                if value and len(value) >= 8 and ("KEY" in name or "TOKEN" in name or
                                                  "SECRET" in name)]
    for value in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(value, "***")
    return text[:300]


def _describe_for(spec: ModelSpec, exc: Exception) -> str:
    """`_describe` with this model's own key masked, whatever its variable is called."""
    return _describe(exc, os.environ.get(spec.api_key_env) if spec.api_key_env else None)


def _retryable(litellm, exc: Exception) -> bool:
    kinds = tuple(getattr(litellm, n) for n in (
        "RateLimitError", "APIConnectionError", "Timeout", "InternalServerError",
        "ServiceUnavailableError", "BadGatewayError") if hasattr(litellm, n))
    if isinstance(exc, kinds):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status == 429 or status >= 500):
        return True
    if isinstance(exc, getattr(litellm, "APIError", ())) and status is None:
        return True
    name = type(exc).__name__
    if "Timeout" in name or "JSONDecodeError" in name:
        return True
    if isinstance(exc, (litellm.AuthenticationError, litellm.BadRequestError,
                        litellm.NotFoundError)):
        return False
    return isinstance(exc, (ConnectionError, TimeoutError, json.JSONDecodeError))


def _retry_after(exc: Exception) -> float | None:
    headers = None
    for attr in ("litellm_response_headers", "headers"):
        headers = getattr(exc, attr, None)
        if headers:
            break
    if not headers:
        resp = getattr(exc, "response", None)
        headers = getattr(resp, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:
        return None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def count_tokens(model: str, messages: list[dict]) -> tuple[int, str]:
    """Prompt tokens for the budget check: the local tokenizer, else litellm's, offline."""
    if model.startswith(LOCAL_PREFIX):
        from . import embedded as local_model

        n = local_model.count_tokens(messages)
        if n is not None:
            return n, "smollm2 tokenizer"
    try:
        litellm = _litellm()
        return int(litellm.token_counter(model=model, messages=messages)), "litellm token_counter"
    except Exception:
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        return chars // 3 + 4 * len(messages), "estimate (chars/3)"


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    try:
        litellm = _litellm()
        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                      completion_tokens=completion_tokens)
        return float(p + c)
    except Exception:
        return None


def _aux_kwargs(spec: ModelSpec, timeout_s: float) -> dict[str, Any]:
    """Model, timeout, endpoint and key (read from the environment at call time, never stored)."""
    kw: dict[str, Any] = {"model": spec.model, "timeout": timeout_s}
    if spec.api_base:
        kw["api_base"] = spec.api_base
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise UserError(f"environment variable {spec.api_key_env} is not set (API key for model "
                            f"{spec.model})")
        kw["api_key"] = key
    elif spec.api_base:
        kw["api_key"] = "sk-no-key"  # local OpenAI-compatible servers want some key
    return kw


def embed(spec: ModelSpec, texts: list[str], timeout_s: float = 60) -> list[list[float]]:
    """Embeddings through litellm (any provider or a local OpenAI-compatible server)."""
    from ..errors import IncompleteError

    litellm = _litellm()
    try:
        resp = litellm.embedding(input=texts, **_aux_kwargs(spec, timeout_s))
    except Exception as exc:
        raise IncompleteError(f"embedding model {spec.model} failed: {_describe(exc)}") from None
    return [d["embedding"] if isinstance(d, dict) else d.embedding for d in resp.data]


def rerank(spec: ModelSpec, query: str, documents: list[str], timeout_s: float = 60) -> list[float]:
    """Relevance scores in document order (litellm rerank); errors propagate to the caller."""
    litellm = _litellm()
    resp = litellm.rerank(query=query, documents=documents, **_aux_kwargs(spec, timeout_s))
    scores = [0.0] * len(documents)
    for r in resp.results:
        r = r if isinstance(r, dict) else r.__dict__
        scores[int(r["index"])] = float(r.get("relevance_score", 0.0))
    return scores
