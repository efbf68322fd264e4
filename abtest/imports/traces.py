"""Fixtures from traces: what production retrieval really returned, frozen as cases.

`abtest capture --from-traces FILE` reads retrieval steps from an export of a RAG app's
traces: OpenTelemetry (OTLP JSON, as a collector's file exporter writes it) with the
OpenInference conventions Phoenix/Arize instrumentations use, Phoenix's own span export, or
Langfuse traces with their observations. Each trace becomes one case: its question, the
chunks its retrieval returned (ids and texts in rank order, byte for byte; several retrieval
steps are joined in time order, a chunk kept once), the retriever's name and the time, and
in `meta` the source trace and span ids and the retriever's own query. A question asked in
several traces is kept once (the earliest) and counted as repeated. A retrieval step that
cannot make a case is skipped and said why, never dropped silently. Traces do not say
whether the corpus could answer, so every case is marked answerable and the manifest says
this was assumed. A trace's session or conversation id, when the export has one, becomes the
case's `group` (questions asked in one session are not independent draws), and the capture
says so.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from abtest.errors import UserError
from abtest.imports.trace_formats import Doc, Step, TraceRead
from abtest.imports import trace_formats as tf
from abtest.core.records import read_json_values
from abtest.core.models import Case, Chunk
from datetime import date
from abtest.core.fixture_set import write_fixture

__all__ = ["Doc", "Step", "TraceRead", "read_traces", "cases_from_traces", "capture_from_traces"]


# --------------------------------------------------------------------------- reading

def read_traces(path: Path, fmt: str = "auto") -> TraceRead:
    """Retrieval steps of every trace in the export (format detected unless given)."""


    path = Path(path)
    records = read_json_values(path, "a trace export file",
                               known_fields={"span_kind", "context.trace_id", "name",
                                             "parent_id", "start_time"})
    if not records:
        raise UserError("no trace records in the file", file=str(path))
    if fmt == "auto":
        fmt = tf.detect(records, path)
    elif (looks := tf.looks_like(records)) not in (None, fmt):
        raise UserError(f"this is not a {tf.FORMAT_NAMES[fmt]} export: it looks like "
                        f"{tf.FORMAT_NAMES[looks]} (leave out --trace-format, or give "
                        f"--trace-format {looks})", file=str(path), field="--trace-format")
    reader: Callable[[list[tuple[str, Any]], TraceRead], None] = tf.READERS[fmt]
    out = TraceRead(fmt, path)
    reader(records, out)
    if not out.n_spans and not out.steps:
        raise UserError(f"this is not a {tf.FORMAT_NAMES[fmt]} export: no record has its "
                        f"fields (the first has: {tf.record_keys(records)})", file=str(path),
                        field="--trace-format")
    return out


# --------------------------------------------------------------------------- cases

def cases_from_traces(read: TraceRead, *, corpus_version: str, source_name: str
                      ) -> tuple[list, list[tuple[str, str]], dict]:
    """(cases, skipped, counts): one case per trace with a usable retrieval, questions kept
    once. `skipped` lists every retrieval step or trace that made no case and why, repeated
    questions included (counted apart in `counts["repeated"]`)."""

    skipped = list(read.skipped)
    by_trace: dict[str, list[Step]] = {}
    for st in read.steps:
        problem = _problem(st)
        if problem:
            skipped.append((st.where, f"span {st.span_id} ({st.name}) of trace {st.trace_id}: "
                                      f"{problem}"))
            continue
        by_trace.setdefault(st.trace_id, []).append(st)
    seen: dict[str, str] = {}
    cases = []
    repeated: list[tuple[str, str]] = []
    for trace_id, steps in sorted(by_trace.items(), key=lambda kv: min(s.time for s in kv[1])):
        steps.sort(key=lambda s: s.time)
        if trace_id in read.bad_inputs:   # a trace that retrieved: its question must be text
            where, why = read.bad_inputs[trace_id]
            raise UserError(f"trace {trace_id}: its input is not a question abtest can read "
                            f"as text ({why}); export traces whose input is the user's "
                            "question, or a chat whose last user message is",
                            file=str(read.path), where=where)
        queries = [s.query for s in steps if s.query]
        question = read.questions.get(trace_id) or (queries[0] if queries else "")
        if not question:
            skipped.append((steps[0].where, f"trace {trace_id}: no question (neither the trace's "
                                            "input nor the retrieval's query is text)"))
            continue
        norm = " ".join(question.casefold().split())
        if norm in seen:
            repeated.append((steps[0].where, f"trace {trace_id}: same question as trace "
                                             f"{seen[norm]} (kept once, the earliest)"))
            continue
        chunks: list[Chunk] = []
        scores: list[float | None] = []
        by_id: dict[str, str] = {}
        clash = None
        for st in steps:
            for d in st.docs:
                # _problem kept out every step with a document lacking an id or text
                assert d.id is not None and d.text is not None
                cid = d.id
                if cid in by_id:
                    if by_id[cid] == d.text:
                        continue                      # the same chunk again: kept once
                    if not d.derived_id:
                        clash = (f"trace {trace_id}: chunk id {cid!r} retrieved twice with "
                                 "different text")
                        break
                    # an id taken from a document's metadata, shared by several of its chunks
                    cid = f"{cid}#sha256:{hashlib.sha256(d.text.encode('utf-8')).hexdigest()[:12]}"
                    if cid in by_id:
                        continue
                by_id[cid] = d.text
                chunks.append(Chunk(id=cid, text=d.text, meta=d.meta))
                scores.append(d.score)
            if clash:
                break
        if clash:
            skipped.append((steps[0].where, clash))
            continue
        seen[norm] = trace_id
        names = sorted({s.name for s in steps})
        meta = {"source": read.fmt, "file": source_name, "trace_id": trace_id,
                "span_ids": [s.span_id for s in steps], "retrieved_at": steps[0].time,
                "answerable": "assumed (traces do not say)"}
        if queries:
            meta["retrieval_query"] = queries[0]
            if len(set(queries)) > 1:
                meta["retrieval_queries"] = queries
        cases.append(Case(
            id=_case_id(trace_id), question=question, context=chunks,
            corpus_version=corpus_version, retriever=f"{read.fmt}:{'+'.join(names)}",
            answerable=True, group=read.sessions.get(trace_id),
            retrieval_scores=[float(s) for s in known] if scores and len(
                known := [s for s in scores if s is not None]) == len(scores) else None,
            meta=meta))
    counts = {"traces": len(read.trace_ids | set(by_trace)), "spans": read.n_spans,
              "retrieval_steps": len(read.steps), "cases": len(cases),
              "repeated": len(repeated), "skipped": len(skipped)}
    return cases, skipped + repeated, counts


def _problem(st: Step) -> str | None:
    if not st.docs:
        return "retrieved no document"
    for i, d in enumerate(st.docs):
        if d.problem:
            return f"document {i}{f' ({d.id})' if d.id else ''} {d.problem}"
        if not d.id:
            return f"document {i} has no id"
    return None


def _case_id(trace_id: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in trace_id)
    return f"t-{safe[:64]}"


def summary_line(name: str, fmt: str, counts: dict, first_skip: str | None) -> str:
    """N traces, M retrieval steps, K cases, R repeated questions kept once, S skipped."""
    line = (f"{name}: {fmt} export, {counts['traces']} trace(s), {counts['retrieval_steps']} "
            f"retrieval step(s), {counts['cases']} case(s), {counts['repeated']} repeated "
            f"question(s) kept once, {counts['skipped']} skipped")
    return line + (f" (the first: {first_skip})" if counts["skipped"] and first_skip else "")


def group_line(read: TraceRead, cases: list) -> str | None:
    """The line saying which cases took their trace's session as `group` (None: none did)."""
    n = sum(1 for c in cases if c.group is not None)
    if not n:
        return None
    where = ", ".join(sorted(read.session_fields))
    line = (f"group: each case's session ({where}): {n} of {len(cases)} case(s) in "
            f"{len({c.group for c in cases if c.group is not None})} session(s)")
    return line + (f"; {len(cases) - n} without one (each its own group)" if n < len(cases)
                   else "")


def capture_from_traces(path, *, out, fmt: str = "auto", corpus_version: str | None = None,
                        refresh_every_days: int = 30, force: bool = False,
                        progress: Callable[[str], None] | None = None):
    """Read the export, build the cases, seal them like any capture.
    Returns (fixture, skipped, counts); `skipped` holds repeated questions too."""


    path, out = Path(path), Path(out)
    if out.exists() and not force:
        raise UserError("fixture already exists; pass {force} to replace it deliberately",
                        file=str(out), opts={"force": True})
    read = read_traces(path, fmt)
    version = corpus_version or date.today().isoformat()
    cases, dropped, counts = cases_from_traces(read, corpus_version=version,
                                               source_name=path.name)
    n_skip = counts["skipped"]
    first_skip = dropped[0][1] if n_skip else None
    if not cases:
        if not read.steps:
            why = "no retrieval span found (no span of kind RETRIEVER)"
        elif n_skip:
            why = f"{n_skip} retrieval step(s) or trace(s) skipped; the first: {first_skip}"
        else:
            why = f"every question repeats an earlier one: {dropped[0][1]}"
        raise UserError(f"no case could be made ({counts['traces']} trace(s), "
                        f"{counts['retrieval_steps']} retrieval step(s); {why})", file=str(path))
    grouped = group_line(read, cases)
    if progress:
        progress(summary_line(path.name, read.fmt, counts, first_skip))
        if grouped:
            progress(grouped)
        for where, why in dropped[:20]:
            progress(f"{'repeated' if 'same question as' in why else 'skipped'} {where}: {why}")
        if len(dropped) > 20:
            progress(f"… and {len(dropped) - 20} more (all listed in manifest.json notes)")
        if not corpus_version:
            progress(f"note: no --corpus-version; cases labelled with today's date {version}")
    notes = {"from_traces": {"file": path.name, "format": read.fmt, **counts,
                             "answerable": "assumed true for every case: traces do not say "
                                           "whether the corpus held an answer",
                             "skipped": [f"{w}: {why}" for w, why in dropped[:n_skip]],
                             "repeated": [f"{w}: {why}" for w, why in dropped[n_skip:]]}}
    if grouped:
        notes["from_traces"]["group"] = grouped
    retriever = f"traces:{read.fmt} {path.name}"
    fx = write_fixture(out, cases, corpus_version=version, retriever=retriever,
                       refresh_every_days=refresh_every_days, force=force, notes=notes)
    return fx, dropped, counts
