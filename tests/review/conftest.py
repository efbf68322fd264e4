"""The review tests' store: built once per module, copied for each test."""

from __future__ import annotations

import json
import shutil

import pytest

from abtest.capturing import load_fixture, write_fixture
from abtest.core.models import Case, Chunk, Config
from abtest.store import Store
from support.review_data import (CLAIMS, PAIRWISE, PATH_A, PATH_B, RUN, SHA_A, SHA_B, VARIANT_A,
                         VARIANT_B)
from support.review_data import _answer

@pytest.fixture(scope="module")
def review_template(tmp_path_factory):
    """Build the store once per module; each test gets its own copy of the file."""
    tmp_path = tmp_path_factory.mktemp("review")
    cases = [Case(id=cid, question=f"What about {cid}?", corpus_version="v1", retriever="bm25",
                  answerable=True, context=[Chunk(id="x1", text=f"Fact one about {cid}."),
                                            Chunk(id="x2", text=f"Fact two about {cid}.")])
             for cid in sorted(PAIRWISE)]
    fx = tmp_path / "fixtures" / "tiny"
    write_fixture(fx, cases, corpus_version="v1", retriever="bm25")
    s = Store(tmp_path / "s.duckdb")
    s.create_run({"run_id": RUN, "status": "complete", "fixture_name": "tiny",
                  "fixture_path": str(fx), "n_cases": len(cases),
                  "fixture_sha256": load_fixture(fx).cases_sha256,
                  "variant_a_name": VARIANT_A, "variant_a_sha256": SHA_A, "variant_a_path": PATH_A,
                  "variant_b_name": VARIANT_B, "variant_b_sha256": SHA_B, "variant_b_path": PATH_B,
                  "generator_model": "m", "judge_model": "j",
                  "config_json": Config().model_dump_json(),
                  # the judges this hand-made run made: its cases are finished by those
                  "info_json": json.dumps({"judges": ["pairwise", "faithfulness"]})})
    for cid, (ab, ba) in PAIRWISE.items():
        for v in ("A", "B"):
            s.put_generation({"run_id": RUN, "case_id": cid, "variant": v, "answer": _answer(cid, v),
                              "messages_json": json.dumps([{"role": "system",
                                                            "content": VARIANT_A if v == "A" else VARIANT_B}])})
        s.put_judgment({"run_id": RUN, "case_id": cid, "judge": "pairwise", "subject": "AB",
                        "verdict": ab, "rationale": "Response 1 is better"})
        s.put_judgment({"run_id": RUN, "case_id": cid, "judge": "pairwise", "subject": "BA",
                        "verdict": ba, "rationale": "Response 2 is better"})
        for v in ("A", "B"):
            cl = CLAIMS[(cid, v)]
            sup = sum(1 for verdict, _ in cl if verdict == "supported")
            s.put_judgment({"run_id": RUN, "case_id": cid, "judge": "faithfulness", "subject": v,
                            "verdict": "scored", "score": sup / len(cl)},
                           claims=[{"claim": f"{cid} {v} claim {k}", "verdict": verdict, "chunk_id": ch}
                                   for k, (verdict, ch) in enumerate(cl)])
    s.close()
    return tmp_path / "s.duckdb"


@pytest.fixture
def store(review_template, tmp_path):
    shutil.copy(review_template, tmp_path / "s.duckdb")
    s = Store(tmp_path / "s.duckdb")
    yield s
    s.close()
