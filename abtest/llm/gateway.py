"""The LLM gateway: the policy over the litellm adapter (`provider`).

Retries, backoff, the response cache and the call log live here rather than in
litellm (its own retries and caches were unreliable in checks), so that a
repeated or resumed run makes no provider call for work already finished, and
every attempt leaves a row in `llm_calls`; every provider attempt is held against the
run's budget (`budget`), paced under its model's rate limits (`ratelimit`: requests in
flight, requests and tokens per minute, 429s waited out), and calls a provider batch takes
are deferred (`batch`). A model whose endpoint has answered nothing yet and refuses the
connection, or whose host name does not resolve, is unreachable after at most two quick
retries (`ProviderUnreachable`): its later calls fail at once, without the network.
"""

from __future__ import annotations

import random
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from abtest.errors import DriftError, ProviderError
from abtest.core.models import ModelSpec
from abtest.llm.provider import (LOCAL_PREFIX, LLMResult, Wire, call_hash, call_kwargs, describe_for, error_headers,
                       get_litellm, is_in_process, rate_limit_kind, register_providers,
                       response_headers, result_from, retry_after, retryable, shown_base,
                       unreachable_cause, wire_call, wire_slot_installed)
from abtest.llm.ratelimit import Limits, charge, status_line
from abtest.llm.batch import Deferred, Request, request_body
import json
from abtest.llm.provider import cost_of
from abtest.llm.embedded import stopped_by
from abtest.llm.provider import count_tokens

if TYPE_CHECKING:
    from abtest.store import Store
    from abtest.llm.batch import BatchQueue
    from abtest.llm.budget import Budget


@dataclass
class GatewayStats:
    provider_calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    first_request: float | None = None
    last_response: float | None = None
    by_purpose: dict[str, int] = field(default_factory=dict)


class ModelDriftError(DriftError):
    """The resolved model changed under a run: the comparison would not be like for like."""


# quick retries of a connection refused or a host name that does not resolve before the model
# is unreachable (each waits min(backoff_base_s, 0.25 s) doubled: at most 0.75 s in all)
UNREACHABLE_RETRIES = 2


class ProviderUnreachable(ProviderError):
    """Nothing answers at a model's endpoint (connection refused, or its host name does not
    resolve) and it has answered nothing yet: waiting a minute on retries would not help."""

    def __init__(self, model: str, api_base: str | None, reason: str, then: str | None = None):
        self.model, self.api_base, self.reason = model, api_base, reason
        line = f"{model} at {shown_base(api_base)} is unreachable: {reason}"
        super().__init__(f"{line}; {then}" if then else line)

    def error(self) -> str:
        """What each of the model's calls says (the model and endpoint are in its row)."""
        return f"unreachable: {self.reason}"


class Stopping(BaseException):
    """The run is stopping (Ctrl-C, SIGTERM): a call not yet sent is not sent. Not an
    Exception, so no judge or retry loop takes it for a provider error."""


class Gateway:
    """Rate-limited, retrying, caching access to any litellm model. `concurrency` is the
    requests in flight per model for a model spec that sets none of its own."""

    def __init__(self, store: Store | None, *, concurrency: int = 8, timeout_s: float = 120,
                 max_retries: int = 6, backoff_base_s: float = 0.5, backoff_max_s: float = 30.0,
                 run_id: str | None = None, pinned: dict[str, str] | None = None,
                 budget: Budget | None = None, batch: BatchQueue | None = None):
        self.store = store
        self.batch = batch    # llm.batch.BatchQueue: calls it takes wait for a provider batch
        self.budget = budget  # llm.budget.Budget: every provider attempt is held against it
        self.run_id = run_id
        self._info_lock = threading.Lock()
        self.limits = Limits(concurrency, backoff_base_s=backoff_base_s,
                             backoff_max_s=backoff_max_s, remembered=self._remembered_rates(),
                             on_learn=self._remember_rate if store is not None and run_id
                             else None)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.stats = GatewayStats()
        self._stats_lock = threading.Lock()
        self.pinned: dict[str, str] = dict(pinned or {})
        self._rng = random.Random(0)
        self._inflight: dict[str, threading.Event] = {}
        self._on_wire: set[tuple[str, str | None]] = set()
        self._answered: set[str] = set()   # endpoints (api_base, else model) that answered
        self._unreachable: dict[tuple[str, str | None], ProviderUnreachable] = {}
        self._stopping = threading.Event()

    def stop(self) -> None:
        """From now on every call raises `Stopping` before it reaches the provider; a call to
        the embedded model already under way stops at its next token (its case stays
        unfinished: nothing of it is stored)."""
        self._stopping.set()

    def _stops(self, spec: ModelSpec):
        """A call to the embedded model stops at its next token when this gateway stops (it
        runs in this thread, under litellm); any other call ends as its provider answers."""
        if spec.model.startswith(LOCAL_PREFIX):

            return stopped_by(self._stopping)
        return nullcontext()

    def unreachable(self) -> ProviderUnreachable | None:
        """The first model found unreachable (its calls now fail at once), if any."""
        with self._stats_lock:
            return next(iter(self._unreachable.values()), None)

    # -- public -----------------------------------------------------------
    def complete(self, spec: ModelSpec, messages: list[dict], *, purpose: str,
                 case_id: str | None = None, sample: int = 0, response_format: dict | None = None,
                 max_tokens: int | None = None) -> LLMResult:
        if self._stopping.is_set():
            raise Stopping()
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
        dead = self._unreachable.get((spec.model, spec.api_base))
        if dead is not None:   # no network: the same error at once
            return self._failed_fast(spec, h, dead)
        if self.batch is not None and self.batch.takes(spec, h):
            self._defer(spec, messages, h, purpose, case_id, response_format, max_tokens)
        return self._call_with_retries(spec, messages, h, purpose=purpose, case_id=case_id,
                                       response_format=response_format, max_tokens=max_tokens)

    def _defer(self, spec, messages, h, purpose, case_id, response_format, max_tokens):
        """Queue the call for this pass's batch (its worst case held against the budget)."""

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

    def _run_info(self) -> dict:

        run = self.store.get_run(self.run_id) if self.store is not None and self.run_id else None
        try:
            return json.loads((run or {}).get("info_json") or "{}")
        except ValueError:
            return {}

    def _remembered_rates(self) -> dict:
        """What the rate limiters of an earlier process of this run learned (--resume)."""
        rates = self._run_info().get("rate_limits")
        return rates if isinstance(rates, dict) else {}

    def _remember_rate(self, key: str, memory: dict) -> None:
        """Keep what a model's limiter learned in the run's info, for --resume (a few times
        a run: when headers first say a limit, and at each decrease after a 429)."""

        store, run_id = self.store, self.run_id
        if store is None or run_id is None:
            return
        with self._info_lock:
            info = self._run_info()
            if not info and store.get_run(run_id) is None:
                return   # no such run (a gateway used outside a run)
            info.setdefault("rate_limits", {})[key] = memory
            store.update_run(run_id, info_json=json.dumps(info, sort_keys=True))

    def rate_lines(self) -> list[str]:
        """Each model's requests in flight, rates and waits on its limit (a run's progress)."""
        return [status_line(s) for s in self.limits.status()]

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
        kw = call_kwargs(spec, self.timeout_s)
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

        held = self.budget.reserve(spec, kw["messages"], kw["max_tokens"])
        res = None
        actual: float | None
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
        """One provider attempt, paced by its model's limiter, logged and (if good) cached
        before its call slot is released, so a crash can lose at most 2 x concurrency calls
        that were sent but not yet saved."""
        key = (spec.model, spec.api_base)
        limiter = self.limits.get(spec)
        counted = None
        if not is_in_process(spec.model):   # the tokenizer's count, when it exceeds chars / 4

            counted = count_tokens(spec.model, kw["messages"])[0]
        # what the provider holds against its tokens limit when the request arrives
        lease = limiter.lease(charge(kw["messages"], kw["max_tokens"], counted))
        on_wire = key in self._on_wire
        # on the OpenAI path the lease (a slot in the model's window, its pacing) is held only
        # while the request is on the wire; otherwise for the whole call
        with limiter.calls if on_wire else lease:
            wire = Wire(slot=lease if on_wire else None)
            t0 = time.monotonic()
            with self._stats_lock:
                self.stats.provider_calls += 1
                self.stats.by_purpose[purpose] = self.stats.by_purpose.get(purpose, 0) + 1
                if self.stats.first_request is None:
                    self.stats.first_request = time.time()
            with wire_call(wire), self._stops(spec):
                try:
                    if self._stopping.is_set():   # stopped while it waited for its turn
                        raise Stopping()
                    resp = litellm.completion(**kw)
                    exc = None
                except Exception as e:  # classified below
                    if self._stopping.is_set():   # cut short by the stop: no answer, no error
                        raise Stopping() from None
                    resp, exc = None, e
            if wire_slot_installed() and wire.seen != on_wire:
                with self._stats_lock:  # learn (or unlearn) that this model's calls use the wire slot
                    (self._on_wire.add if wire.seen else self._on_wire.discard)(key)
            with self._stats_lock:
                self.stats.last_response = time.time()
            latency = wire.wire_ms if wire.wire_ms is not None else (time.monotonic() - t0) * 1000
            if resp is not None:
                res = result_from(litellm, resp, h, latency)
                if spec.price is not None:  # the configured price wins over litellm's table

                    res.cost = cost_of(spec, res.prompt_tokens, res.completion_tokens)
                used = (res.prompt_tokens + res.completion_tokens
                        if res.prompt_tokens is not None and res.completion_tokens is not None
                        else None)
                limiter.settle(lease, "ok", used=used, headers=response_headers(resp))
                if not res.content or not res.content.strip():
                    res.error, res.retryable = "empty content from provider", True
            else:
                assert exc is not None  # no response: the call raised
                res = LLMResult(content=None, error=describe_for(spec, exc), latency_ms=latency,
                                call_hash=h,
                                retryable=retryable(litellm, exc), retry_after=retry_after(exc),
                                unreachable=unreachable_cause(exc))
                kind = rate_limit_kind(litellm, exc) or "error"
                res.waits_for_limit = limiter.settle(lease, kind, headers=error_headers(exc),
                                                     detail=str(exc))
            res.attempts = attempt_no
            self._log(res, spec, purpose, case_id, attempt_no)
        return res

    def _failed_fast(self, spec: ModelSpec, h: str, dead: ProviderUnreachable) -> LLMResult:
        """A call to an unreachable model: its error, no provider attempt (none is logged)."""
        with self._stats_lock:
            self.stats.errors += 1
        return LLMResult(content=None, error=dead.error(), call_hash=h, unreachable=dead.reason)

    def _backoff(self, retry: int, res: LLMResult) -> float:
        """Exponential backoff with jitter, never shorter than the provider's Retry-After."""
        delay = min(self.backoff_max_s, self.backoff_base_s * (2 ** (retry - 1)))
        delay *= 0.5 + self._rng.random() / 2
        if res.retry_after is not None:
            delay = max(delay, min(res.retry_after, self.backoff_max_s))
        return delay

    def _call_with_retries(self, spec, messages, h, *, purpose, case_id, response_format,
                           max_tokens) -> LLMResult:
        litellm = get_litellm()
        if is_in_process(spec.model):
            register_providers()
        kw = self._kwargs(spec, messages, response_format, max_tokens)
        key = (spec.model, spec.api_base)
        attempt, retries, quick = 0, 0, 0
        while True:
            attempt += 1
            res = self._attempt(litellm, spec, kw, h, purpose, case_id, attempt)
            if res.error is None:
                break
            dead = self._unreachable.get(key)
            if dead is not None:   # another call found it unreachable meanwhile: no more tries
                res.error, res.unreachable = dead.error(), dead.reason
                break
            if res.unreachable is not None and (spec.api_base or spec.model) not in self._answered:
                # nothing answers there and nothing has (an endpoint that answered and now
                # refuses may be restarting: the usual retries): a quick retry or two, no more
                if quick < min(UNREACHABLE_RETRIES, self.max_retries):
                    quick += 1
                    time.sleep(min(self.backoff_base_s, 0.25) * 2 ** (quick - 1))
                    continue
                with self._stats_lock:
                    dead = self._unreachable.setdefault(
                        key, ProviderUnreachable(spec.model, spec.api_base, res.unreachable))
                res.error = dead.error()
                break
            if not res.retryable:
                break
            if res.waits_for_limit:   # a 429: the model's limiter holds the next attempt back
                continue              # for as long as the provider said; no retry is used
            if retries >= self.max_retries:
                break
            retries += 1
            if self._stopping.wait(self._backoff(retries, res)):   # a backoff ends on stop
                raise Stopping()
        if res.error is None:
            if (spec.api_base or spec.model) not in self._answered:
                with self._stats_lock:
                    self._answered.add(spec.api_base or spec.model)
            self._pin(spec.model, res.model_resolved)
            return res
        with self._stats_lock:
            self.stats.errors += 1
        if res.attempts > 1:
            res.error = f"{res.error} (after {res.attempts} attempts)"
        return res
