"""Retrievers for `abtest capture`: one spec string picks where contexts come from.

    local:results/index.duckdb      BM25 + boolean grammar over `abtest index` output
    jsonl:captures.jsonl            import contexts another tool already retrieved
    python:package.module:function  call your own code: function(question, k)
    http://host/path, https://...   POST to a retrieval service

Every retriever has `.name` (stable text recorded on fixtures, e.g.
"bm25@k=5 local:results/index.duckdb"), `.describe(k)` and
`.retrieve_many([(id, question), ...], k) -> {id: Retrieved}`, where `Retrieved` is a
list of `RetrievedChunk(id, text, score, metadata, title)` with `.keywords` and
`.search_terms` (set by local and jsonl retrievers) and `.scores`.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Callable

from abtest.errors import UserError
from abtest.retrieval.base import Retrieved, RetrievedChunk, Retriever
from abtest.retrieval.captured import JsonlRetriever
from abtest.retrieval.http_api import HttpRetriever
from abtest.retrieval.local import LocalRetriever
from abtest.retrieval.pycall import PythonRetriever

__all__ = ["get_retriever", "Retriever", "Retrieved", "RetrievedChunk"]


def get_retriever(spec: str, *, base_dir: str | os.PathLike = ".", **options: Any) -> Retriever:
    """Build the retriever for `spec`; relative paths resolve against `base_dir`.

    Common options: k (default 5; used by `.name` and as retrieve_many's default),
    max_chars (truncate each chunk's text; default none). Kind-specific options are
    the keyword arguments of LocalRetriever, HttpRetriever etc.; an unknown option is
    a UserError rather than being ignored.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UserError("empty retriever spec (use local:PATH, jsonl:PATH, "
                        "python:module:function or an http(s) URL)", field="retriever")
    spec = spec.strip()
    base = os.fspath(base_dir)
    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    cls: type[Retriever]
    if kind == "local":
        cls = LocalRetriever
        args: tuple = (spec, rest)
    elif kind == "jsonl":
        cls = JsonlRetriever
        args = (spec, rest)
    elif kind == "python":
        cls = PythonRetriever
        args = (spec, rest)
    elif kind in ("http", "https"):
        cls = HttpRetriever
        args = (spec,)
    else:
        raise UserError(f"unknown retriever kind {kind!r} (use local:PATH, jsonl:PATH, "
                        "python:module:function or an http(s) URL)", file=spec)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "spec", "path",
                                                                   "target", "base_dir"}
    for name in options:
        if name not in accepted:
            raise UserError(f"unknown option for a {kind} retriever (allowed: "
                            f"{', '.join(sorted(accepted))})", file=spec, field=name)
    make: Callable[..., Retriever] = cls  # every kind takes base_dir; the base class does not
    return make(*args, base_dir=base, **options)
