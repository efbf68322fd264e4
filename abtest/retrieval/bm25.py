"""The local BM25 retrieval index behind `abtest index` and the `local:` retriever.

Its own DuckDB file, with plain tables users can inspect with SQL; scoring is fixed at
build time so a query is a sum of stored weights and ties break by chunk id.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import duckdb
import numpy as np

from abtest.errors import UserError
from abtest.retrieval.query import (TOKENIZER_VERSION, And, Node, Not, Or, Phrase, Term, positive_terms, to_dnf,
                    tokenize)

# =========================================================================== local index
# The local retrieval index (`abtest index`, `local:` retriever).
#
# Layout of an index file (plain tables, so users can inspect it with SQL):
#
#     meta    (schema_version, tokenizer, n_docs, avgdl, k1, b, created_at, corpus_sha256)
#     chunks  (doc, id, title, text, metadata JSON, length, terms)
#     terms   (term, df, idf, topw: the largest 32 weights of the term, for pruning)
#     tokens  (doc, term, tf, w)
#
# `doc` is a dense integer numbered in `id` order, so ranking ties break by chunk id
# without a join. `chunks.terms` is the space-joined token stream produced by
# `abtest.retrieval.query.tokenize` (Python is the single tokeniser, so queries and
# documents can never disagree); SQL splits it into `tokens`. `w` is the BM25 weight of
# the term in the document, fixed at build time:
#
#     idf = ln(1 + (N - df + 0.5) / (df + 0.5))
#     w   = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
#
# A query's score for a matching chunk is the sum of `w` over the query's distinct
# positive terms (terms not under NOT; phrase words count individually), rounded to 6
# decimals so ties are exact and ordering is reproducible.

INDEX_SCHEMA_VERSION = 1
K1 = 1.2
B = 0.75
DNF_LIMIT = 256  # beyond this many alternatives a query is evaluated on its own
_BATCH_ROWS = 20_000
_TOPW = 32  # per-term top weights kept for pruning; k above this disables pruning
_SCORE_MARGIN = 1e-5  # keeps pruning exact despite 6-decimal rounding of scores


class IndexHit(NamedTuple):
    id: str
    score: float | None   # None from get_chunks: fetched by id, not scored
    title: str | None
    text: str
    metadata: dict | None


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


_counter = itertools.count()


class IndexStore:
    """One DuckDB index file. A writer holds it exclusively; readers use read_only=True."""

    def __init__(self, path: str | os.PathLike, read_only: bool = False):
        self.path = os.fspath(path)
        self.read_only = read_only
        self._lock = threading.Lock()
        if read_only and not os.path.exists(self.path):
            if os.path.exists(self.path + ".building"):
                raise UserError("index not found; `abtest index` may still be building it "
                                f"({self.path}.building exists): wait and retry", file=self.path)
            raise UserError("index not found; build it with `abtest index CORPUS.jsonl --index "
                            f"{self.path}`", file=self.path)
        try:
            self.con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as exc:
            raise _open_error(self.path, exc) from None
        self.con.execute("SET enable_progress_bar = false")  # it would draw on the user's terminal
        self._meta: dict[str, Any] | None = None
        if read_only:
            self._meta = self._read_meta()

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        con = getattr(self, "con", None)
        if con is not None:
            del self.con  # closed: a later query fails loudly rather than on a closed handle
            con.close()

    def __enter__(self) -> "IndexStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_meta(self) -> dict[str, Any]:
        try:
            cur = self.con.execute("SELECT * FROM meta")
        except duckdb.CatalogException:
            raise UserError("not an abtest index (it has no 'meta' table); build one with "
                            "`abtest index`", file=self.path) from None
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
        row = rows[0] if rows else None
        if row is None:
            raise UserError("index is incomplete (empty 'meta' table); rebuild it", file=self.path)
        meta = dict(zip(cols, row))
        if meta.get("schema_version") != INDEX_SCHEMA_VERSION or meta.get("tokenizer") != TOKENIZER_VERSION:
            raise UserError(
                f"index was built by another abtest version (schema {meta.get('schema_version')}, "
                f"tokenizer {meta.get('tokenizer')}; this one needs schema {INDEX_SCHEMA_VERSION}, "
                f"tokenizer {TOKENIZER_VERSION}); rebuild it with `abtest index`", file=self.path)
        return meta

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = self._read_meta()
        return self._meta

    # ------------------------------------------------------------ build

    def build(self, chunks: Iterable[Any], *,
              corpus_sha256: str | Callable[[], str | None] | None = None) -> dict[str, Any]:
        """Replace the index contents with `chunks` (dicts or objects: id, text, title?, metadata?).

        `corpus_sha256` may be a callable, read once `chunks` is exhausted, so a caller
        can hash the corpus file while streaming it.

        Tokenising happens here in Python; everything else (posting lists, df, BM25
        weights) is set-based SQL inside one transaction, so a crash leaves the old
        contents or the new ones, never a mix.
        """
        if self.read_only:
            raise RuntimeError("IndexStore opened read-only")
        con = self.con
        with self._lock:
            con.execute("BEGIN TRANSACTION")
            try:
                for t in ("meta", "tokens", "terms", "chunks", "_stage"):
                    con.execute(f"DROP TABLE IF EXISTS {t}")
                con.execute("CREATE TABLE _stage (seq BIGINT, id VARCHAR, title VARCHAR, "
                            "text VARCHAR, metadata VARCHAR, length INTEGER, terms VARCHAR)")
                seq = 0
                batch: list[Any] = []
                for item in chunks:
                    batch.append(item)
                    if len(batch) >= _BATCH_ROWS:
                        seq = self._insert_stage(batch, seq)
                        batch = []
                if batch:
                    self._insert_stage(batch, seq)
                dup = con.execute("SELECT id FROM _stage GROUP BY id HAVING count(*) > 1 "
                                  "ORDER BY id LIMIT 1").fetchall()
                if dup:
                    raise UserError(f"duplicate chunk id {dup[0][0]!r}", file=self.path, field="id")
                con.execute("""
                    CREATE TABLE chunks AS
                    SELECT (row_number() OVER (ORDER BY id) - 1)::INTEGER AS doc, id, title, text,
                           metadata::JSON AS metadata, length, terms
                    FROM _stage ORDER BY doc""")
                con.execute("DROP TABLE _stage")
                if callable(corpus_sha256):
                    corpus_sha256 = corpus_sha256()
                n_docs, avgdl = con.execute(
                    "SELECT count(*), coalesce(avg(length), 0) FROM chunks").fetchall()[0]
                con.execute("""
                    CREATE TEMP TABLE _postings AS
                    SELECT doc, term, count(*)::INTEGER AS tf
                    FROM (SELECT doc, unnest(string_split(terms, ' ')) AS term FROM chunks)
                    WHERE term <> '' GROUP BY doc, term""")
                con.execute("""
                    CREATE TABLE terms AS
                    SELECT term, count(*)::INTEGER AS df,
                           ln(1 + ($n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
                    FROM _postings GROUP BY term ORDER BY term""", {"n": n_docs})
                con.execute("""
                    CREATE TABLE tokens AS
                    SELECT p.doc, p.term, p.tf,
                           t.idf * p.tf * ($k1 + 1)
                             / (p.tf + $k1 * (1 - $b + $b * c.length / $avgdl)) AS w
                    FROM _postings p JOIN terms t USING (term) JOIN chunks c USING (doc)
                    ORDER BY p.term, p.doc""",
                            {"k1": K1, "b": B, "avgdl": avgdl if avgdl > 0 else 1.0})
                con.execute("DROP TABLE _postings")
                con.execute(f"""
                    CREATE TABLE _terms2 AS
                    SELECT t.term, t.df, t.idf, w.topw
                    FROM terms t JOIN (SELECT term, list(w ORDER BY w DESC)[1:{_TOPW}] AS topw
                                       FROM tokens GROUP BY term) w USING (term)
                    ORDER BY t.term""")
                con.execute("DROP TABLE terms")
                con.execute("ALTER TABLE _terms2 RENAME TO terms")
                # No ART index on tokens(term): measured, hash joins over the term-sorted
                # table were as fast or faster, and the index costs build time and space.
                con.execute("""
                    CREATE TABLE meta AS SELECT
                      $schema::INTEGER AS schema_version, $tok::VARCHAR AS tokenizer,
                      $n::BIGINT AS n_docs, $avgdl::DOUBLE AS avgdl,
                      $k1::DOUBLE AS k1, $b::DOUBLE AS b,
                      $created::VARCHAR AS created_at, $sha::VARCHAR AS corpus_sha256""",
                            {"schema": INDEX_SCHEMA_VERSION, "tok": TOKENIZER_VERSION, "n": n_docs,
                             "avgdl": avgdl, "k1": K1, "b": B, "sha": corpus_sha256,
                             "created": _dt.datetime.now(_dt.timezone.utc)
                             .isoformat(timespec="seconds").replace("+00:00", "Z")})
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        con.execute("CHECKPOINT")
        self._meta = None
        return self.stats()

    def _insert_stage(self, batch: list[Any], seq0: int) -> int:
        n = len(batch)
        ids = np.empty(n, dtype=object)
        titles = np.empty(n, dtype=object)
        texts = np.empty(n, dtype=object)
        metas = np.empty(n, dtype=object)
        terms = np.empty(n, dtype=object)
        lengths = np.empty(n, dtype=np.int32)
        for i, item in enumerate(batch):
            text = _field(item, "text")
            toks = tokenize(text)
            ids[i] = _field(item, "id")
            texts[i] = text
            titles[i] = _field(item, "title")
            md = _field(item, "metadata")
            metas[i] = None if md is None else json.dumps(md, ensure_ascii=False, sort_keys=True)
            terms[i] = " ".join(toks)
            lengths[i] = len(toks)
        name = f"_stage_in_{next(_counter)}"
        self.con.register(name, {"seq": np.arange(seq0, seq0 + n, dtype=np.int64), "id": ids,
                                 "title": titles, "text": texts, "metadata": metas,
                                 "length": lengths, "terms": terms})
        try:
            self.con.execute(f"INSERT INTO _stage SELECT seq, id, title, text, metadata, length, "
                             f"terms FROM {name}")
        finally:
            self.con.unregister(name)
        return seq0 + n

    # ------------------------------------------------------------ search

    def search(self, ast: Node, k: int) -> list[IndexHit]:
        return self.search_many([(0, ast)], k)[0]

    def search_many(self, queries: Sequence[tuple[Hashable, Node]], k: int
                    ) -> dict[Hashable, list[IndexHit]]:
        """Top-k per query, best first (score desc, then chunk id), all in a few statements.

        Plain `a OR b OR c` queries (what capture sends) share one pruned statement.
        Other queries are put in disjunctive normal form; their atoms, clauses and
        positive terms become small tables joined once with the posting lists. A query
        whose DNF is too large is evaluated alone with INTERSECT/UNION/EXCEPT.
        """
        if k < 1:
            raise UserError(f"k must be at least 1, got {k}", field="k")
        out: dict[Hashable, list[IndexHit]] = {qid: [] for qid, _ in queries}
        simple: list[tuple[Hashable, list[str]]] = []
        batch: list[tuple[Hashable, Node, list]] = []
        alone: list[tuple[Hashable, Node]] = []
        for qid, ast in queries:
            terms = _or_of_terms(ast)
            if terms is not None:
                simple.append((qid, terms))
                continue
            dnf = to_dnf(ast, DNF_LIMIT)
            if dnf is None:
                alone.append((qid, ast))
            else:
                batch.append((qid, ast, dnf))
        with self._lock:
            if simple:
                out.update(self._search_simple(simple, k))
            if batch:
                out.update(self._search_batch(batch, k))
            for qid, ast in alone:
                out[qid] = self._search_one(ast, k)
        return out

    def _search_simple(self, batch: list[tuple[Hashable, list[str]]], k: int
                       ) -> dict[Hashable, list[IndexHit]]:
        """Plain OR of terms (what capture sends), with exact MaxScore-style pruning.

        Scores are sums of non-negative weights, so lower bounds on the k-th best score
        let most postings of common words be skipped without changing the result:
        1. L = the k-th largest weight in any one query term's posting list (k distinct
           docs score at least L). Terms whose summed maximum weights stay below L are
           "non-essential": a doc holding only those cannot reach the top k.
        2. Docs holding an essential term get a partial score s from essential terms;
           theta = the k-th best s is another lower bound. A doc whose s plus the
           non-essential maxima stays below max(L, theta) is dropped.
        3. Survivors get their exact score by looking up only their own
           (term, doc) postings for the non-essential terms.
        The result equals scoring every posting (tests check this against the
        unpruned path); the margin keeps it exact under 6-decimal rounding.
        """
        terms = sorted({t for _, ts in batch for t in ts})
        info = {t: (maxw, kth) for t, maxw, kth in self.con.execute(
            "SELECT term, topw[1], CASE WHEN len(topw) >= $k THEN topw[$k] ELSE 0 END "
            "FROM terms WHERE term IN (SELECT unnest($t::VARCHAR[]))",
            {"k": k, "t": terms}).fetchall()}
        qess: list[tuple[int, str]] = []
        qnon: list[tuple[int, str]] = []
        qinfo: list[tuple[int, float, float]] = []
        for qi, (_, ts) in enumerate(batch):
            ts = [t for t in ts if t in info]
            lower = max((info[t][1] for t in ts), default=0.0)
            cum = rest = 0.0
            for t in sorted(ts, key=lambda t: (info[t][0], t)):
                cum += info[t][0]
                if cum >= lower - _SCORE_MARGIN:
                    qess.append((qi, t))
                else:
                    qnon.append((qi, t))
                    rest += info[t][0]
            qinfo.append((qi, rest, lower))
        if not qess:
            return {qid: [] for qid, _ in batch}

        def view(rows: list[tuple], names: tuple[str, ...], types: tuple) -> dict[str, np.ndarray]:
            return {n: np.array([r[i] for r in rows], dtype=t)
                    for i, (n, t) in enumerate(zip(names, types))}

        tag = next(_counter)
        views = {f"_qess{tag}": view(qess, ("qi", "term"), (np.int32, object)),
                 f"_qnon{tag}": view(qnon, ("qi", "term"), (np.int32, object)),
                 f"_qinfo{tag}": view(qinfo, ("qi", "rest", "lower"),
                                      (np.int32, np.float64, np.float64))}
        for name, data in views.items():
            self.con.register(name, data)
        sql = f"""
        WITH ess AS MATERIALIZED (
            SELECT e.qi, t.doc, sum(t.w) AS s
            FROM _qess{tag} e JOIN tokens t ON t.term = e.term GROUP BY e.qi, t.doc
        ),
        theta AS (
            SELECT qi, max(s, $k) AS top FROM ess GROUP BY qi
        ),
        cand AS MATERIALIZED (
            SELECT e.qi, e.doc, e.s
            FROM ess e JOIN _qinfo{tag} i ON i.qi = e.qi JOIN theta th ON th.qi = e.qi
            WHERE e.s + i.rest >= greatest(i.lower, CASE WHEN len(th.top) >= $k
                                                     THEN th.top[$k] ELSE 0 END) - $margin
        ),
        pairs AS MATERIALIZED (  -- materialised so the join below is (term, doc) lookups
            SELECT c.qi, c.doc, n.term FROM cand c JOIN _qnon{tag} n ON n.qi = c.qi
        ),
        extra AS (
            SELECT p.qi, p.doc, sum(t.w) AS s
            FROM pairs p JOIN tokens t ON t.term = p.term AND t.doc = p.doc
            GROUP BY p.qi, p.doc
        ),
        scored AS (
            SELECT c.qi, c.doc, round(c.s + coalesce(x.s, 0), 6) AS score
            FROM cand c LEFT JOIN extra x ON x.qi = c.qi AND x.doc = c.doc
        ),
        top AS (
            SELECT qi, doc, score FROM scored
            QUALIFY row_number() OVER (PARTITION BY qi ORDER BY score DESC, doc) <= $k
        )
        SELECT t.qi, c.id, t.score, c.title, c.text, c.metadata
        FROM top t JOIN chunks c ON c.doc = t.doc
        ORDER BY t.qi, t.score DESC, t.doc
        """
        try:
            rows = self.con.execute(sql, {"k": k, "margin": _SCORE_MARGIN}).fetchall()
        finally:
            for name in views:
                self.con.unregister(name)
        return _collect(rows, [qid for qid, _ in batch])

    def _search_batch(self, batch: list, k: int) -> dict[Hashable, list[IndexHit]]:
        qterm: list[tuple[int, str]] = []
        qatom: list[tuple[int, int, str | None, str | None]] = []
        qword: list[tuple[int, int, str, int]] = []
        qclause: list[tuple[int, int, int, bool, int]] = []
        qzero: list[tuple[int, int]] = []
        qpos: list[tuple[int, str]] = []
        for qi, (_qid, ast, dnf) in enumerate(batch):
            atoms: dict[Any, int] = {}
            words: set[str] = set()
            for ci, (pos, neg) in enumerate(dnf):
                for atom, is_neg in [(a, False) for a in pos] + [(a, True) for a in neg]:
                    if atom not in atoms:
                        ai = atoms[atom] = len(atoms)
                        if isinstance(atom, Term):
                            qatom.append((qi, ai, atom.term, None))
                            words.add(atom.term)
                        else:
                            ws = sorted(set(atom.terms))
                            qatom.append((qi, ai, None, " " + " ".join(atom.terms) + " "))
                            qword.extend((qi, ai, w, len(ws)) for w in ws)
                            words.update(ws)
                    qclause.append((qi, ci, atoms[atom], is_neg, len(pos)))
                if not pos:
                    qzero.append((qi, ci))
            pos_terms = positive_terms(ast)
            words.update(pos_terms)  # DNF may drop contradictory clauses; scoring must not
            qterm.extend((qi, w) for w in sorted(words))
            qpos.extend((qi, t) for t in pos_terms)

        def cols(rows: list[tuple], names: list[str], types: list[Any]) -> dict[str, np.ndarray]:
            return {n: np.array([r[i] for r in rows], dtype=t) for i, (n, t) in
                    enumerate(zip(names, types))}

        tag = next(_counter)
        views = {
            f"_qterm{tag}": cols(qterm, ["qi", "term"], [np.int32, object]),
            f"_qatom{tag}": cols(qatom, ["qi", "atom", "term", "pattern"],
                                 [np.int32, np.int32, object, object]),
            f"_qword{tag}": cols(qword, ["qi", "atom", "term", "nwords"],
                                 [np.int32, np.int32, object, np.int32]),
            f"_qclause{tag}": cols(qclause, ["qi", "clause", "atom", "neg", "npos"],
                                   [np.int32, np.int32, np.int32, bool, np.int32]),
            f"_qzero{tag}": cols(qzero, ["qi", "clause"], [np.int32, np.int32]),
            f"_qpos{tag}": cols(qpos, ["qi", "term"], [np.int32, object]),
        }
        for name, data in views.items():
            self.con.register(name, data)
        sql = f"""
        WITH hits AS MATERIALIZED (
            SELECT q.qi, t.doc, t.term, t.w FROM _qterm{tag} q JOIN tokens t ON t.term = q.term
        ),
        phrase_cand AS (
            SELECT h.qi, h.doc, w.atom FROM hits h
            JOIN _qword{tag} w ON w.qi = h.qi AND w.term = h.term
            GROUP BY h.qi, h.doc, w.atom HAVING count(*) = any_value(w.nwords)
        ),
        present AS MATERIALIZED (
            SELECT h.qi, h.doc, a.atom FROM hits h
            JOIN _qatom{tag} a ON a.qi = h.qi AND a.term = h.term
            UNION ALL
            SELECT p.qi, p.doc, p.atom FROM phrase_cand p
            JOIN _qatom{tag} a ON a.qi = p.qi AND a.atom = p.atom
            JOIN chunks c ON c.doc = p.doc
            WHERE contains(' ' || c.terms || ' ', a.pattern)
        ),
        cand AS (
            SELECT p.qi, p.doc, c.clause FROM present p
            JOIN _qclause{tag} c ON c.qi = p.qi AND c.atom = p.atom AND NOT c.neg
            GROUP BY p.qi, p.doc, c.clause HAVING count(*) = any_value(c.npos)
            UNION ALL
            SELECT z.qi, ch.doc, z.clause FROM _qzero{tag} z CROSS JOIN chunks ch
        ),
        bad AS (
            SELECT p.qi, p.doc, c.clause FROM present p
            JOIN _qclause{tag} c ON c.qi = p.qi AND c.atom = p.atom AND c.neg
        ),
        matched AS (
            SELECT DISTINCT qi, doc FROM (SELECT * FROM cand EXCEPT SELECT * FROM bad)
        ),
        scored AS (
            SELECT h.qi, h.doc, sum(h.w) AS score FROM hits h
            JOIN _qpos{tag} p ON p.qi = h.qi AND p.term = h.term
            GROUP BY h.qi, h.doc
        ),
        top AS (
            SELECT m.qi, m.doc, round(coalesce(s.score, 0), 6) AS score
            FROM matched m LEFT JOIN scored s ON s.qi = m.qi AND s.doc = m.doc
            QUALIFY row_number() OVER (PARTITION BY m.qi ORDER BY score DESC, m.doc) <= $k
        )
        SELECT t.qi, c.id, t.score, c.title, c.text, c.metadata
        FROM top t JOIN chunks c ON c.doc = t.doc
        ORDER BY t.qi, t.score DESC, t.doc
        """
        try:
            rows = self.con.execute(sql, {"k": k}).fetchall()
        finally:
            for name in views:
                self.con.unregister(name)
        return _collect(rows, [qid for qid, _, _ in batch])

    def _search_one(self, ast: Node, k: int) -> list[IndexHit]:
        params: list[Any] = []
        setsql = _set_sql(ast, params)
        pos = positive_terms(ast)
        sql = f"""
        WITH m AS ({setsql}),
        s AS (SELECT doc, sum(w) AS score FROM tokens
              WHERE term IN (SELECT unnest(?::VARCHAR[])) AND doc IN (SELECT doc FROM m)
              GROUP BY doc)
        SELECT c.id, round(coalesce(s.score, 0), 6) AS score, c.title, c.text, c.metadata
        FROM (SELECT DISTINCT doc FROM m) m2 JOIN chunks c ON c.doc = m2.doc
        LEFT JOIN s ON s.doc = m2.doc
        ORDER BY score DESC, c.doc LIMIT ?"""
        rows = self.con.execute(sql, params + [pos, k]).fetchall()
        return [IndexHit(cid, float(sc), title, text, _load(md)) for cid, sc, title, text, md in rows]

    # ------------------------------------------------------------ lookups

    def all_texts(self) -> tuple[list[str], list[str]]:
        """Every chunk's id and text in id order (for embedding the whole corpus once)."""
        with self._lock:
            rows = self.con.execute("SELECT id, text FROM chunks ORDER BY doc").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def get_chunks(self, ids: Sequence[str]) -> dict[str, IndexHit]:
        """Chunks by id (score None); unknown ids are simply absent from the result."""
        if not ids:
            return {}
        with self._lock:
            rows = self.con.execute(
                "SELECT id, title, text, metadata FROM chunks "
                "WHERE id IN (SELECT unnest(?::VARCHAR[]))", [list(ids)]).fetchall()
        found = {r[0]: IndexHit(r[0], None, r[1], r[2], _load(r[3])) for r in rows}
        return {i: found[i] for i in ids if i in found}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            meta = dict(self.meta)
            n_terms = self.con.execute("SELECT count(*) FROM terms").fetchall()[0][0]
            n_postings = self.con.execute("SELECT count(*) FROM tokens").fetchall()[0][0]
        return {"path": self.path, "n_docs": meta["n_docs"], "avgdl": meta["avgdl"],
                "n_terms": n_terms, "n_postings": n_postings,
                "schema_version": meta["schema_version"], "tokenizer": meta["tokenizer"],
                "k1": meta["k1"], "b": meta["b"], "created_at": meta["created_at"],
                "corpus_sha256": meta["corpus_sha256"]}


def _or_of_terms(ast: Node) -> list[str] | None:
    """The distinct terms of a plain `a OR b OR c` query, else None."""
    if isinstance(ast, Term):
        return [ast.term]
    if isinstance(ast, Or):
        terms = [x for x in ast.items if isinstance(x, Term)]
        if len(terms) == len(ast.items):
            return list(dict.fromkeys(x.term for x in terms))
    return None


def _collect(rows: list[tuple], qids: list[Hashable]) -> dict[Hashable, list[IndexHit]]:
    out: dict[Hashable, list[IndexHit]] = {qid: [] for qid in qids}
    for qi, cid, score, title, text, md in rows:
        out[qids[qi]].append(IndexHit(cid, float(score), title, text, _load(md)))
    return out


def _load(md: Any) -> dict | None:
    if md is None:
        return None
    return json.loads(md) if isinstance(md, str) else md


def _set_sql(node: Node, params: list[Any]) -> str:
    """The set of `doc`s matching `node`, as INTERSECT/UNION/EXCEPT over posting lists."""
    if isinstance(node, Term):
        params.append(node.term)
        return "SELECT doc FROM tokens WHERE term = ?"
    if isinstance(node, Phrase):
        inner = " INTERSECT ".join(_set_sql(Term(t), params) for t in sorted(set(node.terms)))
        params.append(" " + " ".join(node.terms) + " ")
        return (f"SELECT doc FROM chunks WHERE doc IN ({inner}) "
                f"AND contains(' ' || terms || ' ', ?)")
    if isinstance(node, Not):
        return f"SELECT doc FROM chunks EXCEPT ({_set_sql(node.item, params)})"
    op = " INTERSECT " if isinstance(node, And) else " UNION "
    assert isinstance(node, (And, Or))
    return op.join(f"({_set_sql(x, params)})" for x in node.items)


def _open_error(path: str, exc: Exception) -> UserError:
    msg = str(exc)
    if "Could not set lock" in msg or "Conflicting lock" in msg:
        pid = re.search(r"PID (\d+)", msg)
        who = f" (PID {pid.group(1)})" if pid else ""
        return UserError(f"the index is in use by another process{who}, probably still being "
                         "written by `abtest index`; wait for it to finish and retry", file=path)
    first = msg.splitlines()[0] if msg else type(exc).__name__
    if not os.path.exists(path):
        return UserError(f"cannot create the index file ({first})", file=path)
    return UserError(f"cannot open the index as a DuckDB file ({first})", file=path)
