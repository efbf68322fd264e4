"""What every retriever returns, and the checks that keep foreign output out of fixtures."""

from __future__ import annotations

import abc

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Mapping, Sequence

from abtest.errors import UserError
from abtest.core.models import Chunk


@dataclass(frozen=True)
class RetrievedChunk:
    id: str
    text: str
    score: float | None = None
    metadata: dict | None = None
    title: str | None = None
    extra: dict | None = None      # an imported chunk's other fields, kept as given

    @property
    def meta(self) -> dict | None:
        """What the source said about the chunk besides id, text and score: the chunk's
        `meta` in the fixture (None when nothing)."""
        out = dict(self.extra or {})
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.title is not None:
            out["title"] = self.title
        return out or None

    def to_chunk(self) -> Chunk:
        return Chunk(id=self.id, text=self.text, meta=self.meta)


class Retrieved(list[RetrievedChunk]):
    """The chunks for one question, best first, plus how they were asked for.

    A plain list of RetrievedChunk, so callers that only need the chunks ignore the
    rest; `keywords` and `search_terms` are set by retrievers that build a query
    (local) or import one (jsonl), and go onto the case.
    """

    def __init__(self, chunks: Iterable[RetrievedChunk] = (), *, keywords: list[str] | None = None,
                 search_terms: str | None = None, corpus_version: str | None = None,
                 n_cut: int = 0, n_repeated: int = 0, n_truncated: int = 0):
        super().__init__(chunks)
        self.keywords = keywords
        self.search_terms = search_terms
        self.corpus_version = corpus_version  # the source's own label, when it has one
        self.n_cut = n_cut                    # chunks beyond k, not kept
        self.n_repeated = n_repeated          # the same chunk (id and text) again, kept once
        self.n_truncated = n_truncated        # chunks cut to max_chars

    @property
    def scores(self) -> list[float] | None:
        """Per-chunk scores for Case.retrieval_scores, or None unless every chunk has one."""
        s = [c.score for c in self if c.score is not None]
        return s if s and len(s) == len(self) else None


def text_id(text: str) -> str:
    """Stable id for a chunk that came without one (RAGAS-style `contexts`)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _get(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def coerce_chunk(item: Any, *, source: str, where: str,
                 fields: Mapping[str, str | None] | None = None,
                 keep_extra: bool = False) -> RetrievedChunk:
    """Turn one foreign chunk (dict, object or bare string) into a RetrievedChunk.

    `fields` renames id/text/score/metadata (dotted paths allowed); an id field of
    None means "derive the id from the text". `keep_extra` keeps a dict's other top-level
    fields (an imported capture: what the file says, kept). Anything malformed is a
    UserError naming the retriever spec and the item, never a silently odd fixture.
    """
    f = {"id": "id", "text": "text", "score": "score", "metadata": "metadata", **(fields or {})}
    if isinstance(item, str):
        if not item.strip():
            raise UserError("empty chunk text", file=source, where=where)
        return RetrievedChunk(text_id(item), item)
    if not isinstance(item, Mapping) and not hasattr(item, f["text"] or "text"):
        raise UserError(f"expected a chunk object with id and text, got {type(item).__name__}",
                        file=source, where=where)
    text = dig(item, f["text"]) if f["text"] else None
    if not isinstance(text, str) or not text.strip():
        keys = f" (it has: {', '.join(map(str, item))})" if isinstance(item, Mapping) else ""
        raise UserError(f"missing or empty text{keys}", file=source, where=where, field=f["text"])
    if f["id"] is None:
        cid: Any = text_id(text)
    else:
        cid = dig(item, f["id"])
        if isinstance(cid, bool) or cid is None or not isinstance(cid, (str, int)):
            keys = f" (it has: {', '.join(map(str, item))})" if isinstance(item, Mapping) else ""
            raise UserError(f"missing or invalid chunk id{keys}", file=source, where=where,
                            field=f["id"])
        cid = str(cid)
        if not cid.strip() or cid != cid.strip():
            raise UserError(f"chunk id {cid!r} is empty or has surrounding whitespace",
                            file=source, where=where, field=f["id"])
    score = dig(item, f["score"]) if f["score"] else None
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise UserError(f"score must be a finite number or null, got {score!r}",
                            file=source, where=where, field=f["score"])
        score = float(score)
    md = dig(item, f["metadata"]) if f["metadata"] else None
    if md is not None and not isinstance(md, Mapping):
        raise UserError("metadata must be an object or null", file=source, where=where,
                        field=f["metadata"])
    title = _get(item, "title")
    extra = None
    if keep_extra and isinstance(item, Mapping):
        used = {"id", "text", "score", "metadata", "title"} | {v for v in f.values() if v}
        extra = {str(k): v for k, v in item.items() if k not in used} or None
        if title is not None and not isinstance(title, str):
            extra = {**(extra or {}), "title": title}   # kept as given, not as the title
    return RetrievedChunk(cid, text, score, dict(md) if md is not None else None,
                          title if isinstance(title, str) else None, extra)


def dig(obj: Any, path: str) -> Any:
    """Follow a dotted path ("data.hits.0.text") through dicts, lists and attributes."""
    cur = obj
    for part in path.split("."):
        if cur is None:
            return None
        if isinstance(cur, Mapping):
            cur = cur.get(part)
        elif isinstance(cur, Sequence) and not isinstance(cur, str) and re.fullmatch(r"-?\d+", part):
            i = int(part)
            cur = cur[i] if -len(cur) <= i < len(cur) else None
        else:
            cur = getattr(cur, part, None)
    return cur


def finalize(chunks: Sequence[RetrievedChunk], *, k: int | None, max_chars: int | None,
             source: str, qid: Hashable, keywords: list[str] | None = None,
             search_terms: str | None = None) -> Retrieved:
    """Dedupe, cap at k (None: keep all), truncate: the same rules for every retriever kind,
    each counted so that capture can say what it changed.

    A repeated id with the same text is kept once (the better-ranked copy); the same id
    with different text is an error, since a fixture could not say which one the model saw.
    """
    out: list[RetrievedChunk] = []
    seen: dict[str, str] = {}
    cut = repeated = truncated = 0
    for c in chunks:
        if c.id in seen:
            if seen[c.id] != c.text:
                raise UserError(f"chunk id {c.id!r} returned twice with different text",
                                file=source, where=f"question {qid}")
            repeated += 1
            continue
        seen[c.id] = c.text
        if k is None or len(out) < k:
            if max_chars is not None and len(c.text) > max_chars:
                c = RetrievedChunk(c.id, c.text[:max_chars], c.score, c.metadata, c.title,
                                   c.extra)
                truncated += 1
            out.append(c)
        else:
            cut += 1
    return Retrieved(out, keywords=keywords, search_terms=search_terms, n_cut=cut,
                     n_repeated=repeated, n_truncated=truncated)


class Retriever(abc.ABC):
    """Common surface: `name`, `describe(k)`, `retrieve_many`, `retrieve`, `close`.
    `k = None` (keep every chunk) is for imports only (`keeps_all`): a search needs a k."""

    method = "?"
    keeps_all = False

    def __init__(self, spec: str, *, k: int | None = 5, max_chars: int | None = None):
        self.spec = spec
        if k is None and self.keeps_all:
            pass
        elif isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"k must be a positive integer, got {k!r}", file=spec, field="k")
        if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                                      or max_chars < 1):
            raise UserError(f"max_chars must be a positive integer, got {max_chars!r}",
                            file=spec, field="max_chars")
        self.k = k
        self.max_chars = max_chars

    def _extras(self) -> list[str]:
        return [f"max_chars={self.max_chars}"] if self.max_chars else []

    def _spec_text(self) -> str:
        return self.spec

    def describe(self, k: int | None = None) -> str:
        """Stable text recorded on fixtures: method, k, options that change output, spec."""
        opts = ",".join([f"k={k or self.k or 'all'}", *self._extras()])
        return f"{self.method}@{opts} {self._spec_text()}"

    @property
    def name(self) -> str:
        return self.describe(self.k)

    def check(self) -> None:  # noqa: B027 -- an optional hook
        """Read and check what can be checked before the first question (an imported file),
        so that bad input stops before any progress is printed."""

    @abc.abstractmethod
    def retrieve_many(self, questions: Sequence[tuple[Hashable, str]], k: int | None = None
                      ) -> dict[Hashable, Retrieved]:
        """Chunks for every (id, question), best first, at most k each."""

    def retrieve(self, question: str, k: int | None = None) -> Retrieved:
        return self.retrieve_many([("q", question)], k)["q"]

    def close(self) -> None:  # noqa: B027 -- an optional hook: most retrievers hold nothing
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _k(self, k: int | None) -> int | None:
        if k is None:
            return self.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"k must be a positive integer, got {k!r}", file=self.spec, field="k")
        return k

    def _search_k(self, k: int | None) -> int:
        """`_k` for a retriever that searches (not `keeps_all`): `__init__` refused k=None."""
        out = self._k(k)
        assert out is not None, "a search retriever always has a k"
        return out


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill_template(template: Any, values: dict[str, Any]) -> Any:
    """Replace "{name}" placeholders; a string that is exactly one placeholder keeps its type."""
    if isinstance(template, dict):
        return {k: fill_template(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_template(v, values) for v in template]
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        # one pass, so a question that itself contains "{id}" is not substituted again
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values
                                else m.group(0), template)
    return template
