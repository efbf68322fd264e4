"""A store of one run written by hand (answers, judge verdicts and scores, review items and
human labels), to put a scenario an adversary would choose in front of the real report,
claim and gate: what tests/support/viewstore.py does for the view, with coverage and validation."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from abtest.capturing import load_fixture, write_fixture
from abtest.core.models import Case, Chunk, Config

JUDGES = ["pairwise", "faithfulness", "coverage", "abstention"]


@dataclass
class Side:
    answer: str = "An answer."
    faith: float | None = 1.0          # None = no_claims
    cov: float | None = 1.0            # None = no coverage row
    abstained: bool = False
    checks: dict | None = None         # name -> passed
    result: dict | None = None         # the faithfulness verdict's result (n_claims, …)
    abstention: dict | None = None     # the abstention judge's row (verdict, result_json, …)


@dataclass
class C:
    id: str
    question: str | None = None        # None: a question of its own ("What about q001?")
    answerable: bool = True
    chunks: list = field(default_factory=lambda: [("c1", "A chunk.")])
    a: Side = field(default_factory=Side)
    b: Side = field(default_factory=Side)
    pairwise: tuple | None = ("tie", "tie")
    key_points: list | None = None


def validation_rows(run_id, judges=("faithfulness", "coverage", "abstention", "pairwise"),
                    n_items=30, reviewers=("r1",), agree=True):
    """n_items review items per judge, half of each label, each labelled by every reviewer
    with the judge's own label (perfect agreement unless agree=False)."""
    labels = {"faithfulness": ("supported", "unsupported"), "coverage": ("covered", "not_covered"),
              "abstention": ("abstained", "answered"), "pairwise": ("A", "B")}
    items, labs = [], []
    for j in judges:
        for i in range(n_items):
            jl = labels[j][i % 2]
            iid = f"{j[0]}-{i}"
            items.append({"run_id": run_id, "item_id": iid, "judge": j, "case_id": f"q{i}",
                          "mapping_json": json.dumps({"sides": {"1": "A", "2": "B"}}),
                          "judge_label": jl})
            for r in reviewers:
                labs.append({"run_id": run_id, "item_id": iid, "judge": j, "case_id": f"q{i}",
                             "label": jl if agree else labels[j][(i + 1) % 2], "reviewer": r})
    return items, labs


def build(root: Path, cases: list[C], *, run_id="r1", config: Config | None = None,
          comparison_kind="prompt", validation=None, generator="gen", judge="judge"):
    from abtest.store import Store

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    fx = root / "fixtures" / run_id
    # distinct questions: cases with one question and one context are repeats, one group
    write_fixture(fx, [Case(id=c.id, question=c.question or f"What about {c.id}?",
                            answerable=c.answerable,
                            category="factual" if c.answerable else "out_of_scope",
                            corpus_version="v1", retriever="test",
                            key_points=c.key_points,
                            context=[Chunk(id=i, text=t) for i, t in c.chunks]) for c in cases],
                  corpus_version="v1", retriever="test")
    cfg = config or Config(judges=JUDGES)
    s = Store(root / "s.duckdb")
    try:
        s.create_run({"run_id": run_id, "status": "complete", "fixture_name": run_id,
                      "fixture_path": str(fx), "n_cases": len(cases),
                      "fixture_sha256": load_fixture(fx).cases_sha256, "corpus_version": "v1",
                      "retriever": "test", "variant_a_name": "a", "variant_a_sha256": "a" * 64,
                      "variant_a_path": "variants/a.yaml", "variant_b_name": "b",
                      "variant_b_sha256": "b" * 64, "variant_b_path": "variants/b.yaml",
                      "generator_model": generator, "judge_model": judge,
                      "comparison_kind": comparison_kind, "config_json": cfg.model_dump_json(),
                      "info_json": json.dumps({"judges": cfg.judges})})
        for c in cases:
            gens, chks = [], []
            for v, sd in (("A", c.a), ("B", c.b)):
                gens.append({"run_id": run_id, "case_id": c.id, "variant": v,
                             "answer": sd.answer, "error": None,
                             "messages_json": json.dumps([{"role": "system",
                                                           "content": f"prompt {v}"}])})
                if sd.checks:
                    chks.append((run_id, c.id, v, [{"name": k, "passed": p, "detail": "",
                                                     "data": {}} for k, p in sd.checks.items()]))
            s.put_generations(gens, chks)
            if c.pairwise and "pairwise" in cfg.judges:
                for order, verdict in zip(("AB", "BA"), c.pairwise):
                    s.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "pairwise",
                                    "subject": order, "verdict": verdict, "rationale": "r"})
            for v, sd in (("A", c.a), ("B", c.b)):
                if "faithfulness" in cfg.judges:
                    s.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "faithfulness",
                                    "subject": v,
                                    "verdict": "scored" if sd.faith is not None else "no_claims",
                                    "score": sd.faith,
                                    **({"result_json": json.dumps(sd.result)} if sd.result
                                       else {})}, claims=[])
                if "abstention" in cfg.judges:
                    s.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "abstention",
                                    "subject": v,
                                    "verdict": "abstained" if sd.abstained else "answered",
                                    "score": 1.0 if sd.abstained else 0.0,
                                    **{k: (sd.abstention or {}).get(k)
                                       for k in ("rationale", "result_json", "prompt_sha256")
                                       if (sd.abstention or {}).get(k) is not None}})
                if "coverage" in cfg.judges and c.answerable and sd.cov is not None:
                    s.put_judgment({"run_id": run_id, "case_id": c.id, "judge": "coverage",
                                    "subject": v, "verdict": "scored", "score": sd.cov})
        items, labs = validation if validation is not None else validation_rows(run_id)
        if items:
            s.put_review_items(items)
        if labs:
            s.put_human_labels(labs)
    finally:
        s.close()
    return root / "s.duckdb"


def report(path: Path, run_id="r1") -> dict:
    from abtest.reporting import build_report
    from abtest.store import Store

    s = Store(path, read_only=True, create=False)
    try:
        r = build_report(s, run_id)
        return json.loads(json.dumps(r.as_dict() if hasattr(r, "as_dict") else r.model_dump(),
                                     default=str))
    finally:
        s.close()
