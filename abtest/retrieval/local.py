"""`local:PATH`: BM25 over the index built by `abtest index`, many questions per SQL query."""

from __future__ import annotations

import os
from typing import Callable, Hashable, Sequence

from abtest.errors import UserError
from abtest.store import IndexStore
from abtest.retrieval.base import Retrieved, RetrievedChunk, Retriever, finalize
from abtest.retrieval.query import or_query, parse, stem, tokenize, words

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
    method = "bm25"

    def __init__(self, spec: str, path: str, *, base_dir: str, k: int = 5,
                 max_chars: int | None = None,
                 keywords_fn: Callable[[str], list[str]] | None = None,
                 keywords_label: str | None = None):
        super().__init__(spec, k=k, max_chars=max_chars)
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
        return extra

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
        k = self._k(k)
        plans: dict[Hashable, tuple[list[str], str]] = {}
        queries = []
        for qid, question in questions:
            kws = self.keywords(question)
            terms = or_query(kws)
            plans[qid] = (kws, terms)
            if terms:
                queries.append((qid, parse(terms)))
        hits = {}
        step = 2000  # bounds the size of one SQL batch
        for i in range(0, len(queries), step):
            hits.update(self.store.search_many(queries[i:i + step], k))
        if not queries:
            _ = self.store  # an unusable index path should fail even when no question has keywords
        out: dict[Hashable, Retrieved] = {}
        for qid, _question in questions:
            kws, terms = plans[qid]
            chunks = [RetrievedChunk(h.id, h.text, h.score, h.metadata, h.title)
                      for h in hits.get(qid, [])]
            out[qid] = finalize(chunks, k=k, max_chars=self.max_chars, source=self.spec, qid=qid,
                                keywords=kws, search_terms=terms)
        return out
