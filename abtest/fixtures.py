"""Frozen fixture sets: read, seal, verify, capture, status, diff.

A fixture is the foundation of every claim, so it is written atomically (temp
folder + rename), sealed with sha256 per case and in total, and re-verified
before every run. Capture and comparison are separate commands by design.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from .errors import UserError, pydantic_error_line
from .models import AWKWARD_TAGS, CATEGORIES, Case, CaseHash, Chunk, FixtureManifest, Question

GOLDEN_SHARES = {"factual": 0.40, "multi_chunk": 0.20, "out_of_scope": 0.15, "edge": 0.15,
                 "temporal": 0.10}


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def case_line(case: Case) -> str:
    return canonical_json(case.model_dump(mode="json", exclude_none=True))


class Fixture:
    """A loaded, verified fixture set.

    A verified fixture keeps only its case ids: `iter_cases()` streams cases.jsonl again and
    checks every line against its sealed sha256 as it goes, so a run over 100,000 cases holds
    no case it is not working on, and a file edited after loading is refused, not used.
    `cases` parses everything (small fixtures, reports).
    """

    def __init__(self, path: Path, manifest: FixtureManifest, cases: list[Case] | None = None,
                 *, ids: list[str] | None = None):
        self.path = path
        self._cases = list(cases) if cases is not None else None
        self._ids = [c.id for c in self._cases] if self._cases is not None else list(ids or [])
        self._sealed = b""
        if self._cases is None:
            # the per-line seals as 32-byte digests back to back: 3 MB at 100,000 cases, where
            # the manifest's objects take ~50 MB (the held manifest then has no case list)
            self._sealed = b"".join(bytes.fromhex(h.sha256) for h in manifest.cases)
            manifest = manifest.model_copy(update={"cases": []})
        self.manifest = manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def cases_sha256(self) -> str:
        return self.manifest.cases_sha256

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def cases(self) -> list[Case]:
        if self._cases is None:
            self._cases = list(self.iter_cases())
        return self._cases

    def iter_cases(self, want: set[str] | None = None) -> Iterable[Case]:
        if self._cases is not None:
            yield from (c for c in self._cases if want is None or c.id in want)
            return
        cpath = self.path / "cases.jsonl"
        i = 0
        for n, line in _text_lines(cpath):
            if not line.strip():
                continue
            if i >= len(self._ids) or hashlib.sha256(line.encode("utf-8")).digest() != \
                    self._sealed[32 * i:32 * i + 32]:
                raise UserError("cases.jsonl changed while in use (its sealed sha256 no longer "
                                "matches); start again", file=str(cpath), where=f"line {n}")
            if want is None or self._ids[i] in want:
                yield Case.model_validate_json(line)
            i += 1

    def ids(self) -> list[str]:
        return list(self._ids)

    def by_id(self, ids: Iterable[str] | None = None) -> dict[str, Case]:
        """All cases by id, or only those named (without parsing the rest)."""
        if ids is None:
            return {c.id: c for c in self.cases}
        return {c.id: c for c in self.iter_cases(set(ids))}


def _text_lines(path: Path) -> Iterable[tuple[int, str]]:
    """Stream (line number, text): large files are never held whole."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise UserError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise UserError("is a directory, expected a JSONL file", file=str(path)) from None
    with f:
        for n, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError("not valid UTF-8", file=str(path), where=f"line {n}") from None
            # the same line breaks as str.splitlines() on the whole text
            for extra, part in enumerate(text.splitlines()):
                yield n + extra, part


def read_jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    """Yield (line number, object); one-line errors for bad bytes or JSON."""
    for n, line in _text_lines(path):
        if line.strip():
            yield n, _json_object(path, n, line)


def _json_object(path: Path, n: int, line: str) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON ({exc.msg} at column {exc.colno})", file=str(path),
                        where=f"line {n}") from None
    if not isinstance(obj, dict):
        raise UserError("expected a JSON object", file=str(path), where=f"line {n}")
    return obj


def iter_parsed_cases(path: Path) -> Iterable[Case]:
    """Validated cases one at a time; duplicate ids refused."""
    for _, _, case in _case_lines(path):
        yield case


def _case_lines(path: Path) -> Iterable[tuple[int, str, Case]]:
    """(line number, line, case), duplicate ids refused.

    Each line goes straight to pydantic's JSON parser (faster than json.loads and then
    validating the dict); a line it refuses is re-read the slow way for the one-line error."""
    from pydantic import ValidationError

    seen: dict[str, int] = {}
    for n, line in _text_lines(path):
        if not line.strip():
            continue
        try:
            case = Case.model_validate_json(line)
        except ValidationError:
            case = _case_from_line(path, n, line)
        if case.id in seen:
            raise UserError(f"duplicate case id {case.id!r} (first on line {seen[case.id]})",
                            file=str(path), where=f"line {n}", field="id")
        seen[case.id] = n
        yield n, line, case


def _case_from_line(path: Path, n: int, line: str) -> Case:
    """json.loads then validate: the same checks, with errors named by line, case and field."""
    from pydantic import ValidationError

    obj = _json_object(path, n, line)
    where = f"line {n}" + (f" (case {obj['id']})" if isinstance(obj.get("id"), str) else "")
    try:
        return Case.model_validate(obj)
    except ValidationError as exc:
        raise pydantic_error_line(exc, file=str(path), where=where) from None


def parse_cases(path: Path) -> list[Case]:
    return list(iter_parsed_cases(path))


def load_questions(path: Path) -> list[Question]:
    """Questions for capture: JSONL, or a golden JSON list / {"questions": [...]}."""
    rows: list[tuple[str, dict]] = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError("file not found", file=str(path)) from None
        except UnicodeDecodeError:
            raise UserError("not valid UTF-8", file=str(path)) from None
        except json.JSONDecodeError as exc:
            raise UserError(f"invalid JSON ({exc.msg})", file=str(path),
                            where=f"line {exc.lineno}") from None
        if isinstance(data, dict):
            data = data.get("questions", data.get("cases"))
        if not isinstance(data, list):
            raise UserError("expected a list of questions (or {\"questions\": [...]})", file=str(path))
        for i, obj in enumerate(data):
            if not isinstance(obj, dict):
                raise UserError("expected a JSON object", file=str(path), where=f"item {i}")
            rows.append((f"item {i}", obj))
    else:
        rows = [(f"line {n}", obj) for n, obj in read_jsonl(path)]
    out = [q for _, q in validate_question_rows(rows, path)]
    ignored = {k for q in out for k in (q.model_extra or {})}
    if not out:
        raise UserError("no questions found", file=str(path))
    if ignored:
        print(f"abtest: {path}: ignoring fields not used by fixtures: {', '.join(sorted(ignored))}",
              file=sys.stderr)
    return out


def validate_question_rows(rows: Iterable[tuple[str, object]], path: Path) -> list[tuple[dict, "Question"]]:
    """Each (where, object) as a Question; one-line errors, duplicate ids refused."""
    from pydantic import ValidationError

    out = []
    seen: set[str] = set()
    for where, obj in rows:
        if not isinstance(obj, dict):
            raise UserError("expected a JSON object", file=str(path), where=where)
        if isinstance(obj.get("id"), str):
            where += f" (question {obj['id']})"
        try:
            q = Question.model_validate(obj)
        except ValidationError as exc:
            raise pydantic_error_line(exc, file=str(path), where=where) from None
        if q.id in seen:
            raise UserError(f"duplicate question id {q.id!r}", file=str(path), where=where, field="id")
        seen.add(q.id)
        out.append((obj, q))
    return out


def load_fixture(path: str | os.PathLike, *, verify: bool = True) -> Fixture:
    path = Path(path)
    if not path.is_dir():
        raise UserError("fixture folder not found", file=str(path))
    mpath = path / "manifest.json"
    cpath = path / "cases.jsonl"
    if not cpath.exists():
        raise UserError("cases.jsonl missing in fixture folder", file=str(path))
    if not mpath.exists():
        raise UserError("manifest.json missing: seal the fixture with `abtest fixtures seal`",
                        file=str(path))
    manifest = read_manifest(mpath)
    if not verify:  # reports and review: every case is wanted, as objects
        cases = parse_cases(cpath)
        return Fixture(path, manifest, cases)
    expected = {h.id: h.sha256 for h in manifest.cases}
    ids: list[str] = []
    for _, raw, case in _case_lines(cpath):
        want = expected.get(case.id)
        if want is None:
            raise UserError("case not in the manifest (added after sealing)", file=str(cpath),
                            where=f"case {case.id}")
        # a sealed line is canonical JSON, so its own bytes hash to the seal; only a line that
        # does not is re-serialised, to tell an edit from a reformat (refused below)
        if sha256_text(raw) != want and sha256_text(case_line(case)) != want:
            raise UserError("case content does not match its sealed sha256 (tampered or "
                            "edited; re-capture or re-seal deliberately)", file=str(cpath),
                            where=f"case {case.id}")
        ids.append(case.id)
    _verify_totals(cpath, manifest, len(ids), set(expected) - set(ids))
    if [h.id for h in manifest.cases] != ids:  # streaming relies on the manifest's order
        raise UserError("cases.jsonl is not in the manifest's order (reordered after sealing)",
                        file=str(cpath))
    return Fixture(path, manifest, ids=ids)  # every seal matched a digest above: valid hex


def _verify_totals(cpath: Path, manifest: FixtureManifest, n: int, missing: set[str]) -> None:
    if missing:
        raise UserError(f"case(s) removed after sealing: {', '.join(sorted(missing))}", file=str(cpath))
    if n != manifest.n_cases:
        raise UserError(f"n_cases is {manifest.n_cases} but cases.jsonl has {n}",
                        file=str(cpath.parent / "manifest.json"), field="n_cases")
    h = hashlib.sha256()
    with open(cpath, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != manifest.cases_sha256:
        raise UserError("cases.jsonl bytes do not match cases_sha256 (reformatted or reordered after "
                        "sealing)", file=str(cpath))


def read_manifest(mpath: Path, *, cases: bool = True) -> FixtureManifest:
    """The manifest, validated; cases=False skips its per-case seals (10,000 objects) for
    readers that only want its dates and names."""
    from pydantic import ValidationError

    try:
        data = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"invalid JSON ({exc})", file=str(mpath)) from None
    if not cases and isinstance(data, dict) and isinstance(data.get("cases"), list):
        data["cases"] = []
    try:
        return FixtureManifest.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error_line(exc, file=str(mpath)) from None


def now_utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_fixture(out: str | os.PathLike, cases: list[Case], *, name: str | None = None,
                  corpus_version: str, retriever: str, refresh_every_days: int = 30,
                  force: bool = False, notes: dict | None = None,
                  captured_at: str | None = None) -> Fixture:
    """Write cases.jsonl + manifest.json into a temp folder, then rename into place."""
    out = Path(out)
    if out.exists() and not force:
        raise UserError("fixture already exists; pass --force to replace it deliberately", file=str(out))
    ids = [c.id for c in cases]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise UserError(f"duplicate case id {dup!r}", file=str(out))
    cases = sorted(cases, key=lambda c: c.id)
    lines = [case_line(c) for c in cases]
    body = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    manifest = FixtureManifest(
        name=name or out.name, corpus_version=corpus_version, retriever=retriever,
        captured_at=captured_at or now_utc(), refresh_every_days=refresh_every_days,
        n_cases=len(cases), cases_sha256=sha256_bytes(body),
        cases=[CaseHash(id=c.id, sha256=sha256_text(line)) for c, line in zip(cases, lines)],
        notes=notes)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "cases.jsonl").write_bytes(body)
        (tmp / "manifest.json").write_text(
            json.dumps(manifest.model_dump(mode="json", exclude_none=True), indent=2) + "\n",
            encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Fixture(out, manifest, cases)


def seal_fixture(path: str | os.PathLike, *, name: str | None = None,
                 refresh_every_days: int = 30) -> Fixture:
    """Seal a hand-written cases.jsonl (canonicalises it and writes manifest.json)."""
    path = Path(path)
    cases = parse_cases(path / "cases.jsonl")
    if not cases:
        raise UserError("no cases to seal", file=str(path / "cases.jsonl"))
    cv = sorted({c.corpus_version for c in cases})
    rv = sorted({c.retriever for c in cases})
    return write_fixture(path, cases, name=name or path.name, corpus_version=",".join(cv),
                         retriever=",".join(rv), refresh_every_days=refresh_every_days, force=True)


def capture(questions: list[Question], retriever, *, out: str | os.PathLike, corpus_version: str,
            k: int = 5, force: bool = False, refresh_every_days: int = 30,
            progress: Callable[[str], None] | None = None) -> Fixture:
    """Run retrieval once for every question and freeze the result."""
    out = Path(out)
    if out.exists() and not force:
        raise UserError("fixture already exists; pass --force to replace it deliberately", file=str(out))
    if progress:
        progress(f"retrieving for {len(questions)} questions with {retriever.name} (k={k})")
    results = retriever.retrieve_many([(q.id, q.question) for q in questions], k)
    cases: list[Case] = []
    for q in questions:
        got = results.get(q.id)
        if got is None:
            raise UserError("retriever returned no result for this question",
                            where=f"question {q.id}")
        chunks = got.chunks if hasattr(got, "chunks") else got
        scores = [c.score for c in chunks]
        fields = q.golden_fields()
        case = Case(
            id=q.id, question=q.question,
            context=[Chunk(id=c.id, text=c.text) for c in chunks],
            corpus_version=corpus_version, retriever=retriever.name, answerable=q.answerable,
            retrieval_scores=[float(s) for s in scores] if chunks and all(s is not None for s in scores) else None,
            keywords=getattr(got, "keywords", None) or None,
            search_terms=getattr(got, "search_terms", None) or None,
            **fields)
        cases.append(case)
    tags = _auto_tags(cases)
    if tags:
        cases = [c.model_copy(update={"tags": sorted(set((c.tags or []) + tags[c.id]))})
                 if c.id in tags else c for c in cases]
    notes = None
    fallbacks = getattr(retriever, "rerank_fallbacks", None)
    if fallbacks:
        notes = {"rerank_fallback": {str(k): v for k, v in sorted(fallbacks.items())}}
        if progress:
            progress(f"warning: reranker unavailable for {len(fallbacks)} question(s); kept the "
                     f"fused order (recorded in manifest.json notes)")
    return write_fixture(out, cases, corpus_version=corpus_version, retriever=retriever.name,
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


def fixture_status(fx: Fixture, *, today: datetime | None = None) -> dict:
    """Age against the refresh schedule and coverage of the golden-set kinds."""
    today = today or datetime.now(timezone.utc)
    captured = datetime.fromisoformat(fx.manifest.captured_at.replace("Z", "+00:00"))
    age_days = (today - captured).total_seconds() / 86400
    n = len(fx.cases)
    cats = Counter(c.category or "uncategorised" for c in fx.cases)
    tags = Counter(t for c in fx.cases for t in (c.tags or []))
    warnings: list[str] = []
    stale = age_days > fx.manifest.refresh_every_days
    if stale:
        warnings.append(f"stale: captured {age_days:.0f} days ago, refresh every "
                        f"{fx.manifest.refresh_every_days} days (run `abtest capture` again and "
                        f"review `abtest fixtures diff`)")
    categories = {}
    for cat, share in GOLDEN_SHARES.items():
        have = cats.get(cat, 0)
        categories[cat] = {"n": have, "share": have / n if n else 0.0, "target_share": share}
        if have == 0:
            warnings.append(f"no {cat} cases (golden-set target {share:.0%})")
    if cats.get("uncategorised"):
        categories["uncategorised"] = {"n": cats["uncategorised"], "share": cats["uncategorised"] / n,
                                       "target_share": None}
    awkward = {t: tags.get(t, 0) for t in AWKWARD_TAGS}
    for t, v in awkward.items():
        if v == 0:
            warnings.append(f"no {t} cases (awkward-case coverage)")
    n_unans = sum(1 for c in fx.cases if not c.answerable)
    if n_unans == 0:
        warnings.append("no unanswerable cases: refusal behaviour cannot be measured")
    from datetime import timedelta
    next_refresh = captured + timedelta(days=fx.manifest.refresh_every_days)
    return {"name": fx.name, "path": str(fx.path), "n_cases": n, "answerable": n - n_unans,
            "unanswerable": n_unans, "captured_at": fx.manifest.captured_at,
            "age_days": round(age_days, 1), "refresh_every_days": fx.manifest.refresh_every_days,
            "next_refresh": next_refresh.date().isoformat(), "stale": stale,
            "corpus_version": fx.manifest.corpus_version, "retriever": fx.manifest.retriever,
            "cases_sha256": fx.cases_sha256, "categories": categories, "awkward_tags": awkward,
            "warnings": warnings}


def fixture_diff(old: Fixture, new: Fixture) -> dict:
    """Churn between two captures, so a refresh is a reviewed event."""
    a, b = old.by_id(), new.by_id()
    added = sorted(set(b) - set(a))
    removed = sorted(set(a) - set(b))
    changed = []
    for cid in sorted(set(a) & set(b)):
        ca = {c.id: c.text for c in a[cid].context}
        cb = {c.id: c.text for c in b[cid].context}
        ch_add = sorted(set(cb) - set(ca))
        ch_rem = sorted(set(ca) - set(cb))
        ch_txt = sorted(i for i in set(ca) & set(cb) if ca[i] != cb[i])
        order = [c.id for c in a[cid].context] != [c.id for c in b[cid].context]
        if ch_add or ch_rem or ch_txt or order or a[cid].question != b[cid].question:
            changed.append({"id": cid, "chunks_added": ch_add, "chunks_removed": ch_rem,
                            "text_changed": ch_txt, "order_changed": order and not (ch_add or ch_rem),
                            "question_changed": a[cid].question != b[cid].question})
    common = len(set(a) & set(b))
    return {"old": {"name": old.name, "cases_sha256": old.cases_sha256,
                    "corpus_version": old.manifest.corpus_version, "captured_at": old.manifest.captured_at},
            "new": {"name": new.name, "cases_sha256": new.cases_sha256,
                    "corpus_version": new.manifest.corpus_version, "captured_at": new.manifest.captured_at},
            "added": added, "removed": removed, "changed": changed, "n_common": common,
            "context_changed_share": (len(changed) / common) if common else 0.0}


def add_unanswerable(fx: Fixture, *, n: int, seed: int = 0) -> Fixture:
    """Counterfactual refusals: drop the relevant chunks of N answerable cases."""
    import random

    pool = [c for c in fx.cases if c.answerable and c.relevant_chunk_ids
            and set(c.relevant_chunk_ids) & {ch.id for ch in c.context}]
    if not pool:
        raise UserError("no answerable case with relevant_chunk_ids in its context", file=str(fx.path))
    rng = random.Random(seed)
    picked = rng.sample(pool, min(n, len(pool)))
    new_cases = list(fx.cases)
    existing = {c.id for c in fx.cases}
    for c in picked:
        keep = [(ch, s) for ch, s in zip(c.context, c.retrieval_scores or [None] * len(c.context))
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
