"""Per-model rate limits: how many requests a model has in flight, and how fast they go.

For a hosted model the physical limit of a run is its provider's requests and tokens per
minute, not the CPU. Every model endpoint (model, api_base) gets one `Limiter`, shared by
every call to it, that holds:

* a window of requests in flight, at most the model's `concurrency` (else the run's). It
  starts modest (START_WINDOW) and grows by one per window of answers; a 429 halves it.
* token buckets for requests and tokens per minute: the model's `rpm`/`tpm` when set, else
  what the provider's rate-limit headers say (OpenAI and Azure `x-ratelimit-*`, Anthropic
  `anthropic-ratelimit-*`); the tighter of the two when both are known. A call reserves one
  request and its worst case in tokens (its prompt counted offline plus `max_tokens`)
  before it is sent; the reservation is settled from the usage the provider reports, as
  the budget does. A bucket paces evenly at just under its limit (HEADROOM), so that a
  provider counting over a sliding minute, or over 10 s as Azure does, never sees more.
* a pause when the provider answers 429 (or its headers say nothing is left): as long as
  `Retry-After` (or the reset header) says, else a jittered backoff. Such a 429 does not use
  up one of the call's retries: the call waits, for as long as the run can still wait
  (PATIENCE_S of nothing but 429s, a Retry-After no longer than that). An exhausted quota
  or a request larger than the limit is an ordinary error: waiting does not fix it.

Times come from a clock object, so the arithmetic is tested with a fake clock, not sleeps.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Iterable

START_WINDOW = 4          # requests in flight before the provider has answered anything
HEADROOM = 0.98           # a bucket refills at this share of its limit ...
BURST_S = 0.1             # ... and holds this many seconds' worth: any window of 5 s or more
                          # (a minute, Azure's 10 s) sees at most the limit's share of it
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


# --- token bucket ---------------------------------------------------------------------------
class TokenBucket:
    """`per_minute` units a minute, paced evenly: it refills at HEADROOM of the limit and
    holds BURST_S seconds' worth (at least `minimum`: one request).

    A reservation may take the level below zero; its caller then waits until the debt would
    be repaid (`reserve` returns how long), so callers are served in the order they asked.
    In any window of W >= 5 s it lets through at most capacity + rate x W <= the limit's
    share of W (plus what calls reserved and did not use, given back when they end), so a
    provider counting over a sliding minute (or ten seconds) does not see more than its
    limit."""

    def __init__(self, per_minute: float, now: float, *, minimum: float = 0.0):
        self.per_minute = float(per_minute)
        self.capacity = max(minimum, self.per_minute * BURST_S / MINUTE)
        self.rate = self.per_minute * HEADROOM / MINUTE
        self.level = self.capacity
        self.t = now

    def _refill(self, now: float) -> None:
        if now > self.t:
            if self.level < self.capacity:
                self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
            self.t = now

    def reserve(self, n: float, now: float) -> float:
        """Take n now; seconds to wait before sending."""
        self._refill(now)
        self.level -= n
        return 0.0 if self.level >= 0 else -self.level / self.rate

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


# --- one model's limiter --------------------------------------------------------------------
class Lease:
    """One call's place: its window slot, its reservations, and whether it waited."""

    def __init__(self, limiter: "Limiter", tokens: int | None):
        self.limiter, self.tokens = limiter, tokens
        self.reserved = False
        self.tokens_reserved = 0.0   # what the tokens bucket holds for this call
        self.sent_at: float | None = None
        self.sent_seq = (0, 0)   # requests and tokens the limiter had sent before this one
        self.held = 0

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
    """One model endpoint's window, buckets, pause and counts (see the module docstring)."""

    def __init__(self, name: str, *, concurrency: int, rpm: float | None = None,
                 tpm: float | None = None, clock=None, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, seed: int = 0):
        self.name = name
        self.clock = clock or Clock()
        self.cap = max(1, int(concurrency))
        self.window = float(min(self.cap, START_WINDOW))
        self.in_flight = 0
        self.rpm_set, self.tpm_set = rpm, tpm
        self.rpm_seen: float | None = None   # from the provider's headers
        self.tpm_seen: float | None = None
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.pause_until = 0.0
        self.limited_since: float | None = None   # first 429 since the last answer
        self.streak = 0                            # 429s since the last answer
        self.decreased_at = float("-inf")
        self.n_sent = self.n_429 = self.waits = 0
        self.wait_s = 0.0
        self.tokens_used = 0
        self.tokens_sent = 0
        self.first_sent: float | None = None
        self._sent: deque[tuple[float, int]] = deque()   # (time, tokens reserved) last minute
        self._used: deque[tuple[float, int]] = deque()   # (time, tokens used) last minute
        self._cond = threading.Condition()
        self._rng = random.Random(seed)
        # a call holds this for its whole length (a slot on the wire only for the request):
        # at most 2 x concurrency calls are sent but not yet saved when a process dies
        self.calls = threading.BoundedSemaphore(2 * self.cap)
        self._rebuild(self.clock.now())

    # -- limits ------------------------------------------------------------------------------
    @property
    def rpm(self) -> float | None:
        known = [v for v in (self.rpm_set, self.rpm_seen) if v]
        return min(known) if known else None

    @property
    def tpm(self) -> float | None:
        known = [v for v in (self.tpm_set, self.tpm_seen) if v]
        return min(known) if known else None

    def _rebuild(self, now: float) -> None:
        for attr, limit, minimum in (("requests", self.rpm, 1.0), ("tokens", self.tpm, 0.0)):
            bucket = getattr(self, attr)
            if limit is None or (bucket is not None and bucket.per_minute == limit):
                continue
            new = TokenBucket(limit, now, minimum=minimum)
            if bucket is not None:   # a changed limit keeps what is owed
                bucket._refill(now)
                new.level = min(new.capacity, bucket.level)
            setattr(self, attr, new)

    def tighten(self, concurrency: int | None, rpm: float | None, tpm: float | None) -> None:
        """Another role uses the same model with its own limits: the tighter ones hold."""
        with self._cond:
            if concurrency and concurrency < self.cap:
                self.cap = concurrency
                self.window = min(self.window, float(concurrency))
            if rpm and (self.rpm_set is None or rpm < self.rpm_set):
                self.rpm_set = rpm
            if tpm and (self.tpm_set is None or tpm < self.tpm_set):
                self.tpm_set = tpm
            self._rebuild(self.clock.now())

    @property
    def wants_tokens(self) -> bool:
        """True when a call's tokens must be counted before it is sent (a tokens limit)."""
        return self.tokens is not None

    def lease(self, tokens: int | None = None) -> Lease:
        return Lease(self, tokens)

    # -- a call's way through --------------------------------------------------------------------
    def _acquire(self, lease: Lease) -> None:
        with self._cond:
            while self.in_flight >= max(1, int(self.window)):
                self._cond.wait()
            self.in_flight += 1
            lease.held += 1
        if lease.reserved:   # a second request of one call (not the OpenAI path): no new pacing
            return
        waited = 0.0
        while True:
            with self._cond:
                now = self.clock.now()
                delay = self.pause_until - now
                if delay > 0:    # paused by a 429: everyone waits, spread a little
                    delay += self._rng.uniform(0, min(1.0, 0.1 * delay))
                elif not lease.reserved:
                    lease.reserved = True
                    delay = 0.0
                    if self.requests is not None:
                        delay = self.requests.reserve(1, now)
                    # a call larger than a whole minute's tokens is sent as it is: the
                    # provider says whether it fits (OpenAI: 429 "Request too large")
                    if self.tokens is not None and lease.tokens and \
                            lease.tokens <= self.tokens.per_minute:
                        lease.tokens_reserved = lease.tokens
                        delay = max(delay, self.tokens.reserve(lease.tokens, now))
                if delay <= 0:
                    lease.sent_at = now
                    lease.sent_seq = (self.n_sent, self.tokens_sent)
                    self.n_sent += 1
                    self.tokens_sent += lease.tokens or 0
                    self.first_sent = now if self.first_sent is None else self.first_sent
                    self._sent.append((now, lease.tokens or 0))
                    self._prune(now)
                    if waited > 0.001:
                        self.waits += 1
                        self.wait_s += waited
                    return
            self.clock.sleep(delay)
            waited += delay

    def _release(self, lease: Lease) -> None:
        with self._cond:
            if lease.held > 0:
                lease.held -= 1
                self.in_flight -= 1
                self._cond.notify()

    def settle(self, lease: Lease, outcome: str, *, used: int | None = None,
               headers: dict[str, str] | None = None, now_wall: float | None = None) -> bool:
        """The call is over. `outcome`: "ok" (answered), "rate" (a 429 that waiting fixes),
        "quota" (one it does not) or "error". True when the caller should wait for this
        limiter and try again without counting a retry."""
        info = parse_headers(headers, now_wall) if headers else RateInfo()
        with self._cond:
            now = self.clock.now()
            if self.tokens is not None:
                if outcome == "ok" and used is not None:
                    self.tokens.settle(lease.tokens_reserved, used, now)
                elif outcome in ("rate", "quota"):   # not processed: not counted
                    self.tokens.settle(lease.tokens_reserved, 0, now)
            if outcome == "ok":
                self.limited_since, self.streak = None, 0
                n = used if used is not None else (lease.tokens or 0)
                self.tokens_used += n
                self._used.append((now, n))
                self._prune(now)
                grew = int(self.window)
                self.window = min(float(self.cap), self.window + 1.0 / self.window)
                if int(self.window) > grew:
                    self._cond.notify()
            if info:
                self._learn(info, lease, now)
            if outcome != "rate":
                return False
            self.n_429 += 1
            self.streak += 1
            if self.limited_since is None:
                self.limited_since = now
            if lease.sent_at is None or lease.sent_at > self.decreased_at:
                self.window = max(1.0, self.window / 2)   # once per window of requests
                self.decreased_at = now
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
                return False   # the run can wait no longer: an ordinary (failing) error
            self.pause_until = max(self.pause_until, now + wait)
            for bucket in (self.requests, self.tokens):
                if bucket is not None:
                    bucket.clamp(0.0, now)
            return True

    def _learn(self, info: RateInfo, lease: Lease, now: float) -> None:
        """Slow to what the provider's headers say."""
        changed = False
        if info.limit_requests and info.limit_requests != self.rpm_seen:
            self.rpm_seen, changed = info.limit_requests, True
        if info.limit_tokens and info.limit_tokens != self.tpm_seen:
            self.tpm_seen, changed = info.limit_tokens, True
        if changed:
            self._rebuild(now)
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
                bucket.clamp(remaining - after, now)
            elif remaining - after <= 0 or (kind == "tokens" and lease.tokens and
                                            remaining - after < lease.tokens):
                # no limit known (Azure says only what remains): wait for its reset
                wait = reset if reset is not None and reset <= PATIENCE_S else 1.0
                self.pause_until = max(self.pause_until, now + wait)

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
            per_min = MINUTE / span if span > 1.0 else 0.0
            source = ("set" if (self.rpm_set or self.tpm_set) else
                      "headers" if (self.rpm_seen or self.tpm_seen) else None)
            return {"model": self.name, "in_flight": self.in_flight,
                    "window": int(self.window), "concurrency": self.cap,
                    "rpm": self.rpm, "tpm": self.tpm, "source": source,
                    "requests_per_min": round(len(self._sent) * per_min),
                    "tokens_per_min": round(sum(n for _, n in self._used) * per_min),
                    "requests": self.n_sent, "tokens": self.tokens_used,
                    "waits": self.waits, "wait_s": round(self.wait_s, 1),
                    "rate_limited": self.n_429}


def _num(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,}"


def status_line(s: dict) -> str:
    """One model's line in a run's progress."""
    limits = ", ".join(f"{k} {_num(v)}" for k, v in (("rpm", s["rpm"]), ("tpm", s["tpm"])) if v)
    how = {"set": f"limits set: {limits}", "headers": f"from the provider's headers: {limits}",
           None: "adaptive: no limit known"}[s["source"]]
    line = (f"{s['model']}: {s['in_flight']} in flight (window {s['window']} of "
            f"{s['concurrency']}), {s['requests_per_min']:,} req/min, "
            f"{s['tokens_per_min']:,} tok/min, {s['waits']:,} waits on the limit")
    if s["rate_limited"]:
        line += f", {s['rate_limited']:,} answered 429"
    return f"{line} ({how})"


def describe_limits(spec, default_concurrency: int) -> str:
    """A model's limits as configured (abtest doctor)."""
    conc = (f"{spec.concurrency} in flight" if spec.concurrency else
            f"{default_concurrency} in flight (the run's concurrency)")
    rates = [f"{k} {_num(v)}" for k, v in (("rpm", spec.rpm), ("tpm", spec.tpm)) if v]
    if rates:
        return f"{conc}, {', '.join(rates)}"
    return (f"{conc}; no rpm/tpm set: paced by the provider's rate-limit headers and 429s, "
            f"from {min(START_WINDOW, spec.concurrency or default_concurrency)} in flight up")


def in_flight_bound(specs: Iterable, default_concurrency: int) -> int:
    """Requests a run's models may have in flight at once (to size its worker threads)."""
    caps: dict[tuple, int] = {}
    for s in specs:
        key = (s.model, s.api_base)
        cap = s.concurrency or default_concurrency
        caps[key] = min(caps.get(key, cap), cap)
    return max(1, sum(caps.values()))


class Limits:
    """One limiter per model endpoint, shared by every call to it."""

    def __init__(self, concurrency: int = 8, *, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, clock=None):
        self.concurrency = concurrency
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.clock = clock
        self._by_key: dict[tuple, Limiter] = {}
        self._seen: set[tuple] = set()
        self._lock = threading.Lock()

    def get(self, spec) -> Limiter:
        key = (spec.model, spec.api_base)
        mine = (key, spec.concurrency, spec.rpm, spec.tpm)
        with self._lock:
            lim = self._by_key.get(key)
            if lim is None:
                lim = Limiter(spec.model, concurrency=spec.concurrency or self.concurrency,
                              rpm=spec.rpm, tpm=spec.tpm, clock=self.clock,
                              backoff_base_s=self.backoff_base_s,
                              backoff_max_s=self.backoff_max_s, seed=len(self._by_key))
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
