"""Local index, boolean grammar, BM25 and every retriever kind through its real path.

Hermetic: the HTTP tests run their own server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import socket
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import abtest.retrieval.bm25 as index_store
from abtest.errors import IncompleteRunError, UserError
from abtest.retrieval.bm25 import IndexStore
from abtest.retrieval import Retrieved, get_retriever
from abtest.retrieval import query as Q
from abtest.retrieval.index import build_index, search
from abtest.retrieval.local import content_keywords
from support.fakes import ROOT, send_json

ROOT = str(ROOT)

CORPUS = [
    {"id": "d1", "text": "The cat sat on the mat.", "title": "Cats"},
    {"id": "d2", "text": "A category of conduits and boxes."},
    {"id": "d3", "text": "Cats chase dogs; the dog barks."},
    {"id": "d4", "text": "Refund policies for damaged items: return within 30 days.",
     "metadata": {"source": "policy.pdf", "page": 2}},
    {"id": "d5", "text": "The return policy covers a damaged box."},
    {"id": "d6", "text": "Electrical conduit sizing guide."},
    {"id": "d7", "text": "The bus was late. Is it?"},
    {"id": "d8", "text": "Dog food POLICY"},
]
ALL = {c["id"] for c in CORPUS}


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    d = tmp_path_factory.mktemp("idx")
    corpus = write_jsonl(d / "corpus.jsonl", CORPUS)
    path = str(d / "index.duckdb")
    stats = build_index(corpus, path)
    assert stats["n_docs"] == len(CORPUS)
    with open(corpus, "rb") as fh:
        assert stats["corpus_sha256"] == hashlib.sha256(fh.read()).hexdigest()
    return path


# ---------------------------------------------------------------- tokeniser / stemmer


@pytest.mark.parametrize("word,stemmed", [
    ("conduits", "conduit"), ("boxes", "box"), ("policies", "policy"), ("classes", "class"),
    ("matches", "match"), ("days", "day"), ("is", "is"), ("was", "was"), ("bus", "bus"),
    ("status", "status"), ("analysis", "analysis"), ("news", "news"), ("ties", "tie"),
    ("Alice's", "alice"), ("CATS", "cat"), ("v2s", "v2s"),
])
def test_stemmer_is_conservative(word, stemmed):
    assert Q.tokenize(word) == [stemmed]


def test_tokenize_word_boundaries_and_case():
    assert Q.tokenize("The CAT-category, e-mail!") == ["the", "cat", "category", "e", "mail"]


# ---------------------------------------------------------------- boolean grammar on the index

QUERIES = [
    ("cat", {"d1", "d3"}),                       # plural folded, "category" not matched
    ("CAT", {"d1", "d3"}),
    ("cats", {"d1", "d3"}),
    ("category", {"d2"}),
    ("conduit", {"d2", "d6"}),
    ("box", {"d2", "d5"}),
    ("policy", {"d4", "d5", "d8"}),
    ("cat AND dog", {"d3"}),
    ("cat dog", {"d3"}),                         # implicit AND
    ("cat OR category", {"d1", "d2", "d3"}),
    ("policy NOT damaged", {"d8"}),
    ("policy AND NOT (refund OR dog)", {"d5"}),
    ("(cat OR dog) AND NOT mat", {"d3", "d8"}),
    ("NOT cat", ALL - {"d1", "d3"}),
    ("mat OR dog bark", {"d1", "d3"}),           # AND binds tighter than OR
    ('"return policy"', {"d5"}),                 # phrase: adjacent, in order
    ('"policy return"', set()),
    ("damaged items", {"d4"}),
    ("30", {"d4"}),
    ("is", {"d7"}),
    ("was AND bus", {"d7"}),
    ("dog AND NOT dog", set()),
    ("zebra", set()),
    ("NOT (cat OR dog OR policy OR box OR conduit OR bus)", set()),
]


@pytest.mark.parametrize("query,expected", QUERIES)
def test_boolean_queries(index, query, expected):
    got = {h.id for h in search(index, query, k=50)}
    assert got == expected


def test_format_query_round_trips():
    for query, _ in QUERIES:
        ast = Q.parse(query)
        assert Q.parse(Q.format_query(ast)) == ast


def test_batched_and_single_paths_agree_with_reference(tmp_path, monkeypatch):
    """Random ASTs: batched DNF SQL, the per-query fallback and the Python reference agree."""
    rng = random.Random(7)
    vocab = "apple banana cherry date elder fig grape".split()
    docs = [{"id": f"r{i:02d}", "text": " ".join(rng.choices(vocab, k=rng.randint(1, 7)))}
            for i in range(30)]
    path = str(tmp_path / "r.duckdb")
    with IndexStore(path) as st:
        st.build(docs)

    def rnd(depth=0):
        r = rng.random()
        if depth > 3 or r < 0.35:
            return Q.Term(rng.choice(vocab))
        if r < 0.45:
            return Q.Phrase(tuple(rng.choices(vocab, k=2)))
        if r < 0.6:
            return Q.Not(rnd(depth + 1))
        cls = Q.And if r < 0.8 else Q.Or
        return cls(tuple(rnd(depth + 1) for _ in range(rng.randint(2, 3))))

    asts = [rnd() for _ in range(150)] + [Q.Or((Q.Term("apple"), Q.Term("fig")))]
    toks = {d["id"]: Q.tokenize(d["text"]) for d in docs}
    with IndexStore(path, read_only=True) as st:
        batched = st.search_many(list(enumerate(asts)), 100)
        monkeypatch.setattr(index_store, "DNF_LIMIT", 0)  # force the one-by-one path
        single = st.search_many(list(enumerate(asts)), 100)
    for i, ast in enumerate(asts):
        expected = {d for d, t in toks.items() if Q.evaluate(ast, t)}
        assert {h.id for h in batched[i]} == expected, Q.format_query(ast)
        assert [(h.id, h.score) for h in batched[i]] == [(h.id, h.score) for h in single[i]]


def test_pruned_or_search_equals_exhaustive(tmp_path):
    """The MaxScore pruning of plain OR queries never changes the top k."""
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(60)]
    weights = [1 / (i + 1) for i in range(60)]
    docs = [{"id": f"p{i:03d}", "text": " ".join(rng.choices(vocab, weights, k=20))}
            for i in range(300)]
    path = str(tmp_path / "p.duckdb")
    with IndexStore(path) as st:
        st.build(docs)
    with IndexStore(path, read_only=True) as st:
        qs = [(i, Q.parse(" OR ".join(rng.sample(vocab, rng.randint(1, 6))))) for i in range(40)]
        for k in (1, 3, 40):  # 40 > the 32 weights kept per term: pruning step 1 is off
            fast = st.search_many(qs, k)
            for i, ast in qs:
                slow = st._search_one(ast, k)
                assert [(h.id, h.score) for h in fast[i]] == [(h.id, h.score) for h in slow]


def test_bm25_matches_hand_computation(index):
    query = "policy damaged"
    docs = {c["id"]: Q.tokenize(c["text"]) for c in CORPUS}
    n = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n
    k1, b = 1.2, 0.75

    def bm25(doc_id):
        toks = docs[doc_id]
        tf = Counter(toks)
        score = 0.0
        for term in ("policy", "damaged"):
            df = sum(1 for t in docs.values() if term in t)
            if tf[term]:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(toks) / avgdl))
        return score

    hits = search(index, query + " OR policy", k=10)  # "a b OR a": ranks by policy + damaged
    assert [h.id for h in hits] == sorted(["d4", "d5", "d8"], key=lambda d: -bm25(d))
    for h in hits:
        assert h.score == pytest.approx(bm25(h.id), abs=1e-6)
    # d5: 7 tokens, tf(policy)=1, tf(damaged)=1 -- spelled out once more by hand
    dl, idf_pol, idf_dam = 7, math.log(1 + (8 - 3 + 0.5) / 3.5), math.log(1 + (8 - 2 + 0.5) / 2.5)
    norm = 1 + k1 * (1 - b + b * dl / avgdl)
    assert dict((h.id, h.score) for h in hits)["d5"] == pytest.approx(
        (idf_pol + idf_dam) * 2.2 / norm, abs=1e-6)


def test_ranking_ties_break_by_id_and_k_limits(index):
    hits = search(index, "cat OR dog OR policy", k=2)
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert search(index, "cat", k=1)[0].snippet.startswith("The cat")


@pytest.mark.parametrize("query,position", [
    ("", 1), ("cat AND", 5), ("AND cat", 1), ("(cat OR dog", 1), ("cat)", 4),
    ("cat OR OR dog", 8), ("NOT", 1), ('"return policy', 1), ("()", 1), ("cat AND )", 5),
    ("!!!", 1),
])
def test_parse_errors_name_query_and_position(query, position):
    with pytest.raises(UserError) as ei:
        Q.parse(query)
    assert ei.value.position == position
    assert repr(query) in str(ei.value) and f"position {position}" in str(ei.value)


def test_lowercase_operators_are_words():
    assert Q.parse("cats and dogs") == Q.And((Q.Term("cat"), Q.Term("and"), Q.Term("dog")))
    assert Q.parse("e-mail") == Q.Phrase(("e", "mail"))


# ---------------------------------------------------------------- index build errors


@pytest.mark.parametrize("lines,line,field", [
    (['{"id": "a", "text": "x"}', '{"id": "b", "text": '], None, None),   # cut: said below
    (['{"text": "x"}'], 1, "id"),
    (['{"id": "a"}'], 1, "text"),
    (['{"id": "a", "text": "   "}'], 1, "text"),
    (['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'], 2, "id"),
    (['{"id": "a", "text": "x", "url": "u"}'], 1, "url"),
    (['{"id": 3, "text": "x"}'], 1, "id"),
    (['[1, 2]'], "item 0 (line 1)", None),    # a JSON array is read; its items must be rows
])
def test_bad_corpus_rows(tmp_path, lines, line, field):
    corpus = write_jsonl(tmp_path / "c.jsonl", lines)
    out = tmp_path / "out" / "index.duckdb"
    with pytest.raises(UserError) as ei:
        build_index(corpus, out)
    if line is None:   # the last record cut short: said once, with its line
        assert ei.value.where is None
        assert ei.value.message == "the file ends mid-record (line 2); was it cut short?"
    else:
        assert ei.value.where == (line if isinstance(line, str) else f"line {line}")
    assert ei.value.field == field and "c.jsonl" in str(ei.value)
    assert sorted(os.listdir(tmp_path)) == ["c.jsonl"]  # no index, no temp file, no new dir


def test_non_utf8_corpus_and_failed_rebuild_keeps_old_index(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", CORPUS[:2])
    path = tmp_path / "index.duckdb"
    build_index(good, path)
    before = path.read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(UserError, match="UTF-8") as ei:
        build_index(bad, path)
    assert ei.value.where == "line 2"
    assert path.read_bytes() == before
    assert not os.path.exists(str(path) + ".building")


def test_missing_index_and_not_an_index(tmp_path):
    with pytest.raises(UserError, match="not found") as ei:
        search(tmp_path / "nope.duckdb", "cat", 5)
    assert "nope.duckdb" in str(ei.value)
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UserError, match="junk.duckdb"):
        IndexStore(junk, read_only=True)
    r = get_retriever("local:missing.duckdb", base_dir=tmp_path)
    with pytest.raises(UserError, match="not found"):
        r.retrieve_many([("q", "cat")], 3)


def test_index_locked_by_a_writer_gives_user_error(tmp_path, index):
    path = str(tmp_path / "locked.duckdb")
    code = textwrap.dedent(f"""
        import sys, time
        from abtest.retrieval.bm25 import IndexStore
        st = IndexStore({path!r})
        st.build([{{"id": "a", "text": "cat"}}])
        print("ready", flush=True)
        sys.stdin.read()
    """)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(UserError) as ei:
            IndexStore(path, read_only=True)
        assert "locked.duckdb" in str(ei.value) and "another process" in str(ei.value)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def test_stats_and_get_chunks(index):
    with IndexStore(index, read_only=True) as st:
        s = st.stats()
        assert s["n_docs"] == 8 and s["k1"] == 1.2 and s["b"] == 0.75
        got = st.get_chunks(["d4", "nope", "d1"])
    assert list(got) == ["d4", "d1"]
    assert got["d4"].metadata == {"source": "policy.pdf", "page": 2}
    assert got["d1"].title == "Cats"


# ---------------------------------------------------------------- retrievers


def test_local_retriever(index):
    base, name = os.path.split(index)
    r = get_retriever(f"local:{name}", base_dir=base, k=3)
    assert r.name == f"bm25@k=3 local:{name}"
    out = r.retrieve_many([("q1", "What is the refund policy for damaged items?"),
                           ("q2", "What is it?")], 3)
    q1 = out["q1"]
    assert isinstance(q1, Retrieved) and isinstance(q1, list)
    assert q1.keywords == ["refund", "policy", "damaged", "items"]
    assert q1.search_terms == "refund OR policy OR damaged OR items"
    assert q1[0].id == "d4" and q1[0].metadata == {"source": "policy.pdf", "page": 2}
    assert len(q1) == 3 and all(isinstance(c.score, float) for c in q1)
    assert q1.scores == [c.score for c in q1]
    assert [c.id for c in q1] == [h.id for h in search(index, q1.search_terms, 3)]
    assert out["q2"] == [] and out["q2"].search_terms == ""
    r.close()


def test_local_retriever_keyword_hook_and_truncation(index):
    base, name = os.path.split(index)

    def llm_keywords(question):
        return ["conduit", "OR", "e-mail"]

    r = get_retriever(f"local:{name}", base_dir=base, k=5, max_chars=10,
                      keywords_fn=llm_keywords)
    assert r.name == f"bm25@k=5,max_chars=10,kw=llm_keywords local:{name}"
    got = r.retrieve_many([("q", "anything")], 2)["q"]
    assert got.search_terms == 'conduit OR "OR" OR "e-mail"'
    assert {c.id for c in got} == {"d2", "d6"} and all(len(c.text) <= 10 for c in got)
    with pytest.raises(UserError, match="unknown option"):
        get_retriever(f"local:{name}", base_dir=base, colour="red")


def test_content_keywords():
    assert content_keywords("How do I return Alice's boxes, and the box?") == [
        "return", "alice", "boxes"]


def test_jsonl_retriever(tmp_path):
    rows = [
        {"id": "q1", "question": "cat?", "context": [
            {"id": "c1", "text": "one", "score": 0.9}, {"id": "c2", "text": "two"}]},
        {"question": "What about dogs?", "contexts": ["dog text", "more dog text"]},
        {"user_input": "Birds?", "retrieved_contexts": ["bird"]},
    ]
    path = write_jsonl(tmp_path / "cap.jsonl", rows)
    r = get_retriever("jsonl:cap.jsonl", base_dir=tmp_path, k=5)
    assert r.name == "import@k=5 jsonl:cap.jsonl"
    out = r.retrieve_many([("q1", "cat?"), ("x", "What about dogs?"), ("y", "Birds?")], 1)
    assert [(c.id, c.text, c.score) for c in out["q1"]] == [("c1", "one", 0.9)]
    assert out["x"][0].id == hashlib.sha1(b"dog text").hexdigest()[:12]
    assert out["y"][0].text == "bird"
    with pytest.raises(UserError, match="not in the file") as ei:
        r.retrieve_many([("q9", "Fish?")], 5)
    assert "cap.jsonl" in str(ei.value)
    with pytest.raises(UserError, match="different question text"):
        r.retrieve_many([("q1", "another question")], 5)
    one = write_jsonl(tmp_path / "one.jsonl", ['{"id": "q1", "context": "one passage"}'])
    got = get_retriever(f"jsonl:{one}", base_dir=tmp_path).retrieve_many([("q1", "x")], 5)
    assert [c.text for c in got["q1"]] == ["one passage"]   # a string is one passage
    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"id": "q1", "context": 42}'])
    with pytest.raises(UserError, match="line 1"):
        get_retriever(f"jsonl:{bad}", base_dir=tmp_path).retrieve_many([("q1", "x")], 5)
    assert path


PY_MODULE = '''
class Doc:
    def __init__(self, id, text):
        self.id, self.text, self.score, self.metadata = id, text, 1.5, None

def good(question, k):
    return [{"id": "a", "text": "alpha " + question, "score": 2, "metadata": {"m": 1}},
            Doc("b", "beta"), {"id": "a", "text": "alpha " + question}, "gamma"][:k + 1]

def garbage(question, k):
    return {"id": "a"}

def bad_item(question, k):
    return [{"text": "no id"}]

def down(question, k):
    raise ConnectionRefusedError("vector db down")
'''


def test_python_retriever(tmp_path):
    (tmp_path / "my_retr_mod.py").write_text(PY_MODULE)
    r = get_retriever("python:my_retr_mod:good", base_dir=str(tmp_path), k=3)
    assert r.name == "python@k=3 python:my_retr_mod:good"
    got = r.retrieve_many([("q", "hi")], 2)["q"]
    assert [c.id for c in got] == ["a", "b"]  # the repeated "a" is dropped
    assert got[0].score == 2.0 and got[0].metadata == {"m": 1} and got[1].score == 1.5
    for fn, err, pattern in [("garbage", UserError, "python:my_retr_mod:garbage"),
                             ("bad_item", UserError, "chunk id"),
                             ("down", IncompleteRunError, "vector db down"),
                             ("missing", UserError, "no function")]:
        with pytest.raises(err, match=pattern):
            get_retriever(f"python:my_retr_mod:{fn}", base_dir=str(tmp_path)).retrieve_many(
                [("q", "hi")], 3)
    with pytest.raises(UserError, match="cannot import"):
        get_retriever("python:no_such_mod_xyz:f", base_dir=str(tmp_path)).retrieve_many(
            [("q", "hi")], 3)


_SLOW_RELEASE = threading.Event()   # /slow answers once the test has seen its timeout


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/slow":
            _SLOW_RELEASE.wait(30)
        if self.path == "/auth" and self.headers.get("Authorization") != "Bearer s3cret":
            return self._send(401, b'{"error": "no"}')
        if self.path == "/notjson":
            return self._send(200, b"<html>oops</html>")
        if self.path == "/shape":
            return self._send(200, b'{"results": 1}')
        if self.path == "/busy":
            return self._send(503, b"{}")
        if self.path == "/bare":
            payload = [{"id": "b1", "text": "bare " + body["query"]}]
        elif self.path == "/custom":
            payload = {"data": {"hits": [{"doc_id": 7, "content": f"custom {body['q']} {body['n']}",
                                          "rel": 0.5}]}}
        else:
            payload = {"chunks": [{"id": f"c{i}", "text": f"{body['query']} {i}", "score": 1.0 - i / 10}
                                  for i in range(body["k"] + 2)]}
        self._send(200, payload)

    def _send(self, code, body):
        send_json(self, code, body)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the timeout test hangs up on /slow on purpose


@pytest.fixture(scope="module")
def server():
    srv = _QuietServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    _SLOW_RELEASE.set()      # a test that failed before it released /slow
    srv.shutdown()
    srv.server_close()


def test_http_retriever(server, monkeypatch):
    r = get_retriever(server + "/search?api_key=XYZ", base_dir=".", k=2)
    assert r.name == f"http@k=2 {server}/search?api_key=***"
    out = r.retrieve_many([("q1", "alpha"), ("q2", "beta")], 2)
    assert [c.id for c in out["q1"]] == ["c0", "c1"] and out["q2"][0].text == "beta 0"
    assert out["q1"][0].score == 1.0

    assert get_retriever(server + "/bare", base_dir=".").retrieve_many(
        [("q", "x")], 5)["q"][0].text == "bare x"
    custom = get_retriever(server + "/custom", base_dir=".", chunks_path="data.hits",
                           id_field="doc_id", text_field="content", score_field="rel",
                           body_template='{"q": "{query}", "n": "{k}"}')
    got = custom.retrieve_many([("q", "hey")], 4)["q"]
    assert (got[0].id, got[0].text, got[0].score) == ("7", "custom hey 4", 0.5)

    monkeypatch.setenv("RETR_TOKEN", "s3cret")
    authed = get_retriever(server + "/auth", base_dir=".", auth_env="RETR_TOKEN")
    assert len(authed.retrieve_many([("q", "x")], 1)["q"]) == 1
    monkeypatch.setenv("RETR_TOKEN", "wrong")
    with pytest.raises(UserError, match="401"):
        authed.retrieve_many([("q", "x")], 1)
    monkeypatch.delenv("RETR_TOKEN")
    with pytest.raises(UserError, match="RETR_TOKEN"):
        authed.retrieve_many([("q", "x")], 1)

    for path, err, pattern in [("/notjson", UserError, "not JSON"),
                               ("/shape", UserError, "no chunk list"),
                               ("/busy", IncompleteRunError, "503")]:
        with pytest.raises(err, match=pattern):
            get_retriever(server + path, base_dir=".", retries=0).retrieve_many([("q", "x")], 1)
    with pytest.raises(IncompleteRunError, match="unreachable"):
        get_retriever(server + "/slow", base_dir=".", timeout=0.2).retrieve_many([("q", "x")], 1)
    _SLOW_RELEASE.set()


def test_http_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(IncompleteRunError, match="unreachable"):
        get_retriever(f"http://127.0.0.1:{port}/x", base_dir=".").retrieve_many([("q", "x")], 1)


def test_unknown_spec():
    with pytest.raises(UserError, match="unknown retriever kind"):
        get_retriever("ftp://x", base_dir=".")
    with pytest.raises(UserError, match="python:package.module:function"):
        get_retriever("python:nomodule", base_dir=".")
