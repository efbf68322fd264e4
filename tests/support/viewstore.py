"""A results store written through the Store API for the view's tests: cases whose answers,
claims, scores and verdicts the test chooses, so every figure a page shows can be computed
independently from these rows."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from abtest.capturing import load_fixture, write_fixture
from abtest.core.models import Case, Chunk, Config


@dataclass
class Side:
    answer: str = "An answer."
    faith: float | None = 1.0
    claims: list[tuple[str, str, str | None]] = field(default_factory=list)  # (text, verdict, chunk)
    abstained: bool = False
    error: str | None = None          # a generation that failed
    judge_error: str | None = None    # a faithfulness judgment that failed


@dataclass
class SCase:
    id: str
    question: str | None = None   # None: a question of its own (one shared would be repeats)
    answerable: bool = True
    category: str = "factual"
    chunks: list[tuple[str, str]] = field(default_factory=lambda: [("c1", "A chunk.")])
    a: Side = field(default_factory=Side)
    b: Side = field(default_factory=Side)
    pairwise: tuple[str, str] | None = ("tie", "tie")   # (A shown first, B shown first) → winner
    started: bool = True


JUDGES = ["pairwise", "faithfulness", "abstention"]


def write_run(store, root: Path, run_id: str, cases: list[SCase], *, status: str = "complete",
              variants=("plain", "grounded"), config: Config | None = None,
              fixture_cases: list[SCase] | None = None) -> None:
    """One run of `cases` (rows for every started case); the fixture holds `fixture_cases`
    (default: the same cases)."""
    fx = root / "fixtures" / run_id
    if not (fx / "manifest.json").exists():
        write_fixture(fx, [Case(id=c.id, question=c.question or f"What about {c.id}?",
                                answerable=c.answerable,
                                category=c.category, corpus_version="v1", retriever="test",
                                context=[Chunk(id=i, text=t) for i, t in c.chunks])
                           for c in (fixture_cases or cases)], corpus_version="v1",
                      retriever="test")
    cfg = config or Config(judges=JUDGES)
    store.create_run({"run_id": run_id, "status": status, "fixture_name": run_id,
                      "fixture_path": str(fx), "n_cases": len(fixture_cases or cases),
                      "fixture_sha256": load_fixture(fx).cases_sha256, "corpus_version": "v1",
                      "retriever": "test", "variant_a_name": variants[0],
                      "variant_a_sha256": "a" * 64, "variant_a_path": "variants/a.yaml",
                      "variant_b_name": variants[1], "variant_b_sha256": "b" * 64,
                      "variant_b_path": "variants/b.yaml", "generator_model": "gen",
                      "judge_model": "judge", "comparison_kind": "prompt",
                      "config_json": cfg.model_dump_json(),
                      "info_json": json.dumps({"judges": cfg.judges})})
    write_cases(store, run_id, cases)


def write_cases(store, run_id: str, cases: list[SCase]) -> None:
    for c in cases:
        if not c.started:
            continue
        for v, side in (("A", c.a), ("B", c.b)):
            store.put_generation({"run_id": run_id, "case_id": c.id, "variant": v,
                                  "answer": None if side.error else side.answer,
                                  "error": side.error,
                                  "messages_json": json.dumps([{"role": "system",
                                                                "content": f"prompt {v}"}])})
        if c.a.error or c.b.error:
            continue
        if c.pairwise:
            for order, verdict in zip(("AB", "BA"), c.pairwise):
                store.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "pairwise",
                                    "subject": order, "verdict": verdict, "rationale": "r"})
        for v, side in (("A", c.a), ("B", c.b)):
            if side.judge_error:
                store.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "faithfulness",
                                    "subject": v, "verdict": None, "score": None,
                                    "error": side.judge_error})
            else:
                store.put_judgment(
                    {"run_id": run_id, "case_id": c.id, "judge": "faithfulness", "subject": v,
                     "verdict": "scored" if side.faith is not None else "no_claims",
                     "score": side.faith},
                    claims=[{"claim": t, "verdict": vd, "chunk_id": ch}
                            for t, vd, ch in side.claims])
            store.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "abstention",
                                "subject": v,
                                "verdict": "abstained" if side.abstained else "answered"})


def make_store(root: Path, runs: dict[str, list[SCase]], **kw) -> Path:
    from abtest.store import Store

    root.mkdir(parents=True, exist_ok=True)
    path = root / "s.duckdb"
    s = Store(path)
    try:
        for rid, cases in runs.items():
            write_run(s, root, rid, cases, **kw)
    finally:
        s.close()
    return path


def report(path: Path, run_id: str) -> dict:
    """The run's report as `abtest report --format json` gives it."""
    from abtest.reporting.summary import build_any
    from abtest.store.runs import load_run
    from abtest.store import Store

    s = Store(path, read_only=True, create=False)
    try:
        return json.loads(json.dumps(build_any(s, load_run(s, run_id)).as_dict(), default=str))
    finally:
        s.close()


@contextmanager
def served(path: Path, poll_ms: int | None = None):
    """`abtest view` on the store, in a thread: its URL (`poll_ms`: how often its pages ask
    whether a run moved; the view's own default when None)."""
    from abtest.view.app import serve

    box, ready = {}, threading.Event()

    def on_ready(url, srv):
        box.update(url=url, srv=srv)
        ready.set()

    kw = {"on_ready": on_ready, **({"poll_ms": poll_ms} if poll_ms is not None else {})}
    t = threading.Thread(target=serve, args=(path,), kwargs=kw, daemon=True)
    t.start()
    assert ready.wait(30)
    try:
        yield box["url"]
    finally:
        box["srv"].should_exit = True
        t.join(10)
