"""`abtest index` and `abtest search`: build the local index from a JSONL corpus, query it."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Iterator, NamedTuple

from abtest.errors import UserError
from abtest.retrieval.bm25 import IndexStore
from abtest.retrieval.query import parse, positive_terms, word_spans
from abtest.core.records import read_records
from abtest.imports.corpora import corpus_format, docstore_of, docstore_rows
from abtest.imports.corpora import as_corpus_row

_CORPUS_KEYS = ("id", "text", "title", "metadata")


class SearchHit(NamedTuple):
    id: str
    score: float
    title: str | None
    snippet: str


def _library_rows(path: str, digest: "hashlib._Hash", said: dict[str, Any]
                  ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) of a corpus in abtest's shape or a library's (`corpora`), as abtest
    rows; `said` gets the format and the fields left behind."""

    fmt = None
    left: dict[str, int] = {}
    said["left"] = left
    store = docstore_of(path)
    if store is not None:   # one JSON document of nodes keyed by id, not rows
        digest.update(store[1])
        said["format"] = "llamaindex-docstore"
        for w, node in docstore_rows(store[0], path):
            yield w, _mapped("llamaindex-docstore", node, path, w, left)
        return
    for where, row in read_records(path, "a corpus file (JSONL, a JSON array or CSV)",
                                   name="corpus file", on_raw=digest.update,
                                   utf8_hint="; save the corpus as UTF-8"):
        if fmt is None:
            fmt = said["format"] = corpus_format(row)
        yield where, _mapped(fmt, row, path, where, left)


def _mapped(fmt: str, row: dict, path: str, where: str, left: dict[str, int]) -> dict:

    if fmt != "llamaindex-docstore" and corpus_format(row) != fmt:
        raise UserError(f"this row is in another shape than the file's first ({fmt}): one "
                        "shape per corpus file", file=path, where=where)
    if fmt == "llamaindex-docstore":
        fmt = "llamaindex"
    if fmt == "llamaindex" and not ("id_" in row and "text" in row):
        raise UserError("a node needs `id_` and `text`", file=path, where=where)
    return as_corpus_row(fmt, row, file=path, where=where, left=left)


def _corpus_rows(path: str, digest: "hashlib._Hash", said: dict[str, Any] | None = None
                 ) -> Iterator[dict[str, Any]]:
    """Validated corpus rows; the first bad row raises a UserError naming its line and field."""
    seen: dict[str, str] = {}
    for where, row in _library_rows(path, digest, {} if said is None else said):
        for key in row:
            if key not in _CORPUS_KEYS:
                raise UserError("unknown key (allowed: id, text, title, metadata; put "
                                "anything else under metadata)", file=path, where=where,
                                field=key)
        cid = row.get("id")
        if cid is None:
            raise UserError("required field is missing", file=path, where=where, field="id")
        if not isinstance(cid, str) or not cid.strip():
            raise UserError("must be a non-empty string", file=path, where=where, field="id")
        if cid != cid.strip():
            raise UserError("has leading or trailing whitespace", file=path, where=where,
                            field="id")
        if cid in seen:
            raise UserError(f"duplicate id {cid!r} (first at {seen[cid]})", file=path,
                            where=where, field="id")
        seen[cid] = where
        text = row.get("text")
        if text is None:
            raise UserError("required field is missing", file=path, where=where, field="text")
        if not isinstance(text, str):
            raise UserError("must be a string", file=path, where=where, field="text")
        if not text.strip():
            raise UserError("text is empty", file=path, where=where, field="text")
        title = row.get("title")
        if title is not None and not isinstance(title, str):
            raise UserError("must be a string or null", file=path, where=where, field="title")
        md = row.get("metadata")
        if md is not None and not isinstance(md, dict):
            raise UserError("must be a JSON object or null", file=path, where=where,
                            field="metadata")
        yield {"id": cid, "text": text, "title": title, "metadata": md}
    if not seen:
        raise UserError("the corpus has no rows", file=path)


def _remove(path: str) -> None:
    for p in (path, path + ".wal"):
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def build_index(corpus_jsonl_path: str | os.PathLike, index_path: str | os.PathLike
                ) -> dict[str, Any]:
    """Build the index into `<index>.building`, then rename it into place.

    The rename makes the swap atomic: readers see the old index or the new one, and a
    bad row (or a crash) leaves whatever was there before untouched. A concurrent
    build of the same index fails on the DuckDB lock of the `.building` file.
    """
    corpus = os.fspath(corpus_jsonl_path)
    target = os.fspath(index_path)
    if not os.path.isfile(corpus):
        raise UserError("corpus file not found", file=corpus)
    tmp = target + ".building"
    parent = os.path.dirname(os.path.abspath(target))
    made_dir = None
    if not os.path.isdir(parent):
        made_dir = parent
        os.makedirs(parent)
    digest = hashlib.sha256()
    store = None
    try:
        try:
            store = IndexStore(tmp)
        except UserError as exc:
            if "another process" in exc.message:
                raise UserError("another `abtest index` is building this index right now; wait "
                                "for it to finish", file=target) from None
            _remove(tmp)  # a corrupt leftover from a crashed build
            store = IndexStore(tmp)
        said: dict[str, Any] = {}
        store.build(_corpus_rows(corpus, digest, said), corpus_sha256=digest.hexdigest)
        store.close()
        store = None
        try:
            os.remove(target + ".wal")  # a stale WAL must never be replayed onto the new file
        except FileNotFoundError:
            pass
        os.replace(tmp, target)
    except BaseException:
        if store is not None:
            store.close()
            _remove(tmp)
        elif os.path.exists(tmp) and not _locked_by_other(tmp):
            _remove(tmp)
        if made_dir is not None:
            try:
                os.removedirs(made_dir)
            except OSError:
                pass
        raise
    with IndexStore(target, read_only=True) as st:
        return {**st.stats(), "format": said.get("format", "abtest"),
                "not_imported": dict(said.get("left") or {})}


def _locked_by_other(path: str) -> bool:
    try:
        IndexStore(path).close()
        return False
    except UserError as exc:
        return "another process" in exc.message


def search(index_path: str | os.PathLike, query: str, k: int = 10) -> list[SearchHit]:
    """Best-first hits for a boolean query, with a snippet around the first matched term."""
    ast = parse(query)
    with IndexStore(index_path, read_only=True) as st:
        hits = st.search(ast, k)
    wanted = set(positive_terms(ast))
    out = []
    for h in hits:
        assert h.score is not None  # a search scores every hit (only get_chunks leaves None)
        out.append(SearchHit(h.id, h.score, h.title, snippet(h.text, wanted)))
    return out


def snippet(text: str, terms: set[str], width: int = 160) -> str:
    """A one-line window of `text` starting a little before the first matched term."""
    start = 0
    for s, _e, tok in word_spans(text):
        if tok in terms:
            start = max(0, s - width // 4)
            break
    if start:
        space = text.rfind(" ", 0, start + 1)
        start = space + 1 if space >= 0 and start - space < 20 else start
    cut = text[start:start + width]
    end_cut = start + width < len(text)
    if end_cut and " " in cut[width // 2:]:
        cut = cut[:cut.rfind(" ")]
    out = " ".join(cut.split())
    return ("…" if start else "") + out + ("…" if end_cut else "")
