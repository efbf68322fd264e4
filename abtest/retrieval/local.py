"""`local:PATH`: BM25 over the index built by `abtest index`, many questions per SQL query."""

from __future__ import annotations

import os
from typing import Callable, Hashable, Sequence

from abtest.errors import UserError
from abtest.retrieval.bm25 import IndexStore
from abtest.retrieval.base import Retrieved, RetrievedChunk, Retriever, finalize
from abtest.retrieval.query import or_query, parse, stem, tokenize, words
import numpy as np

KEYWORDS_VERSION = "stopwords-v1"

# English function words plus the words questions are phrased with ("how", "tell",
# "please"), which say nothing about which chunk answers them.
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren as at be because been before
being below between both but by can cannot could couldn did didn do does doesn doing don down
during each few for from further had hadn has hasn have haven having he her here hers herself
him himself his how i if in into is isn it its itself just let me more most mustn my myself
no nor not now of off on once only or other ought our ours ourselves out over own same shan
she should shouldn so some such than that the their theirs them themselves then there these
they this those through to too under until up very was wasn we were weren what when where
which while who whom why will with won would wouldn you your yours yourself yourselves
also get got may might must shall us ll re ve d s t m o y
tell please know explain describe give show find want need like one ever
dont doesnt didnt isnt arent wasnt werent cant couldnt wont wouldnt shouldnt hasnt havent
im ive youre theyre whats hows wheres whos thats theres lets
""".split())

_STOP_STEMS = frozenset(stem(w) for w in STOPWORDS)


def content_keywords(question: str) -> list[str]:
    """Lowercased content words of `question` in order, minus stopwords, one per stem.

    The default keyword extractor; `keywords_fn` replaces it (e.g. with an LLM).
    """
    out: dict[str, str] = {}
    for w in words(question):
        if w in STOPWORDS or (len(w) == 1 and not w.isdigit()):
            continue
        s = stem(w)
        if s in _STOP_STEMS:
            continue
        out.setdefault(s, w)
    return list(out.values())


class LocalRetriever(Retriever):

    def __init__(self, spec: str, path: str, *, base_dir: str, k: int = 5,
                 max_chars: int | None = None,
                 keywords_fn: Callable[[str], list[str]] | None = None,
                 keywords_label: str | None = None,
                 embed_fn: Callable[[list[str]], list[list[float]]] | None = None,
                 embed_label: str | None = None,
                 rerank_fn: Callable[[str, list[str]], list[float]] | None = None,
                 rerank_label: str | None = None):
        super().__init__(spec, k=k, max_chars=max_chars)
        self.embed_fn, self.embed_label = embed_fn, embed_label or (
            getattr(embed_fn, "__name__", "custom") if embed_fn else None)
        self.rerank_fn, self.rerank_label = rerank_fn, rerank_label or (
            getattr(rerank_fn, "__name__", "custom") if rerank_fn else None)
        self._chunk_vectors = None
        self.rerank_fallbacks: dict[Hashable, str] = {}
        if not path:
            raise UserError("expected local:PATH to an index built by `abtest index`", file=spec)
        self.path = path if os.path.isabs(path) else os.path.join(base_dir, path)
        if keywords_fn is not None and not callable(keywords_fn):
            raise UserError("keywords_fn must be callable", file=spec, field="keywords_fn")
        self.keywords_fn = keywords_fn
        self.keywords_label = keywords_label or (
            getattr(keywords_fn, "__name__", "custom") if keywords_fn else None)
        self._store: IndexStore | None = None

    def _extras(self) -> list[str]:
        extra = super()._extras()
        if self.keywords_label:
            extra.append(f"kw={self.keywords_label}")
        if self.embed_fn:
            extra.append(f"vec={self.embed_label}+rrf")
        if self.rerank_fn:
            extra.append(f"rerank={self.rerank_label}")
        return extra

    @property
    def method(self) -> str:  # type: ignore[override]
        return "hybrid" if self.embed_fn else "bm25"

    # -- vector search, fusion, rerank -------------------------------------
    def _vectors(self):
        """All chunk embeddings, computed once per retriever (L2-normalised)."""

        if self._chunk_vectors is None:
            ids, texts = self.store.all_texts()
            vecs = []
            for i in range(0, len(texts), 128):
                vecs.extend(self._embed(texts[i:i + 128]))
            m = np.asarray(vecs, dtype=np.float32)
            m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
            self._chunk_vectors = (ids, texts, m)
        return self._chunk_vectors

    def _embed(self, texts: list[str]) -> Sequence[Sequence[float]]:
        assert self.embed_fn is not None  # only a hybrid retriever (one with embed_fn) embeds
        out = self.embed_fn(texts)
        if not isinstance(out, (list, tuple)) or len(out) != len(texts):
            raise UserError("embedding model returned the wrong number of vectors", file=self.spec,
                            field="embedding")
        return out

    def _vector_hits(self, questions, depth: int) -> dict[Hashable, list[RetrievedChunk]]:

        ids, texts, m = self._vectors()
        q = np.asarray(self._embed([text for _, text in questions]), dtype=np.float32)
        q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        sims = q @ m.T
        out = {}
        for row, (qid, _) in zip(sims, questions):
            top = np.argsort(-row, kind="stable")[:depth]
            out[qid] = [RetrievedChunk(ids[i], texts[i], round(float(row[i]), 6)) for i in top]
        return out

    @staticmethod
    def rrf(lists: list[list[RetrievedChunk]], c: int = 60) -> list[RetrievedChunk]:
        """Reciprocal-rank fusion: score = Σ 1 / (c + rank); ties keep first-seen order."""
        scores: dict[str, float] = {}
        first: dict[str, RetrievedChunk] = {}
        for lst in lists:
            for rank, ch in enumerate(lst, start=1):
                scores[ch.id] = scores.get(ch.id, 0.0) + 1.0 / (c + rank)
                first.setdefault(ch.id, ch)
        order = sorted(first, key=lambda i: -scores[i])
        return [RetrievedChunk(i, first[i].text, round(scores[i], 6), first[i].metadata,
                               first[i].title) for i in order]

    def _rerank(self, qid, question: str, chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
        """Reorder with the reranker; if it is unavailable keep the merged order and say so."""
        if not self.rerank_fn or len(chunks) < 2:
            return chunks
        try:
            scores = self.rerank_fn(question, [c.text for c in chunks])
            if len(scores) != len(chunks):
                raise ValueError(f"{len(scores)} scores for {len(chunks)} chunks")
        except Exception as exc:  # any failure: fallback to the fused order, recorded
            self.rerank_fallbacks[qid] = f"{type(exc).__name__}: {str(exc)[:120]}"
            return chunks
        order = sorted(range(len(chunks)), key=lambda i: -float(scores[i]))
        return [RetrievedChunk(chunks[i].id, chunks[i].text, round(float(scores[i]), 6),
                               chunks[i].metadata, chunks[i].title) for i in order]

    @property
    def store(self) -> IndexStore:
        if self._store is None:
            self._store = IndexStore(self.path, read_only=True)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def keywords(self, question: str) -> list[str]:
        if self.keywords_fn is None:
            return content_keywords(question)
        kws = self.keywords_fn(question)
        if not isinstance(kws, (list, tuple)) or not all(isinstance(x, str) for x in kws):
            raise UserError(f"keywords_fn must return a list of strings, got {type(kws).__name__}",
                            file=self.spec, field="keywords_fn")
        return [x for x in dict.fromkeys(x.strip() for x in kws) if tokenize(x)]

    def retrieve_many(self, questions: Sequence[tuple[Hashable, str]], k: int | None = None
                      ) -> dict[Hashable, Retrieved]:
        k = self._search_k(k)
        plans: dict[Hashable, tuple[list[str], str]] = {}
        queries = []
        for qid, question in questions:
            kws = self.keywords(question)
            terms = or_query(kws)
            plans[qid] = (kws, terms)
            if terms:
                queries.append((qid, parse(terms)))
        # fusion and reranking need candidates beyond the final k
        depth = k * 4 if (self.embed_fn or self.rerank_fn) else k
        hits = {}
        step = 2000  # bounds the size of one SQL batch
        for i in range(0, len(queries), step):
            hits.update(self.store.search_many(queries[i:i + step], depth))
        if not queries:
            _ = self.store  # an unusable index path should fail even when no question has keywords
        vec = self._vector_hits(list(questions), depth) if self.embed_fn else {}
        out: dict[Hashable, Retrieved] = {}
        for qid, question in questions:
            kws, terms = plans[qid]
            chunks = [RetrievedChunk(h.id, h.text, h.score, h.metadata, h.title)
                      for h in hits.get(qid, [])]
            if self.embed_fn:
                chunks = self.rrf([chunks, vec.get(qid, [])])
            chunks = self._rerank(qid, question, chunks[:depth])
            out[qid] = finalize(chunks, k=k, max_chars=self.max_chars, source=self.spec, qid=qid,
                                keywords=kws, search_terms=terms)
        return out
