"""The litellm adapter: the ONLY module that imports litellm.

Importing it (offline settings first, in the background while other work runs), the
concurrency slot held on the wire, the in-process providers (`local/`, scripted test
providers), call hashing, credentials, result parsing, error classification, tokens and
prices. `gateway.Gateway` is the policy over it (cache, retries, budget, batches); batch and
budget use it too. API keys come from the environment at call time and are never stored or
logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from abtest.errors import UserError
from abtest.core.models import ModelSpec
from abtest.errors import quiet_import_warnings
from abtest.core.gcpause import gc_paused
import asyncio
import httpx
import socket
from urllib.parse import urlsplit, urlunsplit
from abtest.errors import IncompleteRunError
from abtest.llm import embedded as local_model
from abtest.llm import embedded
from abtest.core.background import start

_IMPORT_LOCK = threading.Lock()
_LITELLM = None
_PRELOAD: threading.Thread | None = None
_LOCAL_REGISTERED = False
TEST_PROVIDERS: dict[str, Callable[[list[dict], dict], Any]] = {}

LOCAL_PREFIX = "local/"


def _setup_env() -> None:

    quiet_import_warnings()
    # Before `import litellm`: no price-map fetch from the internet, no .env loading.
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")


def preload() -> None:
    """Start importing litellm in the background (it takes seconds) while other work runs."""
    global _PRELOAD
    with _IMPORT_LOCK:
        if _LITELLM is None and _PRELOAD is None:

            _PRELOAD = start(_import_and_warm, "litellm-import")


def _import_and_warm() -> None:
    """Import litellm, then let it import what its first call would (~0.3 s of lazy imports)
    before the first real request, so that the first requests are not held up by it."""
    litellm = get_litellm()

    # a warm-up only (the real call reports any real problem): a mock response, so no network,
    # no provider, nothing cached or logged by abtest
    with gc_paused(freeze=True), contextlib.suppress(Exception):
        litellm.completion(model="openai/abtest-warmup", api_base="http://127.0.0.1:9/v1",
                           api_key="sk-no-key", messages=[{"role": "user", "content": "warm-up"}],
                           mock_response="ok", max_tokens=1)
        for mod in ("litellm._service_logger", "litellm.proxy.spend_tracking.savings"):
            __import__(mod)


def get_litellm():
    global _LITELLM
    if _LITELLM is not None:
        return _LITELLM
    with _IMPORT_LOCK:
        if _LITELLM is None:
            _setup_env()

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
# A model's limiter (`ratelimit`) bounds its provider requests in flight and paces them. Where
# litellm sends a call through the OpenAI SDK (OpenAI and every OpenAI-compatible server), the
# slot is held only while the request is on the wire: litellm's own CPU work before and after
# (request building, response parsing, cost lookup) and abtest's store writes then overlap
# with other requests instead of lengthening every slot. Calls that do not pass through this
# transport (other SDK paths, custom providers, a user-supplied `litellm.client_session`, a
# proxy) hold a slot for the whole call, as before.
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
class Wire:
    """Per-call state shared between the gateway and the transport (same thread)."""

    slot: Any  # acquire()/release(): a model's lease; None: the caller already holds it
    seen: bool = False
    wire_ms: float | None = None


@contextlib.contextmanager
def wire_call(wire: Wire) -> Iterator[None]:
    """Make a litellm call with `wire` seen by the transport: its slot is held on the wire."""
    _TLS.wire = wire
    _thread_event_loop()
    try:
        yield
    finally:
        _TLS.wire = None


def wire_slot_installed() -> bool:
    """True when litellm sends through abtest's transport (so a slot can be held on the wire)."""
    return _SESSION_OURS


def is_in_process(model: str) -> bool:
    """The embedded model or a scripted test provider: served in this process."""
    return model.startswith(LOCAL_PREFIX) or model.split("/", 1)[0] in TEST_PROVIDERS


def _install_client_session(litellm) -> None:
    global _SESSION_OURS
    if litellm.client_session is not None:
        return
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
    litellm = get_litellm()
    custom_llm: type = litellm.CustomLLM  # litellm is imported lazily: its class is a value here

    class LocalModelHandler(custom_llm):
        def completion(self, model, messages, *args, **kwargs):
            params = dict(kwargs.get("optional_params") or {})
            req = {"model": model, "messages": messages, **params}
            out = chat_fn(req)
            return litellm.ModelResponse(**out)

        async def acompletion(self, model, messages, *args, **kwargs):

            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return LocalModelHandler()


def register_providers() -> None:
    litellm = get_litellm()
    global _LOCAL_REGISTERED
    entries = []
    if not _LOCAL_REGISTERED:

        entries.append({"provider": "local", "custom_handler": _make_handler(local_model.chat)})
        _LOCAL_REGISTERED = True
    for name, fn in TEST_PROVIDERS.items():
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
    TEST_PROVIDERS[name] = fn
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

        embedded.preflight(where)
    if spec.api_key_env and not os.environ.get(spec.api_key_env):
        raise UserError(f"environment variable {spec.api_key_env} is not set (API key for model "
                        f"{spec.model})", field=f"{where}.api_key_env")


def provider_keys_missing(spec: ModelSpec) -> list[str]:
    """The provider's key variables litellm looks for and does not find (no api_key_env, no
    api_base: a hosted provider); names only, never values."""
    if spec.model.startswith(LOCAL_PREFIX) or spec.api_key_env or spec.api_base:
        return []
    if spec.model.split("/", 1)[0] in TEST_PROVIDERS:
        return []
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints a provider list
            found = get_litellm().validate_environment(model=spec.model)
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
    waits_for_limit: bool = False   # a 429 the run waits out: not one of the call's retries
    unreachable: str | None = None  # nothing answers at the endpoint (`unreachable_cause`)

    @property
    def ok(self) -> bool:
        return self.error is None and self.content is not None


def result_from(litellm, resp, h: str, latency_ms: float | None) -> LLMResult:
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


def describe(exc: BaseException, secret: str | None = None) -> str:
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


def describe_for(spec: ModelSpec, exc: Exception) -> str:
    """`_describe` with this model's own key masked, whatever its variable is called."""
    return describe(exc, os.environ.get(spec.api_key_env) if spec.api_key_env else None)


def retryable(litellm, exc: Exception) -> bool:
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


# Nothing answers at the endpoint: the connection is refused or its host name does not resolve.
# The socket errors themselves decide (they never come from an HTTP reply); the texts are the
# platforms' messages for them, looked for only in connection errors (a provider's 5xx whose
# body mentions "connection refused" is a 5xx, retried as one).
_REFUSED = ("connection refused", "actively refused")
_NO_NAME = ("name or service not known", "nodename nor servname", "no address associated with",
            "temporary failure in name resolution", "getaddrinfo failed", "name resolution")


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes, outermost first (litellm wraps the SDK's, which wraps
    httpx's, which wraps the socket's)."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < 16 and not any(e is seen for seen in out):
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def unreachable_cause(exc: BaseException) -> str | None:
    """When a call failed because nothing answers at its endpoint — the connection refused,
    or the host name does not resolve — one line saying so with the root cause; else None
    (a timeout, a 429, a 5xx or any other error)."""

    def said(e: BaseException) -> str:   # its message, keys masked, without its type's name
        return describe(e).split(": ", 1)[-1] or type(e).__name__

    chain = _chain(exc)
    for e in reversed(chain):   # the root cause first
        if isinstance(e, ConnectionRefusedError):
            return f"connection refused ({said(e)})"
        if isinstance(e, socket.gaierror):
            return f"host name does not resolve ({said(e)})"
    for e in reversed(chain):
        if "connect" not in type(e).__name__.lower():  # ConnectError, APIConnectionError, …
            continue
        text = str(e).lower()
        if any(t in text for t in _REFUSED):
            return f"connection refused ({said(e)})"
        if any(t in text for t in _NO_NAME):
            return f"host name does not resolve ({said(e)})"
    return None


def shown_base(api_base: str | None) -> str:
    """The endpoint as a message names it: a password or query string in it is masked."""
    if not api_base:
        return "its provider's default endpoint"

    try:
        u = urlsplit(api_base)
        netloc = u.netloc
        if u.password:
            netloc = netloc.replace(f":{u.password}@", ":***@", 1)
        return urlunsplit((u.scheme, netloc, u.path, "***" if u.query else "", ""))
    except ValueError:
        return api_base


_QUOTA = ("insufficient_quota", "exceeded your current quota", "request too large",
          "check your plan and billing")


def rate_limit_kind(litellm, exc: Exception) -> str | None:
    """"rate" for a 429 that waiting fixes, "quota" for one it does not (an exhausted quota, a
    request larger than the limit), None for any other error."""
    status = getattr(exc, "status_code", None)
    if status != 429 and not isinstance(exc, getattr(litellm, "RateLimitError", ())):
        return None
    text = str(exc).lower()
    return "quota" if any(p in text for p in _QUOTA) else "rate"


def _header_dict(raw) -> dict[str, str]:
    """Lower-case header names; litellm's `llm_provider-` copies (the provider's own) win."""
    try:
        items = list(raw.items()) if raw else []
    except Exception:
        return {}
    out, own = {}, {}
    for k, v in items:
        k = str(k).lower()
        if k.startswith("llm_provider-"):
            own[k[len("llm_provider-"):]] = str(v)
        else:
            out[k] = str(v)
    out.update(own)
    return out


def response_headers(resp) -> dict[str, str]:
    """The provider's HTTP headers of an answer (litellm keeps them in its hidden params)."""
    hidden = getattr(resp, "_hidden_params", None) or {}
    return _header_dict(hidden.get("additional_headers") if isinstance(hidden, dict) else None)


def error_headers(exc: Exception) -> dict[str, str]:
    """The provider's HTTP headers of a failed call (a 429's Retry-After and limits)."""
    raw = getattr(exc, "litellm_response_headers", None)
    if not raw:
        raw = getattr(getattr(exc, "response", None), "headers", None)
    return _header_dict(raw)


def retry_after(exc: Exception) -> float | None:
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

        n = local_model.count_tokens(messages)
        if n is not None:
            return n, "smollm2 tokenizer"
    try:
        litellm = get_litellm()
        return int(litellm.token_counter(model=model, messages=messages)), "litellm token_counter"
    except Exception:
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        return chars // 3 + 4 * len(messages), "estimate (chars/3)"


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    try:
        litellm = get_litellm()
        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                      completion_tokens=completion_tokens)
        return float(p + c)
    except Exception:
        return None


def call_kwargs(spec: ModelSpec, timeout_s: float) -> dict[str, Any]:
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

    litellm = get_litellm()
    try:
        resp = litellm.embedding(input=texts, **call_kwargs(spec, timeout_s))
    except Exception as exc:
        raise IncompleteRunError(f"embedding model {spec.model} failed: {describe(exc)}") from None
    return [d["embedding"] if isinstance(d, dict) else d.embedding for d in resp.data]


def rerank(spec: ModelSpec, query: str, documents: list[str], timeout_s: float = 60) -> list[float]:
    """Relevance scores in document order (litellm rerank); errors propagate to the caller."""
    litellm = get_litellm()
    resp = litellm.rerank(query=query, documents=documents, **call_kwargs(spec, timeout_s))
    scores = [0.0] * len(documents)
    for r in resp.results:
        r = r if isinstance(r, dict) else r.__dict__
        scores[int(r["index"])] = float(r.get("relevance_score", 0.0))
    return scores


# --- prices ---------------------------------------------------------------------------------
def unit_prices(spec: ModelSpec) -> tuple[float, float] | None:
    """(USD per input token, USD per output token), or None when no price is known."""
    if spec.price is not None:
        return spec.price.input_per_mtok / 1e6, spec.price.output_per_mtok / 1e6
    if spec.model.startswith(LOCAL_PREFIX):
        return 0.0, 0.0
    try:
        p, c = get_litellm().cost_per_token(model=spec.model, prompt_tokens=1_000_000,
                                         completion_tokens=1_000_000)
    except Exception:
        return None
    return float(p) / 1e6, float(c) / 1e6


def cost_of(spec: ModelSpec, prompt_tokens: int | None, completion_tokens: int | None
            ) -> float | None:
    prices = unit_prices(spec)
    if prices is None or prompt_tokens is None or completion_tokens is None:
        return None
    return prompt_tokens * prices[0] + completion_tokens * prices[1]


def batch_cost(spec: ModelSpec, prompt_tokens, completion_tokens) -> float | None:
    """A configured `price:` is what the user pays (give the batch price there); else
    litellm's batch prices for the model (about half its regular ones)."""
    if spec.price is not None or prompt_tokens is None or completion_tokens is None:
        return cost_of(spec, prompt_tokens, completion_tokens)
    try:
        from litellm.cost_calculator import batch_cost_calculator
        from litellm.types.utils import Usage

        p, c = batch_cost_calculator(Usage(prompt_tokens=prompt_tokens,
                                           completion_tokens=completion_tokens,
                                           total_tokens=prompt_tokens + completion_tokens),
                                     model=spec.model)
        return float(p) + float(c)
    except Exception:
        return None
