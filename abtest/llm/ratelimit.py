"""Per-model rate limits: how fast a model's requests go, and how many are in flight.

For a hosted model the physical limit of a run is its provider's requests and tokens per
minute, not the CPU. Hosted providers enforce a minute's limit over short periods (a bucket
refilled continuously, holding a few seconds' worth), so abtest paces by *rate*, in every
mode; concurrency is only a cap. Every model endpoint (model, api_base) gets one `Limiter`,
shared by every call to it, that holds:

* token buckets for requests and tokens per minute, paced evenly at just under the limit
  (HEADROOM). The limit is the tightest known of: the model's `rpm`/`tpm` when set; what the
  provider's rate-limit headers say (OpenAI and Azure `x-ratelimit-*`, Anthropic
  `anthropic-ratelimit-*`); and, for a limit neither gives, a rate learned from 429s
  (multiplicative decrease and slow additive increase *of the rate*, counted in answers,
  not seconds, so that it behaves the same at any rate). The first 429 sets it to DECREASE
  of what the provider was seen to accept over the most recent MEASURE_MAX answers; each
  later one (from a call paced at the new rate) to DECREASE of the lower of that rate and
  what was accepted since, that only when most of those calls waited for their turn or a
  slot (else they measured what the run asked for, not what the provider allows: a burst
  above the rate in force was refused, and the rate in force is what falls). Each answer
  that waited grows it by INCREASE of it; by FAST of itself while it is below DECREASE of
  the rate the last 429 came at, so a rate cut deeper than needed (the first, measured
  while the run was still starting, counts as having come at PROBE x what was accepted)
  comes back within some tens of answers.
  What a limiter learned is kept for the rest of the run, and (with a store) in the run's
  info for `--resume`.
* a call's charge, as the provider counts it when the request arrives: its prompt's
  characters / 4 (or the tokenizer's count if larger) plus its `max_tokens`
  (DEFAULT_MAX_TOKENS when none is sent), reserved before it is sent. What it did not use is
  given back only while the provider is not seen to hold the charge (a tokens 429 with no
  count of what is left says it does) and never against a learned rate; where headers say
  how many tokens remain, the bucket never holds more than that less what was sent since
  and what the calls still waiting for their turn reserved, so no request is sent whose
  charge exceeds them (and what was given back is taken back at the next answer when the
  provider kept it).
* a cap of `concurrency` requests in flight (the model's, else the run's); a call takes its
  turn at the rate first and a slot after, so waiting for its turn holds no slot. A call
  waiting for its turn looks again whenever calls give tokens back or the limits change (a
  turn is a place in line, computed from the bucket as it is, not a time fixed when it was
  taken: the tokens given back are used at once, and a clamp delays the calls it must).
* a pause when the provider answers 429 (or its headers say nothing is left): as long as
  `Retry-After` (or the reset header) says, else a jittered backoff; then the buckets start
  empty and the calls that had reserved before reserve again, at the rate in force. Such a
  429 does not use up one of the call's retries: the call waits, for as long as the run can
  still wait (PATIENCE_S of nothing but 429s, a Retry-After no longer than that). An
  exhausted quota or a request larger than the limit is an ordinary error.

Times come from a clock object, so the arithmetic is tested with a fake clock, not sleeps.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Callable, Iterable

HEADROOM = 0.98           # a bucket refills at this share of its limit ...
BURST_S = 0.1             # ... and holds this many seconds' worth: any window of 5 s or more
                          # (a minute, Azure's 10 s, a provider's bucket) sees at most the limit
DECREASE = 0.9            # a 429 on a limit not known: the rate falls to this share ...
INCREASE = 1 / 2000       # ... and each answer adds this share of it back: the rate regains
                          # the 1/0.9 it lost in (1 - 0.9) / 0.9 / INCREASE = 222 answers
FAST = 1 / 100            # ... or grows by this share of itself while below DECREASE of the
                          # rate the last 429 came at
PROBE = 2.0               # the first 429 came when the run asked for less than the provider
                          # allows: taken to have come at up to this multiple of what it accepted
MEASURE_MIN = 8           # answered calls needed to measure what the provider accepts ...
MEASURE_MAX = 40          # ... and the most recent this many at most
DEFAULT_MAX_TOKENS = 4096  # a call sent without max_tokens is charged this (a provider's default)
KINDS = ("requests", "tokens")
PATIENCE_S = 900.0        # 429s only, for this long: the run stops waiting (the call fails)
MIN_PAUSE_S = 0.05        # a 429 without Retry-After pauses at least this long
STATUS_EVERY_S = 10.0     # how often a run's progress shows each model's rates
MINUTE = 60.0


class Clock:
    """Real time; tests pass an object with the same two methods."""

    @staticmethod
    def now() -> float:
        return time.monotonic()

    @staticmethod
    def sleep(seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    @staticmethod
    def wait(cond: threading.Condition, seconds: float) -> None:
        """Sleep (its lock released) until `seconds` pass or the condition is notified: a
        call waiting for its turn wakes early when calls give tokens back."""
        cond.wait(seconds)


# --- headers --------------------------------------------------------------------------------
@dataclass
class RateInfo:
    """What a provider's response headers say about its limits (None: not said)."""

    limit_requests: float | None = None      # per minute
    remaining_requests: float | None = None
    reset_requests: float | None = None      # seconds until the request limit is full again
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens: float | None = None
    retry_after: float | None = None         # seconds

    def __bool__(self) -> bool:
        return any(v is not None for v in self.__dict__.values())


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str | None, now_wall: float | None = None) -> float | None:
    """Seconds from a reset or retry header: plain seconds ("55", Azure), a Go duration
    ("1s", "6m0s", "12ms", OpenAI), an RFC 3339 time (Anthropic) or an HTTP date."""
    if text is None:
        return None
    s = str(text).strip()
    if not s:
        return None
    try:
        v = float(s)
        return v if v >= 0 else None
    except ValueError:
        pass
    parts = _DURATION.findall(s)
    if parts and "".join(a + b for a, b in parts) == s:
        return sum(float(a) * _UNIT[b] for a, b in parts)
    now_wall = time.time() if now_wall is None else now_wall
    when = None
    try:
        when = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(s)
        except (TypeError, ValueError):
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now_wall)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(str(text).strip())
    except ValueError:
        return None
    return v if v >= 0 else None   # Azure sends -1 when it does not say


def parse_headers(headers: dict[str, str] | None, now_wall: float | None = None) -> RateInfo:
    """Rate-limit headers (keys lower-case) of OpenAI, Azure OpenAI and Anthropic."""
    h = {str(k).lower(): v for k, v in (headers or {}).items()}
    info = RateInfo()
    ms = _number(h.get("retry-after-ms"))
    info.retry_after = ms / 1000 if ms is not None else parse_duration(h.get("retry-after"),
                                                                         now_wall)
    for kind in ("requests", "tokens"):
        limit = _number(h.get(f"x-ratelimit-limit-{kind}"))
        remaining = _number(h.get(f"x-ratelimit-remaining-{kind}"))
        reset = parse_duration(h.get(f"x-ratelimit-reset-{kind}") or
                               h.get(f"x-rate-limit-reset-{kind}"), now_wall)   # Azure's spelling
        a = f"anthropic-ratelimit-{kind}"
        if limit is None and remaining is None:
            limit, remaining = _number(h.get(f"{a}-limit")), _number(h.get(f"{a}-remaining"))
            reset = parse_duration(h.get(f"{a}-reset"), now_wall) if reset is None else reset
        if kind == "tokens" and limit is None and remaining is None:
            # Anthropic's input and output limits apart: the tighter one (abtest counts both)
            pairs = [(_number(h.get(f"anthropic-ratelimit-{k}-tokens-limit")),
                      _number(h.get(f"anthropic-ratelimit-{k}-tokens-remaining")),
                      parse_duration(h.get(f"anthropic-ratelimit-{k}-tokens-reset"), now_wall))
                     for k in ("input", "output")]
            pairs = [p for p in pairs if p[0] is not None or p[1] is not None]
            if pairs:
                limit, remaining, reset = min(pairs, key=lambda p: (p[1] if p[1] is not None
                                                                    else float("inf")))
        setattr(info, f"limit_{kind}", limit or None)
        setattr(info, f"remaining_{kind}", remaining)
        setattr(info, f"reset_{kind}", reset)
    return info


# --- what a provider charges ----------------------------------------------------------------
def prompt_chars(messages: list[dict]) -> int:
    """Characters of the messages' text (string contents, or the text parts of a list)."""
    n = 0
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            n += len(content)
        elif isinstance(content, list):
            n += sum(len(p.get("text") or "") if isinstance(p, dict) else len(str(p))
                     for p in content)
    return n


def charge(messages: list[dict], max_tokens: int | None, counted: int | None = None) -> int:
    """The tokens a provider holds against its limit when the request arrives: it cannot know
    the answer's length yet, so it counts the prompt by its own estimate (characters / 4) and
    the whole `max_tokens` (DEFAULT_MAX_TOKENS when none is sent). The tokenizer's count
    (`counted`) is taken when it is larger, so the estimate errs towards the provider's."""
    prompt = max(math.ceil(prompt_chars(messages) / 4), int(counted or 0))
    return prompt + int(max_tokens if max_tokens else DEFAULT_MAX_TOKENS)


_TOKENS_429 = re.compile(r"tokens? per min|\btpm\b|input tokens|output tokens|token rate",
                         re.IGNORECASE)
_REQUESTS_429 = re.compile(r"requests? per min|\brpm\b|request rate", re.IGNORECASE)


def limit_kinds(detail: str | None) -> tuple[str, ...]:
    """Which limit a 429's message names (OpenAI: "... on tokens per min (TPM)"); both when
    it names neither."""
    text = detail or ""
    if _TOKENS_429.search(text):
        return ("tokens",)
    if _REQUESTS_429.search(text):
        return ("requests",)
    return KINDS


# --- token bucket ---------------------------------------------------------------------------
class TokenBucket:
    """`per_minute` units a minute, paced evenly: it refills at HEADROOM of the limit and
    holds BURST_S seconds' worth (at least `minimum`: one request).

    A reservation may take the level below zero; its caller then waits until the debt would
    be repaid (`reserve` returns how long), so callers are served in the order they asked.
    In any window of W >= 5 s it lets through at most capacity + rate x W <= the limit's
    share of W (plus what calls reserved and did not use, when that is given back), so a
    provider counting over a sliding minute, over 10 s as Azure does, or with a bucket of a
    few seconds' worth as hosted providers do, does not see more than its limit."""

    def __init__(self, per_minute: float, now: float, *, minimum: float = 0.0):
        self.minimum = minimum
        self.t = now
        self.level = 0.0
        self.reserved = 0.0      # all ever reserved: a caller's place is this total after it
        self.limiting = False    # the last reservation had to wait: this bucket holds calls back
        self.set_limit(per_minute, now)
        self.level = self.capacity

    def set_limit(self, per_minute: float, now: float) -> None:
        """A new limit (learned or said): what is owed stays owed."""
        self._refill(now)
        self.per_minute = float(per_minute)
        self.capacity = max(self.minimum, self.per_minute * BURST_S / MINUTE)
        self.rate = self.per_minute * HEADROOM / MINUTE
        self.level = min(self.level, self.capacity)

    def _refill(self, now: float) -> None:
        if now > self.t:
            if self.level < getattr(self, "capacity", 0.0):
                self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
            self.t = now

    def reserve(self, n: float, now: float) -> float:
        """Take n now; seconds to wait before sending."""
        self._refill(now)
        self.level -= n
        self.reserved += n
        wait = 0.0 if self.level >= 0 else -self.level / self.rate
        self.limiting = wait > 0
        return wait

    def wait_for(self, mark: float, now: float) -> float:
        """Seconds until the caller whose place is `mark` may send: the level as it is now
        (refilled, given back, clamped), not counting what was reserved after it."""
        self._refill(now)
        short = -(self.level + self.reserved - mark)
        # (a rounding error's worth short is not short: time too small to add would loop)
        return short / self.rate if short > 1e-9 * max(1.0, mark) else 0.0

    def settle(self, reserved: float, actual: float, now: float) -> None:
        """The call is over: `actual` units were used of the `reserved` taken. What it did not
        use comes back in full, even above the capacity: it was held while the call was in
        flight and the provider never counted it (capping it would lose that share of the
        limit whenever the calls overestimate)."""
        self._refill(now)
        self.level += reserved - actual

    def clamp(self, remaining: float, now: float) -> None:
        """The provider says only `remaining` are left: never assume more."""
        self._refill(now)
        self.level = min(self.level, remaining)

    def restart(self, at: float) -> None:
        """A 429 paused the model until `at`: nothing saved up counts, and the reservations
        made before are void (their calls reserve again, at the rate in force then)."""
        self.level, self.t = 0.0, max(self.t, at)


# --- one model's limiter --------------------------------------------------------------------
class Lease:
    """One call's place: its reservation (in which generation of the limiter), its slot among
    the requests in flight, and when it was sent."""

    def __init__(self, limiter: "Limiter", tokens: int | None):
        self.limiter, self.tokens = limiter, tokens   # tokens: the call's charge
        self.gen = -1                # the limiter's generation it reserved in (-1: not yet)
        self.tokens_reserved = 0.0   # what the tokens bucket holds for this call
        self.sent_at: float | None = None
        self.sent_seq = (0, 0)   # requests and tokens the limiter had sent before this one
        self.waited = False      # it waited for its turn or a slot: the run asked for more
        self.pending_gen = -1    # the generation its reservation waits to be sent in (-1: none)
        self.requests_reserved = 0.0   # what the requests bucket holds for it
        self.held = 0
        self.marks: dict[str, tuple[TokenBucket, float]] = {}   # its place in each bucket

    def acquire(self) -> None:
        self.limiter._acquire(self)

    def release(self) -> None:
        self.limiter._release(self)

    def __enter__(self) -> "Lease":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Limiter:
    """One model endpoint's limits, buckets, pause and counts (see the module docstring)."""

    def __init__(self, name: str, *, concurrency: int, rpm: float | None = None,
                 tpm: float | None = None, clock=None, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, seed: int = 0, remembered: dict | None = None,
                 on_learn=None):
        self.name = name
        self.clock = clock or Clock()
        self.cap = max(1, int(concurrency))
        self.in_flight = 0
        self.limit_set: dict[str, float | None] = {"requests": rpm, "tokens": tpm}
        self.limit_seen: dict[str, float | None] = {k: None for k in KINDS}   # headers
        self.learned: dict[str, float | None] = {k: None for k in KINDS}      # 429s
        self.learned_base: dict[str, float] = {}   # each learned rate after its last decrease
        self.ceiling: dict[str, float | None] = {}  # the learned rate a 429 came at (None: first)
        self.refunds = True   # give back what a call reserved and did not use (see settle)
        self.on_learn = on_learn
        for k in KINDS:   # what an earlier process of this run learned (--resume)
            seen = (remembered or {}).get(f"{k}_seen")
            got = (remembered or {}).get(f"{k}_learned")
            self.limit_seen[k] = float(seen) if seen else None
            if got:   # a rate the earlier process settled on: it grows back slowly
                self.learned[k] = self.learned_base[k] = self.ceiling[k] = float(got)
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.pause_until = 0.0
        self.gen = 0             # bumped by every pause: reservations of an older one are void
        self.decrease_gen = 0    # only a call reserved at this generation or later decreases
        self.limited_since: float | None = None   # first 429 since the last answer
        self.streak = 0                            # 429s since the last answer
        self.measure_from = float("-inf")          # answers sent since then measure the rate
        self.n_sent = self.n_429 = self.waits = self.decreases = 0
        self.wait_s = 0.0
        self.tokens_used = 0
        self.tokens_sent = 0
        # reserved in this generation and not yet sent: their turn is taken (the buckets'
        # levels are that much lower) but the provider has not counted them
        self.pending = {"requests": 0.0, "tokens": 0.0}
        self.first_sent: float | None = None
        self._sent: deque[tuple[float, int]] = deque()   # (time, charge) last minute
        self._used: deque[tuple[float, int]] = deque()   # (time, tokens used) last minute
        # answered: (sent, charge, had to wait for its turn)
        self._ok: deque[tuple[float, int, bool]] = deque(maxlen=MEASURE_MAX)
        lock = threading.Lock()
        self._cond = threading.Condition(lock)    # a slot among the requests in flight
        self._turns = threading.Condition(lock)   # a turn at the rate (woken by give-backs)
        self._rng = random.Random(seed)
        self._dirty = False
        # a call holds this for its whole length (a slot on the wire only for the request):
        # at most 2 x concurrency calls are sent but not yet saved when a process dies
        self.calls = threading.BoundedSemaphore(2 * self.cap)
        self._rebuild(self.clock.now())

    # -- limits ------------------------------------------------------------------------------
    def limit(self, kind: str) -> float | None:
        """The tighter of the limit set, the one the headers say and the one learned."""
        known = [v for v in (self.limit_set[kind], self.limit_seen[kind], self.learned[kind])
                 if v]
        return min(known) if known else None

    @property
    def rpm(self) -> float | None:
        return self.limit("requests")

    @property
    def tpm(self) -> float | None:
        return self.limit("tokens")

    def source(self, kind: str) -> str | None:
        """Where the limit in force comes from: "set", "headers" or "429s"."""
        lim = self.limit(kind)
        for name, value in (("set", self.limit_set[kind]), ("headers", self.limit_seen[kind]),
                            ("429s", self.learned[kind])):
            if lim is not None and value == lim:
                return name
        return None

    def _rebuild(self, now: float) -> None:
        for kind, minimum in (("requests", 1.0), ("tokens", 0.0)):
            limit = self.limit(kind)
            bucket = getattr(self, kind)
            if limit is None:
                continue
            if bucket is None:
                setattr(self, kind, TokenBucket(limit, now, minimum=minimum))
            elif bucket.per_minute != limit:
                bucket.set_limit(limit, now)

    def tighten(self, concurrency: int | None, rpm: float | None, tpm: float | None) -> None:
        """Another role uses the same model with its own limits: the tighter ones hold."""
        with self._cond:
            if concurrency and concurrency < self.cap:
                self.cap = concurrency
            for kind, v in (("requests", rpm), ("tokens", tpm)):
                was = self.limit_set[kind]
                if v and (was is None or v < was):
                    self.limit_set[kind] = v
            self._rebuild(self.clock.now())
            self._turns.notify_all()

    def lease(self, tokens: int | None = None) -> Lease:
        return Lease(self, tokens)

    # -- a call's way through --------------------------------------------------------------------
    def _acquire(self, lease: Lease) -> None:
        """Pace first (its turn at the rate in force), then a slot among the requests in
        flight: a call waiting for its turn does not hold a slot another could use."""
        if lease.sent_at is None:
            self._pace(lease)
        with self._cond:
            if self.in_flight >= self.cap and lease.sent_at is None:
                lease.waited = True     # held back by the cap: the run asks for more
            while self.in_flight >= self.cap:
                self._cond.wait()
            self.in_flight += 1
            lease.held += 1
            if lease.sent_at is not None:   # a second request of one call: no new pacing
                return
            now = self.clock.now()
            if lease.pending_gen == self.gen:    # its turn no longer waits: it is sent
                self.pending["requests"] -= lease.requests_reserved
                self.pending["tokens"] -= lease.tokens_reserved
            lease.pending_gen = -1
            lease.sent_at = now
            lease.sent_seq = (self.n_sent, self.tokens_sent)
            self.n_sent += 1
            self.tokens_sent += lease.tokens or 0
            self.first_sent = now if self.first_sent is None else self.first_sent
            self._sent.append((now, lease.tokens or 0))
            self._prune(now)

    def _pace(self, lease: Lease) -> None:
        with self._cond:
            start = self.clock.now()
            while True:
                now = self.clock.now()
                delay = self.pause_until - now
                if delay > 0:    # paused by a 429: everyone waits, spread a little
                    delay += self._rng.uniform(0, min(1.0, 0.1 * delay))
                else:
                    if lease.gen != self.gen:   # not reserved yet, or before the last pause
                        lease.gen = self.gen
                        self._reserve(lease, now)
                    delay = max([b.wait_for(m, now) for b, m in lease.marks.values()],
                                default=0.0)
                if delay <= 0:
                    lease.waited = now - start > 0.001
                    if lease.waited:
                        self.waits += 1
                        self.wait_s += now - start
                    return
                self._sleep(delay)

    def _sleep(self, seconds: float) -> None:
        """Wait for a turn, the lock released; woken early when calls give tokens back."""
        wait = getattr(self.clock, "wait", None)
        if wait is not None:
            wait(self._turns, seconds)
            return
        self._cond.release()    # a clock that only sleeps (the tests' fake time)
        try:
            self.clock.sleep(seconds)
        finally:
            self._cond.acquire()

    def _reserve(self, lease: Lease, now: float) -> None:
        """Take the call's turn in each bucket (`wait_for` says when it comes)."""
        lease.requests_reserved = lease.tokens_reserved = 0.0
        lease.marks = {}
        if self.requests is not None:
            lease.requests_reserved = 1.0
            self.requests.reserve(1, now)
            lease.marks["requests"] = (self.requests, self.requests.reserved)
        # a call larger than a whole minute's tokens is sent as it is: the provider says
        # whether it fits (OpenAI: 429 "Request too large")
        if self.tokens is not None and lease.tokens and lease.tokens <= self.tokens.per_minute:
            lease.tokens_reserved = lease.tokens
            self.tokens.reserve(lease.tokens, now)
            lease.marks["tokens"] = (self.tokens, self.tokens.reserved)
        lease.pending_gen = self.gen    # until it is sent, its turn counts in `pending`
        self.pending["requests"] += lease.requests_reserved
        self.pending["tokens"] += lease.tokens_reserved

    def _release(self, lease: Lease) -> None:
        with self._cond:
            if lease.held > 0:
                lease.held -= 1
                self.in_flight -= 1
                self._cond.notify()

    def settle(self, lease: Lease, outcome: str, *, used: int | None = None,
               headers: dict[str, str] | None = None, now_wall: float | None = None,
               detail: str | None = None) -> bool:
        """The call is over. `outcome`: "ok" (answered), "rate" (a 429 that waiting fixes),
        "quota" (one it does not) or "error"; `detail` the error's message (which limit a 429
        names). True when the caller should wait for this limiter and try again without
        counting a retry."""
        info = parse_headers(headers, now_wall) if headers else RateInfo()
        with self._cond:
            again = self._settle(lease, outcome, used, info, detail)
            memory = self.memory() if self._dirty else None
            self._dirty = False
            self._turns.notify_all()   # what was given back or learned may move turns sooner
        if memory is not None and self.on_learn is not None:
            self.on_learn(memory)
        return again

    def _settle(self, lease: Lease, outcome: str, used: int | None, info: RateInfo,
                detail: str | None) -> bool:
        now = self.clock.now()
        if self.tokens is not None and lease.tokens_reserved:
            if outcome == "ok" and used is not None and self.refunds and \
                    self.source("tokens") != "429s":
                self.tokens.settle(lease.tokens_reserved, used, now)
            elif outcome in ("rate", "quota"):   # not processed: not counted
                self.tokens.settle(lease.tokens_reserved, 0, now)
        if outcome == "ok":
            self.limited_since, self.streak = None, 0
            n = used if used is not None else (lease.tokens or 0)
            self.tokens_used += n
            self._used.append((now, n))
            self._prune(now)
            if lease.sent_at is not None:
                self._ok.append((lease.sent_at, lease.tokens or 0, lease.waited))
            self._increase(now)
        if info:
            self._learn(info, lease, now)
        if outcome != "rate":
            return False
        self.n_429 += 1
        self.streak += 1
        if self.limited_since is None:
            self.limited_since = now
        kinds = limit_kinds(detail)
        if "tokens" in kinds and info.remaining_tokens is None and \
                self.source("tokens") in ("set", "headers"):
            # a tokens limit known, no count of what is left, and still a 429 on tokens: this
            # provider holds what it charged when the request came, whatever the answer used
            self.refunds = False
        decreased = lease.gen >= self.decrease_gen and self._decrease(kinds, now)
        wait = info.retry_after
        if wait is None:
            resets = [r for r, left in ((info.reset_requests, info.remaining_requests),
                                        (info.reset_tokens, info.remaining_tokens))
                      if r is not None and left is not None and left <= 0]
            wait = max(resets) if resets else None
        if wait is None:
            wait = min(self.backoff_max_s,
                       max(MIN_PAUSE_S, self.backoff_base_s * 2 ** (self.streak - 1)))
            wait *= 0.5 + self._rng.random() / 2
        if wait > PATIENCE_S or now - self.limited_since > PATIENCE_S:
            if decreased:
                self.measure_from = now
                self._restart(now)
            return False   # the run can wait no longer: an ordinary (failing) error
        self.pause_until = max(self.pause_until, now + wait)
        if decreased:   # the new rate is measured from when calls go again
            self.measure_from = self.pause_until
        self._restart(now)
        return True

    def _restart(self, now: float) -> None:
        """After a 429: every bucket starts empty once the pause is over, and the calls that
        reserved before reserve again, at the rate in force then (not all at once)."""
        self.gen += 1
        self.pending = {"requests": 0.0, "tokens": 0.0}   # the reservations are void
        at = max(now, self.pause_until)
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.restart(at)

    def _accepted(self, kind: str) -> tuple[float | None, bool]:
        """What the provider accepted, per minute, measured from the answered calls sent
        since the last decrease (at most MEASURE_MAX, at least MEASURE_MIN of them); and
        whether most of them waited for their turn or a slot (if not, they measured what the
        run asked for, not what the provider allows)."""
        rows = [r for r in self._ok if r[0] >= self.measure_from]
        if len(rows) < MEASURE_MIN:
            return None, False
        rows.sort()
        span = rows[-1][0] - rows[0][0]
        if span <= 0:
            return None, False
        units = len(rows) - 1 if kind == "requests" else sum(r[1] for r in rows[1:])
        return units / span * MINUTE, 2 * sum(r[2] for r in rows) >= len(rows)

    def _decrease(self, kinds: tuple[str, ...], now: float) -> bool:
        """A 429 on a limit nobody told us: the rate falls to DECREASE of the lower of the
        rate in force and what the provider was seen to accept while the run asked for more
        (the first time, when no rate is known yet, of what it accepted: perhaps only
        what the run asked for as it started, so the rate then grows fast until a second
        429)."""
        changed = False
        for kind in kinds:
            if self.limit_set[kind] or self.limit_seen[kind]:
                continue    # a limit known: its 429 is waited out, not learned from
            accepted, held = self._accepted(kind)
            learned = self.learned[kind]
            if learned is None:
                base = accepted
            else:
                base = min(learned, accepted) if accepted and held else learned
            if not base:
                continue
            if learned is not None:
                self.ceiling[kind] = learned
            else:   # the first: the run sent at `base`, or asked for less than it allows
                self.ceiling[kind] = base if held else PROBE * base
            self.learned[kind] = self.learned_base[kind] = DECREASE * base
            changed = True
        if changed:
            self.decreases += 1
            self.decrease_gen = self.gen + 1   # the generation the coming restart opens
            self._rebuild(now)
            self._dirty = True
        return changed

    def _increase(self, now: float) -> None:
        """Each answer that waited for its turn grows a learned rate: by FAST of itself while
        it is below DECREASE of the rate the last 429 came at (or no second 429 has come),
        else by INCREASE of the rate learned at the last decrease; once it passes a limit set
        or said, that one holds."""
        changed = False
        for kind in KINDS:
            value = self.learned[kind]
            bucket = getattr(self, kind)
            if value is None or bucket is None or not bucket.limiting:
                continue
            ceiling = self.ceiling.get(kind)
            if ceiling is None or value < DECREASE * ceiling:
                value *= 1 + FAST
            else:
                value += INCREASE * self.learned_base[kind]
            known = [v for v in (self.limit_set[kind], self.limit_seen[kind]) if v]
            self.learned[kind] = None if known and value >= min(known) else value
            changed = True
        if changed:
            self._rebuild(now)

    def _learn(self, info: RateInfo, lease: Lease, now: float) -> None:
        """Slow to what the provider's headers say."""
        changed = False
        for kind, said in (("requests", info.limit_requests), ("tokens", info.limit_tokens)):
            if said and said != self.limit_seen[kind]:
                self.limit_seen[kind], changed = said, True
                got = self.learned[kind]
                if got is not None and got >= said:
                    self.learned[kind] = None
        if changed:
            self._rebuild(now)
            self._dirty = True
        # what was sent after this call reached the provider is not in its figures yet
        if lease.sent_at is not None:
            later_n = self.n_sent - lease.sent_seq[0] - 1
            later_t = self.tokens_sent - lease.sent_seq[1] - (lease.tokens or 0)
        else:
            later_n = later_t = 0
        for kind, bucket, remaining, reset, after in (
                ("requests", self.requests, info.remaining_requests, info.reset_requests,
                 later_n),
                ("tokens", self.tokens, info.remaining_tokens, info.reset_tokens, later_t)):
            if remaining is None:
                continue
            if bucket is not None:
                # what the bucket holds, not counting the turns taken by calls not yet sent
                bucket.clamp(remaining - after - self.pending[kind], now)
            elif remaining - after <= 0 or (kind == "tokens" and lease.tokens and
                                            remaining - after < lease.tokens):
                # no limit known (Azure says only what remains): wait for its reset
                wait = reset if reset is not None and reset <= PATIENCE_S else 1.0
                self.pause_until = max(self.pause_until, now + wait)

    def memory(self) -> dict:
        """What this limiter learned, to start from after --resume (the run's info)."""
        out: dict[str, float] = {}
        for k in KINDS:
            seen, got = self.limit_seen[k], self.learned[k]
            if seen:
                out[f"{k}_seen"] = seen
            if got:
                out[f"{k}_learned"] = round(self.learned_base.get(k, got), 3)
        return out

    # -- what the progress line shows --------------------------------------------------------
    def _prune(self, now: float) -> None:
        for q in (self._sent, self._used):
            while q and q[0][0] < now - MINUTE:
                q.popleft()

    def status(self) -> dict:
        with self._cond:
            now = self.clock.now()
            self._prune(now)
            span = min(MINUTE, now - self.first_sent) if self.first_sent is not None else 0.0
            # over the last minute, or since the first call; a first second counts as a whole
            # one (calls made in a burst still count: never "0 req/min" after calls were made)
            per_min = MINUTE / max(span, 1.0) if self.first_sent is not None else 0.0
            sources = {self.source(k) for k in KINDS} - {None}
            source = next((s for s in ("set", "headers", "429s") if s in sources), None)
            return {"model": self.name, "in_flight": self.in_flight, "concurrency": self.cap,
                    "rpm": self.rpm, "tpm": self.tpm, "source": source,
                    "requests_per_min": round(len(self._sent) * per_min),
                    "tokens_per_min": round(sum(n for _, n in self._used) * per_min),
                    "requests": self.n_sent, "tokens": self.tokens_used,
                    "waits": self.waits, "wait_s": round(self.wait_s, 1),
                    "rate_limited": self.n_429}


def _num(v: float) -> str:
    v = round(float(v), 1) if not float(v).is_integer() else float(v)
    return f"{v:,.0f}" if v.is_integer() else f"{v:,}"


def status_line(s: dict) -> str:
    """One model's line in a run's progress."""
    limits = ", ".join(f"{k} {_num(v)}" for k, v in (("rpm", s["rpm"]), ("tpm", s["tpm"])) if v)
    how = {"set": f"limits set: {limits}", "headers": f"from the provider's headers: {limits}",
           "429s": f"learned from its 429s: {limits}",
           None: "adaptive: no limit known yet"}[s["source"]]
    line = (f"{s['model']}: {s['requests']:,} calls so far, {s['in_flight']} in flight (at "
            f"most {s['concurrency']}), {s['requests_per_min']:,} req/min, "
            f"{s['tokens_per_min']:,} tok/min, {s['waits']:,} waits on the limit")
    if s["rate_limited"]:
        line += f", {s['rate_limited']:,} answered 429"
    return f"{line} ({how})"


def charge_rule(spec) -> str:
    """How a call to this model is charged against a tokens limit (abtest doctor)."""
    if spec.max_tokens:
        out = f"max_tokens {spec.max_tokens:,}, or the call's own"
    else:
        out = f"{DEFAULT_MAX_TOKENS:,} (no max_tokens set)"
    return ("a call is charged as the provider counts it: the prompt's characters / 4 (or "
            f"its token count if larger) + {out}")


def describe_limits(spec, default_concurrency: int) -> str:
    """A model's limits as configured, and how a call is charged (abtest doctor)."""
    conc = (f"at most {spec.concurrency} in flight" if spec.concurrency else
            f"at most {default_concurrency} in flight (the run's concurrency)")
    rates = [f"{k} {_num(v)}" for k, v in (("rpm", spec.rpm), ("tpm", spec.tpm)) if v]
    if rates:
        return f"{conc}, {', '.join(rates)}; {charge_rule(spec)}"
    return (f"{conc}; no rpm/tpm set: paced at the rate the provider's rate-limit headers "
            f"say, else at one learned from its 429s; {charge_rule(spec)}")


def in_flight_bound(specs: Iterable, default_concurrency: int) -> int:
    """Requests a run's models may have in flight at once (to size its worker threads)."""
    caps: dict[tuple, int] = {}
    for s in specs:
        key = (s.model, s.api_base)
        cap = s.concurrency or default_concurrency
        caps[key] = min(caps.get(key, cap), cap)
    return max(1, sum(caps.values()))


def endpoint_key(model: str, api_base: str | None) -> str:
    """A model endpoint's name in a run's info (what its limiter learned)."""
    return f"{model} {api_base}" if api_base else model


class Limits:
    """One limiter per model endpoint, shared by every call to it. `remembered`: what the
    limiters of an earlier process of the run learned (by endpoint_key); `on_learn(key,
    memory)` is told whenever one learns something."""

    def __init__(self, concurrency: int = 8, *, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, clock=None, remembered: dict | None = None,
                 on_learn: Callable[[str, dict], None] | None = None):
        self.concurrency = concurrency
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.clock = clock
        self.remembered = dict(remembered or {})
        self.on_learn = on_learn
        self._by_key: dict[tuple, Limiter] = {}
        self._seen: set[tuple] = set()
        self._lock = threading.Lock()

    def get(self, spec) -> Limiter:
        key = (spec.model, spec.api_base)
        mine = (key, spec.concurrency, spec.rpm, spec.tpm)
        with self._lock:
            lim = self._by_key.get(key)
            if lim is None:
                name = endpoint_key(spec.model, spec.api_base)
                tell = self.on_learn
                lim = Limiter(spec.model, concurrency=spec.concurrency or self.concurrency,
                              rpm=spec.rpm, tpm=spec.tpm, clock=self.clock,
                              backoff_base_s=self.backoff_base_s,
                              backoff_max_s=self.backoff_max_s, seed=len(self._by_key),
                              remembered=self.remembered.get(name),
                              on_learn=(lambda memory: tell(name, memory)) if tell else None)
                self._by_key[key] = lim
                self._seen.add(mine)
            elif mine not in self._seen:
                self._seen.add(mine)
                lim.tighten(spec.concurrency, spec.rpm, spec.tpm)
        return lim

    def status(self) -> list[dict]:
        with self._lock:
            limiters = list(self._by_key.values())
        return [lim.status() for lim in limiters if lim.n_sent]
