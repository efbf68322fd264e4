"""Capture: freeze what a retriever returns for a question set into a sealed fixture.

Capture and comparison are separate commands by design: a fixture is refreshed on a
schedule, never in the same run as a comparison. The questions come from
abtest.imports.questions, in whatever format they were written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from abtest.errors import UserError
from abtest.core.models import Case, Chunk, Question
from abtest.core.fixture_set import Fixture, write_fixture
from datetime import date
import random

def capture(questions: list[Question], retriever, *, out: str | os.PathLike,
            corpus_version: str | None = None, k: int | None = 5, force: bool = False,
            refresh_every_days: int = 30,
            progress: Callable[[str], None] | None = None) -> Fixture:
    """Run retrieval once for every question and freeze the result.

    A case's corpus_version is the source's own label when the retriever reports one (an
    imported capture file's rows), else `corpus_version`, else today's date (said in
    progress); the manifest lists the distinct labels of its cases."""

    out = Path(out)
    if out.exists() and not force:
        raise UserError("fixture already exists; pass {force} to replace it deliberately",
                        file=str(out), opts={"force": True})
    if hasattr(retriever, "check"):
        retriever.check()
    if progress:
        progress(f"retrieving for {len(questions)} questions with {retriever.name} "
                 f"(k={k or 'all, as given'})")
    results = retriever.retrieve_many([(q.id, q.question) for q in questions], k)
    fallback = corpus_version or date.today().isoformat()
    n_dated = 0
    changed = {"cut": [0, 0], "repeated": [0, 0], "truncated": [0, 0]}   # [chunks, cases]
    cases: list[Case] = []
    for q in questions:
        got = results.get(q.id)
        if got is None:
            raise UserError("retriever returned no result for this question",
                            where=f"question {q.id}")
        chunks = got.chunks if hasattr(got, "chunks") else got
        for what in changed:
            n = getattr(got, f"n_{what}", 0)
            changed[what][0] += n
            changed[what][1] += n > 0
        scores = [c.score for c in chunks]
        fields = q.golden_fields()
        version = getattr(got, "corpus_version", None) or corpus_version
        if version is None:
            version, n_dated = fallback, n_dated + 1
        case = Case(
            id=q.id, question=q.question,
            context=[c.to_chunk() if hasattr(c, "to_chunk") else Chunk(id=c.id, text=c.text)
                     for c in chunks],
            corpus_version=version, retriever=retriever.name, answerable=q.answerable,
            retrieval_scores=[float(s) for s in scores] if chunks and all(s is not None for s in scores) else None,
            keywords=getattr(got, "keywords", None) or None,
            search_terms=getattr(got, "search_terms", None) or None,
            **fields)
        cases.append(case)
    tags = _auto_tags(cases)
    if tags:
        cases = [c.model_copy(update={"tags": sorted(set((c.tags or []) + tags[c.id]))})
                 if c.id in tags else c for c in cases]
    # what the question import recorded (repeats kept once, answers assumed): QuestionList
    notes: dict | None = dict(getattr(questions, "notes", None) or {}) or None
    said = {"cut": f"beyond k={k} (--k), not kept",
            "repeated": "the same chunk (id and text) given twice for one question, kept once",
            "truncated": f"cut to max_chars={getattr(retriever, 'max_chars', None)} characters"}
    for what, (n_chunks, n_cases) in changed.items():
        if n_chunks:
            notes = {**(notes or {}), f"chunks_{what}": {"chunks": n_chunks, "cases": n_cases,
                                                         "why": said[what]}}
            if progress:
                progress(f"note: {n_chunks} chunk(s) in {n_cases} case(s) {said[what]}")
    fallbacks = getattr(retriever, "rerank_fallbacks", None)
    if fallbacks:
        notes = {**(notes or {}),
                 "rerank_fallback": {str(k): v for k, v in sorted(fallbacks.items())}}
        if progress:
            progress(f"warning: reranker unavailable for {len(fallbacks)} question(s); kept the "
                     f"fused order (recorded in manifest.json notes)")
    if n_dated and progress:
        progress(f"note: {n_dated} case(s) had no corpus version from the source or "
                 f"--corpus-version; labelled with today's date {fallback}")
    versions = ",".join(sorted({c.corpus_version for c in cases})) or fallback
    return write_fixture(out, cases, corpus_version=versions, retriever=retriever.name,
                         refresh_every_days=refresh_every_days, force=force, notes=notes)


def _auto_tags(cases: list[Case]) -> dict[str, list[str]]:
    """Tag answerable cases whose relevant chunks were not retrieved: a retrieval miss."""
    tags: dict[str, list[str]] = {}
    for c in cases:
        if c.answerable and c.relevant_chunk_ids:
            got = {ch.id for ch in c.context}
            if not got.intersection(c.relevant_chunk_ids):
                tags[c.id] = ["no_relevant_chunk"]
    return tags


def add_unanswerable(fx: Fixture, *, n: int, seed: int = 0) -> Fixture:
    """Counterfactual refusals: drop the relevant chunks of N answerable cases."""

    pool = [c for c in fx.cases if c.answerable and c.relevant_chunk_ids
            and set(c.relevant_chunk_ids) & {ch.id for ch in c.context}]
    if not pool:
        raise UserError("no answerable case with relevant_chunk_ids in its context", file=str(fx.path))
    if n < 1:
        raise UserError(f"n must be at least 1, not {n}", field="--from-answerable")
    rng = random.Random(seed)
    picked = rng.sample(pool, min(n, len(pool)))
    new_cases = list(fx.cases)
    existing = {c.id for c in fx.cases}
    for c in picked:
        given: list[float | None] = [None] * len(c.context)
        if c.retrieval_scores:
            given = list(c.retrieval_scores)
        keep = [(ch, s) for ch, s in zip(c.context, given)
                if ch.id not in set(c.relevant_chunk_ids or [])]
        nid = f"{c.id}__cf"
        if nid in existing:
            continue
        scores = [s for _, s in keep]
        new_cases.append(c.model_copy(update={
            "id": nid, "context": [ch for ch, _ in keep], "answerable": False,
            "category": "out_of_scope", "reference_answer": None, "key_points": None,
            "expected_citations": None, "relevant_chunk_ids": [],
            "retrieval_scores": scores if c.retrieval_scores is not None else None,
            "tags": sorted(set((c.tags or []) + ["synthetic", "no_relevant_chunk"]))}))
    m = fx.manifest
    return write_fixture(fx.path, new_cases, name=m.name, corpus_version=m.corpus_version,
                         retriever=m.retriever, refresh_every_days=m.refresh_every_days, force=True,
                         captured_at=m.captured_at, notes=m.notes)
