"""A tiny corpus, a golden set and two live demo servers over it: what the live tests and the
view's live pages run `abtest live` against (the fake model answers; nothing leaves loopback)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from abtest.cli import cli

CORPUS = [
    {"id": "c1", "text": "Normandy is a region in France."},
    {"id": "c2", "text": "Rollo was a Viking leader who founded Normandy."},
    {"id": "c3", "text": "The Normans spoke French."},
    {"id": "c4", "text": "Paris is the capital of France."},
]


GOLDEN = [
    {"id": "q1", "question": "Where is Normandy?", "reference_answer": "France",
     "relevant_chunk_ids": ["c1"], "expected_citations": ["c1"]},
    {"id": "q2", "question": "Who was Rollo?", "key_points": ["Rollo was a Viking leader"],
     "relevant_chunk_ids": ["c2"], "expected_citations": ["c2"]},
    {"id": "q3", "question": "What language did the Normans speak?", "reference_answer": "French",
     "relevant_chunk_ids": ["c3", "c4"]},
    {"id": "q4", "question": "What is the capital of Mars?", "answerable": False,
     "category": "out_of_scope"},
]


# BM25 over CORPUS with k=2 (content words of each question, OR-ed):
#   q1 "normandy" -> c1, c2 (c1 shorter, ranks first); q2 "rollo" -> c2;
#   q3 "language normans speak" -> c3; q4 "capital mars" -> c4
RETRIEVED = {"q1": ["c1", "c2"], "q2": ["c2"], "q3": ["c3"], "q4": ["c4"]}


# precision: q1 1/2, q2 1/1, q3 1/1 -> 5/6; recall: q1 1/1, q2 1/1, q3 1/2 -> 5/6; q4 excluded
HAND_PRECISION = (0.5 + 1 + 1) / 3


HAND_RECALL = (1 + 1 + 0.5) / 3


def make_live_project() -> None:
    """In the current project: the corpus indexed and the golden set written."""
    from abtest.retrieval.index import build_index

    Path("corpus.jsonl").write_text("\n".join(json.dumps(c) for c in CORPUS) + "\n")
    build_index("corpus.jsonl", "results/index.duckdb")
    Path("golden.jsonl").write_text("\n".join(json.dumps(q) for q in GOLDEN) + "\n")


def servers(**kw_a):
    from abtest.livecheck.demo_server import DemoChatServer

    a = DemoChatServer("results/index.duckdb", "variants/a.yaml", model="fake/gen", k=2, **kw_a)
    b = DemoChatServer("results/index.duckdb", "variants/b.yaml", model="fake/gen", k=2)
    return a, b


def invoke_live(*args):
    # through the top-level command, as a user runs it (its registration is part of the test)
    r = CliRunner().invoke(cli, ["live", "--retries", "1", "--backoff", "0.01", *args],
                           catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def open_store():
    from abtest.core.config import load_config
    from abtest.store import Store

    return Store(load_config().store_path)


def frozen_run_id():
    from abtest.core.config import load_config
    from abtest.running.runner import run

    res = run(load_config(), "fixtures/small", "variants/a.yaml", "variants/b.yaml")
    assert res.status == "complete"
    return res.run_id


def frozen_then_live():
    """A frozen run, then a live run against two demo servers beside it: (frozen id, result)."""
    fid = frozen_run_id()
    a, b = servers()
    with a, b:
        return fid, invoke_live("--golden", "golden.jsonl", "--a", a.url, "--b", b.url,
                                "--frozen-run", fid, "--retriever", "bm25@k=2",
                                "--corpus-version", "tiny-v1")
