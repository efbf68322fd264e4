"""Golden question sets: draft them from a document sample, confirm them by hand.

`draft_golden` asks the judge model (through the one gateway, so every reply is
cached in the store) for one question per slot, with a versioned prompt and a
schema-validated JSON reply. The slots follow the golden-set category shares
(factual 40 %, multi-chunk 20 %, out-of-scope 15 %, edge 15 %, temporal 10 %),
rounded by largest remainder with ties going to the earlier category, so n = 30
gives 12/6/5/4/3. Every drafted item carries `draft: true` until a person runs
`confirm_golden`; a fixture captured from unconfirmed drafts is labelled as such
(`is_draft_fixture`). An existing golden file is extended, never replaced: its
items are kept byte for byte and only each category's shortfall is drafted.

Documents: a folder of .txt/.md files (one chunk per paragraph, id
`<relative path>#p<k>`, k from 1), a single .txt/.md file, or a corpus JSONL
(`{"id", "text", "title"?}` per line, the same shape `abtest index` reads).
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pydantic import BaseModel, Field

from abtest.errors import IncompleteRunError, UserError
from abtest.capturing import GOLDEN_SHARES, validate_question_rows
from abtest.core.records import read_jsonl
from abtest.core.records import write_jsonl
from abtest.core.records import csv_header, is_csv, read_records
from abtest.core.records import atomic_write_text
import csv
import io
from concurrent.futures import ThreadPoolExecutor
from abtest.judges.common import load_prompt
from abtest.llm import check_credentials
from abtest.imports.questions import QUESTION_LISTS, ROW_BOOLS
from abtest.llm import Gateway
from abtest.store import Store
from abtest.judges.common import ask_json

if TYPE_CHECKING:
    from abtest.judges.common import JudgeCall
    from abtest.llm.gateway import Gateway

PROMPT_NAME = "golden_draft_v1"
CATEGORY_ORDER = tuple(GOLDEN_SHARES)
MIN_PRODUCTION = 30
MIN_PROOF_OF_CONCEPT = 10
MAX_ATTEMPTS = 3
MAX_EXCERPT_CHARS = 2000
MIN_WORDS = 8  # shorter paragraphs (headings, list stubs) are kept as chunks but not sampled first

INSTRUCTIONS = {
    "factual": "A direct factual question answered by a single excerpt: a name, number, rule or "
               "definition that the excerpt states.",
    "multi_chunk": "A question whose answer needs facts from at least two different excerpts "
                   "combined. List every excerpt needed in relevant_chunk_ids.",
    "out_of_scope": "A question a user of this collection could plausibly ask, on the same topic, "
                    "that the excerpts do NOT answer, so the assistant should decline. Do not ask "
                    "about anything the excerpts state. answerable must be false.",
    "edge": "A tricky but answerable question: an exception, a condition, a boundary value, a "
            "negation, or a question with a mistaken premise that the excerpt corrects.",
    "temporal": "A question about time that the excerpts answer: a date, a deadline, a duration, "
                "an order of events, or what changed between versions.",
}
_TEMPORAL = re.compile(r"\b(1[5-9]\d\d|20\d\d|january|february|march|april|may|june|july|august|"
                       r"september|october|november|december|days?|weeks?|months?|years?|"
                       r"deadline|until|before|after|since|effective|expire[sd]?|version)\b", re.I)
_EDGE = re.compile(r"\b(except|unless|only|not|never|no longer|must|at least|at most|maximum|"
                   r"minimum|if|however|excluding|limit)\b|\d", re.I)
SAMPLING_ORDER = ("temporal", "edge", "multi_chunk", "factual", "out_of_scope")
REFUSAL_ANSWER = "I don't know based on the provided documents."


# --------------------------------------------------------------------------- documents
@dataclass(frozen=True)
class DocChunk:
    id: str
    text: str
    doc: str
    title: str | None = None

    def corpus_row(self) -> dict:
        row = {"id": self.id, "text": self.text}
        if self.title:
            row["title"] = self.title
        return row


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs: blocks separated by one or more blank lines, whitespace-trimmed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not valid UTF-8 (byte {exc.start})", file=str(path)) from None


def load_docs(path: str | os.PathLike) -> list[DocChunk]:
    """Chunks from a folder of .txt/.md files, one .txt/.md file, or a corpus JSONL."""
    path = Path(path)
    if not path.exists():
        raise UserError("documents not found (expected a folder of .txt/.md files or a corpus "
                        ".jsonl)", file=str(path))
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            return _load_corpus_jsonl(path)
        if suffix in (".txt", ".md"):
            return _chunk_file(path, path.name)
        raise UserError("expected a folder of .txt/.md files or a corpus .jsonl "
                        '({"id", "text", "title"?} per line)', file=str(path))
    files = sorted((p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".txt", ".md")
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)),
                   key=lambda p: p.relative_to(path).as_posix())
    if not files:
        raise UserError("no .txt or .md files in the documents folder", file=str(path))
    chunks: list[DocChunk] = []
    for f in files:
        chunks.extend(_chunk_file(f, f.relative_to(path).as_posix()))
    if not chunks:
        raise UserError("the .txt/.md files contain no text", file=str(path))
    return chunks


def _chunk_file(path: Path, name: str) -> list[DocChunk]:
    title = None
    out = []
    for k, para in enumerate(split_paragraphs(_read_text(path)), start=1):
        if title is None and k == 1 and para.startswith("#"):
            title = para.lstrip("#").strip().splitlines()[0] if para.lstrip("#").strip() else None
        out.append(DocChunk(id=f"{name}#p{k}", text=para, doc=name, title=title))
    return out


def _load_corpus_jsonl(path: Path) -> list[DocChunk]:

    out: list[DocChunk] = []
    seen: dict[str, int] = {}
    for n, obj in read_jsonl(path):
        cid, text, title = obj.get("id"), obj.get("text"), obj.get("title")
        if not isinstance(cid, str) or not cid.strip():
            raise UserError("missing or empty string 'id'", file=str(path), where=f"line {n}",
                            field="id")
        if not isinstance(text, str) or not text.strip():
            raise UserError("missing or empty string 'text'", file=str(path), where=f"line {n}",
                            field="text")
        if title is not None and not isinstance(title, str):
            raise UserError("expected a string", file=str(path), where=f"line {n}", field="title")
        if cid in seen:
            raise UserError(f"duplicate chunk id {cid!r} (first on line {seen[cid]})",
                            file=str(path), where=f"line {n}", field="id")
        seen[cid] = n
        out.append(DocChunk(id=cid.strip(), text=text.strip(), doc=title or cid.split("#")[0],
                            title=title))
    if not out:
        raise UserError("no chunks in the corpus file", file=str(path))
    return out


def write_corpus(chunks: Iterable[DocChunk], path: str | os.PathLike) -> Path:
    """The chunks as a corpus JSONL for `abtest index`, so captured ids match the drafts."""

    return write_jsonl(Path(path), (c.corpus_row() for c in chunks))


# --------------------------------------------------------------------------- shares
def category_targets(n: int) -> dict[str, int]:
    """Counts per category for n questions: largest remainder, ties to the earlier category."""
    if n < 1:
        raise UserError("--n must be at least 1")
    raw = {c: n * s for c, s in GOLDEN_SHARES.items()}
    out = {c: int(v) for c, v in raw.items()}
    left = n - sum(out.values())
    order = sorted(CATEGORY_ORDER, key=lambda c: (-(raw[c] - out[c]), CATEGORY_ORDER.index(c)))
    for c in order[:left]:
        out[c] += 1
    return out


def size_warnings(n: int) -> list[str]:
    if n < MIN_PROOF_OF_CONCEPT:
        return [f"{n} questions is below {MIN_PROOF_OF_CONCEPT}, too few even for a proof of concept "
                f"(a production gate needs at least {MIN_PRODUCTION})"]
    if n < MIN_PRODUCTION:
        return [f"{n} questions is enough for a proof of concept but below the {MIN_PRODUCTION} a "
                "production gate needs"]
    return []


# --------------------------------------------------------------------------- golden files
@dataclass
class GoldenFile:
    path: Path
    items: list[dict]
    wrapper: dict | None = None  # {"questions": [...], ...} files keep their other keys
    fmt: str = "json"            # "json", "jsonl" or "csv"
    # a CSV's header and each row's cells as read, so that a write changes only what changed
    csv_header: list[str] | None = None
    csv_cells: list[tuple[dict, dict]] | None = None   # (cells as text, values as read)


def read_golden(path: str | os.PathLike, *, missing_ok: bool = False) -> GoldenFile:
    """Read and validate a golden file (JSON list, {"questions": [...]}, JSONL, or CSV)."""

    path = Path(path)
    fmt = "csv" if is_csv(path) else "jsonl" if path.suffix.lower() == ".jsonl" else "json"
    if not path.exists():
        if missing_ok:
            return GoldenFile(path, [], None, fmt)
        raise UserError("golden file not found", file=str(path))
    wrapper = None
    if fmt == "csv":

        rows = list(read_records(path, "a golden CSV", list_fields=QUESTION_LISTS,
                                 bool_fields=ROW_BOOLS))
        texts = list(read_records(path, "a golden CSV"))
        items = [obj for obj, _ in validate_question_rows(rows, path)]
        return GoldenFile(path, items, None, fmt, csv_header(path),
                          [(t, dict(v)) for (_, t), (_, v) in zip(texts, rows)])
    if fmt == "jsonl":   # JSON Lines, or what else the one reader takes (a JSON array)
        rows = list(read_records(path, "a golden JSONL file"))
        if rows and not rows[0][0].startswith("line "):
            fmt = "json"
        items = [obj for obj, _ in validate_question_rows(rows, path)]
        return GoldenFile(path, items, None, fmt)
    else:
        text = _read_text(path)
        if not text.strip():
            rows = []
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UserError(f"invalid JSON ({exc.msg})", file=str(path),
                                where=f"line {exc.lineno}") from None
            if isinstance(data, dict) and isinstance(data.get("questions"), list):
                wrapper, data = data, data["questions"]
            if not isinstance(data, list):
                raise UserError('expected a JSON list of questions (or {"questions": [...]})',
                                file=str(path))
            rows = [(f"item {i}", obj) for i, obj in enumerate(data)]
    items = [obj for obj, _ in validate_question_rows(rows, path)]
    return GoldenFile(path, items, wrapper, fmt)


def write_golden(gf: GoldenFile) -> Path:

    if gf.fmt == "csv":
        return atomic_write_text(gf.path, _golden_csv(gf))
    if gf.fmt == "jsonl":
        return write_jsonl(gf.path, gf.items)
    data: Any = gf.items if gf.wrapper is None else {**gf.wrapper, "questions": gf.items}
    return atomic_write_text(gf.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _golden_csv(gf: GoldenFile) -> str:
    """The CSV again: a cell whose value did not change keeps its text byte for byte; a
    changed or new one is written as JSON (lists) or true/false."""

    def cell(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        return json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else str(v)

    header = list(gf.csv_header or [])
    for it in gf.items:
        header += [k for k in it if k not in header]
    old = gf.csv_cells or []
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for i, it in enumerate(gf.items):
        texts, values = old[i] if i < len(old) else ({}, {})
        w.writerow([texts.get(k, "") if k in values and values[k] == it.get(k)
                    else cell(it.get(k)) for k in header])
    return buf.getvalue()


def is_draft_fixture(cases: Iterable[Any]) -> bool:
    """True when any case (Case model or dict) is an unconfirmed draft (`draft: true`)."""
    return any(_get(c, "draft") is True for c in cases)


def draft_summary(cases: Iterable[Any]) -> dict:
    """For the report: how many cases are unconfirmed drafts, and which."""
    cases = list(cases)
    ids = sorted(str(_get(c, "id")) for c in cases if _get(c, "draft") is True)
    return {"is_draft": bool(ids), "n_draft": len(ids), "n_cases": len(cases), "draft_ids": ids,
            "note": (f"{len(ids)} of {len(cases)} questions are unconfirmed drafts (model-written, "
                     "not yet checked by a person; confirm with `abtest golden confirm`, then "
                     "re-capture)") if ids else None}


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def confirm_golden(path: str | os.PathLike, *, ids: Iterable[str] | None = None,
                   all_items: bool = False) -> dict:
    """Flip `draft` to false for the given ids (or all); unknown ids change nothing."""
    gf = read_golden(path)
    wanted = [i for i in (ids or []) if i]
    if not all_items and not wanted:
        raise UserError("name the questions to confirm with --ids ID[,ID…] or pass --all",
                        file=str(path))
    known = {it["id"] for it in gf.items}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise UserError(f"no question with id {', '.join(repr(u) for u in unknown)}; nothing "
                        "confirmed", file=str(path))
    target = known if all_items else set(wanted)
    confirmed, already = [], []
    for it in gf.items:
        if it["id"] not in target:
            continue
        if it.get("draft") is True:
            it["draft"] = False
            confirmed.append(it["id"])
        else:
            already.append(it["id"])
    if confirmed:
        write_golden(gf)
    remaining = sum(1 for it in gf.items if it.get("draft") is True)
    return {"path": str(gf.path), "confirmed": confirmed, "already_confirmed": already,
            "remaining_drafts": remaining, "n": len(gf.items)}


# --------------------------------------------------------------------------- drafting
class DraftReply(BaseModel):
    """The model's reply for one golden question."""

    question: str = Field(min_length=1, json_schema_extra={"maxLength": 400})
    answerable: bool
    reference_answer: str = Field(json_schema_extra={"maxLength": 800})
    relevant_chunk_ids: list[str] = Field(json_schema_extra={"maxItems": 6})
    expected_citations: list[str] = Field(json_schema_extra={"maxItems": 6})
    key_points: list[str] = Field(default=[], json_schema_extra={"maxItems": 4})


@dataclass
class DraftResult:
    path: Path
    items: list[dict]
    added: list[dict]
    kept: int
    targets: dict[str, int]
    counts: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    n_docs: int = 0
    n_chunks: int = 0
    prompt_sha256: str = ""
    model: str = ""


class _Sampler:
    """Seeded chunk picker: unused chunks first, then those a category prefers."""

    def __init__(self, chunks: list[DocChunk], rng: random.Random, used: set[str]):
        self.chunks = chunks
        self.rng = rng
        self.used = set(used)
        self.hinted: set[str] = set()
        self.by_doc: dict[str, list[DocChunk]] = {}
        for c in chunks:
            self.by_doc.setdefault(c.doc, []).append(c)

    def _rank(self, pool: list[DocChunk], prefer: Callable[[DocChunk], bool] | None) -> list[DocChunk]:
        pool = list(pool)
        self.rng.shuffle(pool)
        return sorted(pool, key=lambda c: (c.id in self.used,
                                           len(c.text.split()) < MIN_WORDS,
                                           not (prefer(c) if prefer else True)))

    def take(self, category: str) -> list[DocChunk]:
        if category == "multi_chunk":
            picked = self._take_pair()
        elif category == "out_of_scope":  # a topic hint only: varied, but uses up no chunk
            pool = self.chunks[:]
            self.rng.shuffle(pool)
            pool.sort(key=lambda c: (c.id in self.hinted, len(c.text.split()) < MIN_WORDS))
            self.hinted.update(c.id for c in pool[:2])
            return pool[:2]
        else:
            prefer = {"temporal": lambda c: bool(_TEMPORAL.search(c.text)),
                      "edge": lambda c: bool(_EDGE.search(c.text))}.get(category)
            picked = self._rank(self.chunks, prefer)[:1]
        self.used.update(c.id for c in picked)
        return picked

    def _take_pair(self) -> list[DocChunk]:
        pairs = [(a, b) for chunks in self.by_doc.values() for a, b in zip(chunks, chunks[1:])]
        if not pairs:  # every document is one chunk: two chunks of different documents
            return self._rank(self.chunks, None)[:2]
        self.rng.shuffle(pairs)
        pairs.sort(key=lambda p: ((p[0].id in self.used) + (p[1].id in self.used),
                                  min(len(p[0].text.split()), len(p[1].text.split())) < MIN_WORDS))
        return list(pairs[0])


def _excerpts(chunks: list[DocChunk]) -> str:
    parts = []
    for c in chunks:
        text = c.text if len(c.text) <= MAX_EXCERPT_CHARS else c.text[:MAX_EXCERPT_CHARS] + " …"
        head = f"[{c.id}]" + (f" ({c.title})" if c.title else "")
        parts.append(f"{head} {text}")
    return "\n\n".join(parts)


def _norm(q: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", q.lower()).split())


def _validate_reply(reply: DraftReply, category: str, shown: list[DocChunk]) -> tuple[dict | None, str | None]:
    """The reply as a golden item (without id), or why it is unusable."""
    ids = [c.id for c in shown]
    question = " ".join(reply.question.split())
    if len(question) < 8:
        return None, "question too short"
    item: dict[str, Any] = {"question": question, "category": category}
    if category == "out_of_scope":
        if reply.answerable:
            return None, "out-of-scope question marked answerable"
        item.update({"answerable": False,
                     "reference_answer": reply.reference_answer.strip() or REFUSAL_ANSWER,
                     "relevant_chunk_ids": [], "expected_citations": []})
        return item, None
    if not reply.answerable:
        return None, f"{category} question marked unanswerable"
    rel = [i for i in dict.fromkeys(x.strip().strip("[]") for x in reply.relevant_chunk_ids) if i in ids]
    if not rel:
        return None, "relevant_chunk_ids name no excerpt that was shown"
    if category == "multi_chunk" and len(rel) < 2:
        return None, "multi-chunk question relies on fewer than two excerpts"
    cites = [i for i in dict.fromkeys(x.strip().strip("[]") for x in reply.expected_citations)
             if i in ids] or rel
    answer = reply.reference_answer.strip()
    if not answer:
        return None, "empty reference_answer"
    item.update({"answerable": True, "reference_answer": answer, "relevant_chunk_ids": rel,
                 "expected_citations": cites})
    points = [p.strip() for p in reply.key_points if p and p.strip()]
    if points:
        item["key_points"] = points
    return item, None


def _next_ids(existing: set[str], k: int, prefix: str = "q_") -> list[str]:
    nums = [int(m.group(1)) for i in existing if (m := re.fullmatch(re.escape(prefix) + r"(\d+)", i))]
    start = max(nums, default=0) + 1
    out: list[str] = []
    n = start
    while len(out) < k:
        cand = f"{prefix}{n:03d}"
        if cand not in existing:
            out.append(cand)
        n += 1
    return out


def draft_golden(lc, docs: str | os.PathLike, out: str | os.PathLike, *, n: int = 30,
                 seed: int | None = None, gateway: Gateway | None = None,
                 progress: Callable[[str], None] | None = None) -> DraftResult:
    """Draft (or extend) a golden set at `out` to n questions in the category shares.

    Writes what was drafted even when some slots fail; the caller turns `failed` into
    an incomplete exit. Raises UserError for bad documents or a bad existing file before
    any model call.
    """


    chunks = load_docs(docs)
    gf = read_golden(out, missing_ok=True)
    targets = category_targets(n)
    have = {c: 0 for c in CATEGORY_ORDER}
    for it in gf.items:
        if it.get("category") in have:
            have[it["category"]] += 1
    need = {c: max(0, targets[c] - have[c]) for c in CATEGORY_ORDER}
    prompt = load_prompt(PROMPT_NAME)
    spec = lc.config.judge
    res = DraftResult(path=gf.path, items=gf.items, added=[], kept=len(gf.items), targets=targets,
                      counts=dict(have), warnings=size_warnings(n),
                      n_docs=len({c.doc for c in chunks}), n_chunks=len(chunks),
                      prompt_sha256=prompt.sha256, model=spec.model)
    slots = [c for c in CATEGORY_ORDER for _ in range(need[c])]
    if not slots:
        return res
    check_credentials(spec, where="judge")
    seed = lc.config.seed if seed is None else seed
    rng = random.Random(f"abtest-golden:{seed}:{len(gf.items)}")
    used = {cid for it in gf.items for cid in (it.get("relevant_chunk_ids") or [])}
    sampler = _Sampler(chunks, rng, used)
    seen_q = {_norm(it.get("question", "")) for it in gf.items}
    if progress:
        progress(f"drafting {len(slots)} question(s) from {res.n_chunks} chunks of {res.n_docs} "
                 f"document(s) with {spec.model} ({PROMPT_NAME}, seed {seed})")

    own_store = None
    if gateway is None:

        own_store = Store(lc.store_path)
        gateway = Gateway(own_store, concurrency=lc.config.concurrency, timeout_s=lc.config.timeout_s,
                          max_retries=lc.config.max_retries, backoff_base_s=lc.config.retry_backoff_s)

    def ask(slot: int, category: str, shown: list[DocChunk], attempt: int
            ) -> JudgeCall[DraftReply]:

        call = ask_json(gateway, spec, prompt,
                        {"category": category.replace("_", "-"),
                         "instructions": INSTRUCTIONS[category], "excerpts": _excerpts(shown)},
                        DraftReply, purpose="golden:draft", case_id=f"slot{slot}", sample=attempt)
        return call

    filled: dict[int, dict] = {}
    reasons: dict[int, list[str]] = {i: [] for i in range(len(slots))}
    try:
        with ThreadPoolExecutor(max_workers=max(1, lc.config.concurrency)) as pool:
            for attempt in range(MAX_ATTEMPTS):
                todo = [i for i in range(len(slots)) if i not in filled]
                if not todo:
                    break
                # seeded and in a fixed order; the categories with the narrowest needs pick first
                excerpts = {i: sampler.take(slots[i]) for i in
                             sorted(todo, key=lambda i: (SAMPLING_ORDER.index(slots[i]), i))}
                plans = [(i, slots[i], excerpts[i]) for i in todo]
                futures = [pool.submit(ask, i, cat, shown, attempt) for i, cat, shown in plans]
                for (i, cat, shown), fut in zip(plans, futures):
                    call = fut.result()
                    if call.value is None:
                        reasons[i].append(call.error or "no reply")
                        continue
                    item, why = _validate_reply(call.value, cat, shown)
                    if item is None:
                        assert why is not None  # a reply refused always says why
                        reasons[i].append(why)
                        continue
                    key = _norm(item["question"])
                    if key in seen_q:
                        reasons[i].append("duplicate of an existing question")
                        continue
                    seen_q.add(key)
                    filled[i] = item
    finally:
        if own_store is not None:
            own_store.close()

    new_ids = _next_ids({it["id"] for it in gf.items}, len(filled))
    for i, qid in zip(sorted(filled), new_ids):
        item = filled[i]
        ordered = {"id": qid, "question": item["question"], "answerable": item["answerable"],
                   "category": item["category"], "reference_answer": item["reference_answer"],
                   "relevant_chunk_ids": item["relevant_chunk_ids"],
                   "expected_citations": item["expected_citations"]}
        if item.get("key_points"):
            ordered["key_points"] = item["key_points"]
        ordered["draft"] = True
        res.added.append(ordered)
        res.counts[item["category"]] += 1
    for i in range(len(slots)):
        if i not in filled:
            res.failed.append({"category": slots[i], "reasons": reasons[i]})
    if res.added:
        gf.items.extend(res.added)
        write_golden(gf)
    res.items = gf.items
    return res


def raise_if_incomplete(res: DraftResult) -> None:
    if res.failed:
        provider = [f for f in res.failed if any(r.startswith("provider:") for r in f["reasons"])]
        kinds = ", ".join(sorted({f["category"] for f in res.failed}))
        last = res.failed[0]["reasons"][-1] if res.failed[0]["reasons"] else "unknown"
        raise IncompleteRunError(
            f"{len(res.failed)} question(s) could not be drafted ({kinds}; "
            f"{'provider errors' if provider else 'unusable replies'}, last: {last}); the "
            f"{len(res.added)} drafted are saved in {res.path}; run the same command again to "
            "fill the rest")
