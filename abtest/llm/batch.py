"""Provider batches (`abtest run --batch`): the same requests at about half the price.

A batch run is a series of passes over the pipeline. In a pass the gateway answers what the
response cache holds and defers every other call to an OpenAI-compatible model (`Deferred`
stops that step of the case; nothing is stored for it); at the end of the pass the deferred
requests go to the provider as one batch per model, and the batch ids are stored with the
run. Collecting a finished batch writes each answer to the response cache and the call log,
exactly as a single call would; the next pass then gets further (a judge needs the answers
first), until a pass defers nothing. A process may die at any point between: `--resume`
collects what the store says is out. A request the batch did not answer (a failed line, an
expired or failed batch) is made as a single call in the next pass; if that fails too, the
case is unfinished and the run incomplete (exit 3) — nothing is estimated.

Calls to models without an OpenAI-compatible batch interface (the embedded model) are made
directly, as without --batch.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from abtest.errors import IncompleteRunError, UserError
from abtest.core.models import ModelSpec
from abtest.llm.provider import get_litellm, is_in_process
from abtest.llm.provider import call_kwargs
from abtest.llm.provider import describe_for
from abtest.llm.provider import batch_cost, result_from

if TYPE_CHECKING:
    from abtest.store import Store
    from abtest.llm.provider import LLMResult


class Collector(Protocol):
    """What collecting a batch asks of the gateway (`Gateway`, which imports this module)."""

    def pin(self, requested: str, resolved: str | None) -> None: ...

    def call_rows(self, res: LLMResult, spec: ModelSpec, purpose: str, case_id: str | None,
                  attempt: int) -> tuple[dict, dict | None]: ...

ENDPOINT = "/v1/chat/completions"
MAX_LINES = 50_000            # the OpenAI Batch API's limit per batch
MAX_BYTES = 190 * 1024 ** 2   # and its 200 MB input file limit, with room to spare
FINISHED = ("completed", "expired", "failed", "cancelled")


class BatchPending(IncompleteRunError):
    """The pass ended with requests out in provider batches."""


class Deferred(Exception):
    """This call waits for a batch: the step that needs it is retried in the next pass."""


@dataclass
class Request:
    call_hash: str
    spec: ModelSpec
    body: dict
    purpose: str
    case_id: str | None


def batchable(spec: ModelSpec) -> bool:
    """True when litellm speaks to this model as OpenAI (hosted, or any compatible server)."""

    if is_in_process(spec.model):
        return False
    try:
        return get_litellm().get_llm_provider(spec.model)[1] == "openai"
    except Exception:
        return False


def request_body(spec: ModelSpec, kw: dict) -> dict:
    """The JSON body a single call would send, for one line of the batch file."""

    model = get_litellm().get_llm_provider(spec.model)[0]
    skip = {"model", "timeout", "api_base", "api_key", "max_retries", "num_retries"}
    return {"model": model, **{k: v for k, v in kw.items() if k not in skip}}


class BatchQueue:
    """The requests one pass defers, each once (identical calls share a hash)."""

    def __init__(self, direct: set[str] | None = None):
        self.direct = set(direct or ())   # hashes a batch did not answer: single calls now
        self._items: dict[str, Request] = {}
        self._lock = threading.Lock()
        self._can: dict[tuple, bool] = {}

    def takes(self, spec: ModelSpec, call_hash: str) -> bool:
        if call_hash in self.direct:
            return False
        key = (spec.model, spec.api_base)
        if key not in self._can:
            self._can[key] = batchable(spec)
        return self._can[key]

    def has(self, call_hash: str) -> bool:
        return call_hash in self._items

    def add(self, req: Request) -> None:
        with self._lock:
            self._items.setdefault(req.call_hash, req)

    def __len__(self) -> int:
        return len(self._items)

    def groups(self) -> dict[tuple, list[Request]]:
        """Requests per (model, endpoint): each group becomes one or more batches."""
        out: dict[tuple, list[Request]] = {}
        for req in self._items.values():
            out.setdefault((req.spec.model, req.spec.api_base, req.spec.api_key_env),
                           []).append(req)
        return out


def _provider_kwargs(spec: ModelSpec) -> dict:

    kw = call_kwargs(spec, 120)
    kw.pop("model")
    return {"custom_llm_provider": "openai", **kw}


def _chunks(reqs: list[Request]) -> list[list[tuple[Request, bytes]]]:
    """Each request with its line of the batch file, in files within the API's limits."""
    parts: list[list[tuple[Request, bytes]]] = [[]]
    size = 0
    for req in reqs:
        line = (json.dumps({"custom_id": req.call_hash, "method": "POST", "url": ENDPOINT,
                            "body": req.body}, ensure_ascii=False) + "\n").encode("utf-8")
        if parts[-1] and (len(parts[-1]) >= MAX_LINES or size + len(line) > MAX_BYTES):
            parts.append([])
            size = 0
        parts[-1].append((req, line))
        size += len(line)
    return parts


def submit(store: Store, run_id: str, queue: BatchQueue, progress: Callable[[str], None] | None
           ) -> list[str]:
    """Upload each group's requests and create its batch; every batch id is stored as soon as
    the provider has it (a batch created but not stored would be paid for and never read)."""

    litellm = get_litellm()
    ids = []
    for (model, api_base, _), reqs in queue.groups().items():
        spec = reqs[0].spec
        kw = _provider_kwargs(spec)
        for part in _chunks(reqs):
            data = b"".join(line for _, line in part)
            try:
                f = litellm.create_file(file=(f"abtest-{run_id}.jsonl", data,
                                              "application/jsonl"), purpose="batch", **kw)
                b = litellm.create_batch(completion_window="24h", endpoint=ENDPOINT,
                                         input_file_id=f.id, metadata={"abtest_run": run_id},
                                         **kw)
            except Exception as exc:
                raise IncompleteRunError(f"--batch: could not submit a batch to {model}: "
                                      f"{describe_for(spec, exc)}; finished work is kept"
                                      ) from None
            store.put_batch({"batch_id": b.id, "run_id": run_id, "model": model,
                             "api_base": api_base, "input_file_id": f.id, "status": b.status,
                             "n_requests": len(part)},
                            [{"call_hash": r.call_hash, "purpose": r.purpose,
                              "case_id": r.case_id} for r, _ in part])
            ids.append(b.id)
            if progress:
                progress(f"batch {b.id}: {len(part)} request(s) to {model} submitted")
    return ids


def preflight(specs: list[ModelSpec]) -> list[ModelSpec]:
    """Before anything is stored: the models whose calls will be batched, each endpoint asked
    once whether it has a Batch API (a local OpenAI-compatible server often has none)."""

    seen, out = set(), []
    for spec in specs:
        key = (spec.model, spec.api_base)
        if key in seen or not batchable(spec):
            continue
        seen.add(key)
        out.append(spec)
        try:
            get_litellm().list_batches(limit=1, **_provider_kwargs(spec))
        except Exception as exc:
            where = f"{spec.model}" + (f" at {spec.api_base}" if spec.api_base else "")
            if getattr(exc, "status_code", None) in (404, 405, 501):
                raise UserError(f"--batch: {where} has no Batch API ("
                                f"{describe_for(spec, exc)}); run without --batch",
                                field="--batch") from None
            raise IncompleteRunError(f"--batch: could not reach the Batch API of {where}: "
                                  f"{describe_for(spec, exc)}") from None
    if not out:
        raise UserError("--batch: no model of this run has an OpenAI-compatible Batch API ("
                        + ", ".join(sorted({s.model for s in specs})) + "); run without --batch",
                        field="--batch")
    return out


def _spec_of(batch: dict, specs: list[ModelSpec]) -> ModelSpec:
    for spec in specs:
        if spec.model == batch["model"] and spec.api_base == batch["api_base"]:
            return spec
    raise UserError(f"batch {batch['batch_id']} went to {batch['model']}"
                    + (f" at {batch['api_base']}" if batch["api_base"] else "")
                    + ", which this run's config no longer names; resume with the config it "
                    "started with", field="--batch")


def _lines(litellm, file_id: str | None, kw: dict) -> list[dict]:
    if not file_id:
        return []
    data = litellm.file_content(file_id=file_id, **kw).content
    return [json.loads(x) for x in data.decode("utf-8").splitlines() if x.strip()]


def _line_error(line: dict) -> str:
    err = line.get("error") or ((line.get("response") or {}).get("body") or {}).get("error") or {}
    code = (line.get("response") or {}).get("status_code")
    text = (err.get("code") or err.get("type") or "") + ": " + (err.get("message") or "")
    return f"batch line failed{f' (HTTP {code})' if code else ''}: {text.strip(': ')}"[:300]


def collect(gw: Collector, store: Store, run_id: str, specs: list[ModelSpec], *, wait: bool,
            poll_s: float, progress: Callable[[str], None] | None) -> list[dict]:
    """Collect every finished batch of the run; with wait, poll until none is out. Returns
    the batches still out (only when not waiting)."""

    litellm = get_litellm()
    said: dict[str, str] = {}
    while True:
        out = []
        for batch in store.batches(run_id, pending=True):
            spec = _spec_of(batch, specs)
            kw = _provider_kwargs(spec)
            try:
                b = litellm.retrieve_batch(batch_id=batch["batch_id"], **kw)
            except Exception as exc:
                raise IncompleteRunError(f"--batch: could not read batch {batch['batch_id']}: "
                                      f"{describe_for(spec, exc)}; `--resume --batch` tries "
                                      "again") from None
            if b.status not in FINISHED:
                out.append(batch)
                counts = getattr(b, "request_counts", None)
                line = (f"batch {batch['batch_id']}: {b.status}"
                        + (f", {counts.completed + counts.failed}/{counts.total} done"
                           if counts and counts.total else ""))
                if progress and said.get(batch["batch_id"]) != line:
                    progress(line)
                said[batch["batch_id"]] = line
                continue
            _collect_one(gw, store, batch, b, spec, litellm, kw, progress)
        if not out or not wait:
            return out
        time.sleep(poll_s)


def _collect_one(gw: Collector, store: Store, batch: dict, b, spec: ModelSpec, litellm,
                 kw: dict, progress) -> None:

    reqs = {r["call_hash"]: r for r in store.batch_requests(batch["batch_id"])}
    calls, failed, answered = [], {}, set()
    for line in _lines(litellm, b.output_file_id, kw) + _lines(litellm, b.error_file_id, kw):
        h = line.get("custom_id")
        if not isinstance(h, str) or h not in reqs or h in failed or h in answered:
            continue
        resp = line.get("response") or {}
        if line.get("error") or resp.get("status_code") != 200:
            failed[h] = _line_error(line)
            continue
        res = result_from(litellm, litellm.ModelResponse(**resp["body"]), h, None)
        res.cost = batch_cost(spec, res.prompt_tokens, res.completion_tokens)
        res.attempts = 1
        if not res.content or not res.content.strip():
            failed[h] = "batch line failed: empty content from provider"
            continue
        gw.pin(spec.model, res.model_resolved)
        req = reqs[h]
        row, cache = gw.call_rows(res, spec, req["purpose"], req["case_id"], attempt=1)
        assert cache is not None  # an answer, fresh and without error, has its cache row
        calls.append((row, cache))
        answered.add(h)
    for h in reqs:   # a request the provider returned no line for did not get an answer
        if h not in failed and h not in answered:
            failed[h] = f"batch {b.status} without an answer for this request"
    note = None if b.status == "completed" else f"batch {b.status}"
    store.collect_batch(batch["batch_id"], b.status, calls, failed, note)
    if progress:
        progress(f"batch {batch['batch_id']}: {b.status}; {len(calls)} answer(s) collected"
                 + (f", {len(failed)} to be made as single calls" if failed else ""))
