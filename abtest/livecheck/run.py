"""Live confirmation: how much of a frozen effect survives real retrieval, end to end.

`abtest live --golden QUESTIONS --a TARGET --b TARGET [--frozen-run RUN_ID]` asks two
running assistants (A and B: same system, different prompt; see `targets`) every golden
question, stores each answer with the chunks the live system actually retrieved, then scores
them with the same judges as a frozen run (the same Gateway and judge functions, the judge
model from the config), against those live contexts. Metrics only a live run has: context
precision / recall against the golden `relevant_chunk_ids`, and latency.
`abtest.reporting.live.build_live_report` turns the stored rows into the report.

Every item is written as soon as it exists (table `live_items`). Calls are made one
at a time so a measured latency is not inflated by our own load; judging starts only
after the last call. An endpoint unreachable or failing past its retries stops the
run cleanly: finished items are kept (and judged), the run is marked incomplete and
`LiveIncomplete` (an `IncompleteRunError`, exit 3) says "incomplete — endpoint
unreachable". Nothing is estimated; unfinished questions are never scored.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from abtest.errors import IncompleteRunError, UserError
from abtest.livecheck.targets import BAD_ANSWER, UNREACHABLE, LiveAnswer, TargetError, TargetOptions, parse_target

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.core.models import Config
    from abtest.store import Store

from abtest.core.progress import Progress
from abtest.core.models import ChecksSpec, Variant
from abtest.core.models import Case, Chunk
from abtest.prompts.checks import run_checks
from abtest.judges.plan import JudgeInputs, judge_tasks
from abtest.prompts.checks import validate_case_patterns, validate_patterns
from abtest.capturing import load_questions
from abtest.llm import check_credentials, preload
from abtest.running.plan import config_record, git_commit_of, new_run_id
from abtest.store import Store
from abtest.llm import Gateway, ModelDriftError
from abtest.store.state import run_progress
from abtest.store.runs import resolve_run
from abtest.core.names import check_id

VARIANTS = ("A", "B")


class LiveIncomplete(IncompleteRunError):
    """The live run stopped early; finished items are saved. Carries the run id."""

    def __init__(self, message: str, run_id: str, result: "LiveResult | None" = None):
        super().__init__(message)
        self.run_id = run_id
        self.result = result


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


def judge_question(gw: Gateway, cfg: Config, store: Store, run_id: str, q: dict,
                   items: dict[str, dict], *, citation_pattern: str | None,
                   corpus_version: str) -> list[str]:
    """Checks and judges for one question whose A and B answers both exist."""

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
    # the one judge plan (judges.plan); the pairwise judge sees everything either system
    # retrieved (A's chunks, then B's new ones)
    both = build_case(q, chunks["A"] + chunks["B"], retriever="live:A+B",
                      corpus_version=corpus_version)
    for task in judge_tasks(gw, cfg, JudgeInputs(cases, both, answers)):
        for row, claims in task():
            put(row, claims)
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
        raise UserError("{resume} needs {run_id} (the live run to continue)",
                        opts={"resume": True, "run_id": None})

    store = Store(lc.store_path)
    try:
        frozen = None
        if frozen_run:

            frozen_run = resolve_run(store, frozen_run, kind="frozen")
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
            assert run_id  # checked above: --resume needs --run-id
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

            run_id = check_id(run_id, field="--run-id") if run_id else new_run_id()
            if store.get_run(run_id) is not None:
                raise UserError(f"run id {run_id!r} already exists; use {{resume}} to continue it",
                                opts={"resume": True})
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
                "git_commit": git_commit_of(Path.cwd()), "config_json": config_record(lc),
                "info_json": json.dumps(info, sort_keys=True)})
        say(f"live run {run_id}: {len(questions)} questions, A={targets['A'].shown} "
            f"B={targets['B'].shown}, judge {cfg.judge.model}")
        return _execute(lc, store, run_id, questions, records, targets, cv, citation_pattern,
                        say, resume)
    finally:
        store.close()


def _execute(lc, store: Store, run_id, questions, records, targets, corpus_version,
             citation_pattern, say, resume) -> LiveResult:

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
    # complete by the one rule (runstate): every question answered by both and fully judged

    prog = run_progress(store, store.get_run(run_id) or {"run_id": run_id, "kind": "live",
                                                          "status": "running"}, writing=None)
    unfinished = prog.unfinished
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
