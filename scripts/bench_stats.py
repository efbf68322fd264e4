#!/usr/bin/env python3
"""Statistics and all three reports (md, json, html) for N synthetic cases; target < 2 s at 10,000.

The store is filled through the Store API first (not timed); then build_report + the
three renderings are timed together.

    python scripts/bench_stats.py --n 10000
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import datetime
from pathlib import Path

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of the timed part to FILE")
    args = ap.parse_args()
    from abtest.capturing import write_fixture
    from abtest.core.models import Case, Chunk, Config
    from abtest.reporting import build_report, render
    from abtest.store import Store

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        cases = [Case(id=f"q{i:06d}", question=f"Question {i}?", answerable=i % 5 != 0,
                      corpus_version="bench", retriever="synthetic",
                      context=[Chunk(id=f"c{i}", text=f"Chunk {i} text.")]) for i in range(args.n)]
        fx = write_fixture(Path(tmp) / "fx", cases, corpus_version="bench", retriever="synthetic")
        s = Store(Path(tmp) / "s.duckdb")
        s.create_run({"run_id": "bench", "fixture_name": "fx", "fixture_path": str(fx.path),
                      "fixture_sha256": fx.cases_sha256, "n_cases": args.n, "variant_a_name": "a",
                      "variant_a_sha256": "0" * 64, "variant_b_name": "b", "variant_b_sha256": "1" * 64,
                      "generator_model": "gen", "judge_model": "judge", "comparison_kind": "prompt",
                      "config_json": Config().model_dump_json(), "info_json": "{}", "status": "complete"})
        now = datetime.now()
        gens, judg, checks = [], [], []
        for c in cases:
            for v in ("A", "B"):
                gens.append({"run_id": "bench", "case_id": c.id, "variant": v, "answer": f"ans {v}",
                             "context_sha256": "x", "created_at": now,
                             "messages_json": json.dumps([{"role": "user", "content": v}])})
                fa = rng.random() if v == "A" else min(1.0, rng.random() + 0.05)
                judg.append({"run_id": "bench", "case_id": c.id, "judge": "faithfulness", "subject": v,
                             "sample": 0, "verdict": "scored", "score": fa, "created_at": now})
                judg.append({"run_id": "bench", "case_id": c.id, "judge": "abstention", "subject": v,
                             "sample": 0, "verdict": "abstained" if rng.random() < 0.2 else "answered",
                             "score": None, "created_at": now})
                checks.append({"run_id": "bench", "case_id": c.id, "variant": v, "name": "length",
                               "passed": rng.random() < 0.9, "detail": "", "data_json": "{}"})
            for o in ("AB", "BA"):
                judg.append({"run_id": "bench", "case_id": c.id, "judge": "pairwise", "subject": o,
                             "sample": 0, "verdict": rng.choice(["A", "B", "B", "tie"]), "score": None,
                             "created_at": now})
        s.bulk_insert("generations", gens)
        s.bulk_insert("judgments", judg)
        s.bulk_insert("checks", checks)
        s.close()
        setup = time.monotonic() - t0
        s = Store(Path(tmp) / "s.duckdb", read_only=True)
        t_imp = time.monotonic()
        import abtest.stats  # noqa: F401  (scipy/statsmodels: a one-time import per process)
        from statsmodels.discrete.discrete_model import Logit  # noqa: F401
        imports = time.monotonic() - t_imp
        prof = None
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0 = time.monotonic()
        rep = build_report(s, "bench")
        t1 = time.monotonic()
        sizes, took = {}, {}
        for fmt in ("md", "json", "html"):
            tf = time.monotonic()
            sizes[fmt] = len(render(rep, fmt))
            took[fmt] = time.monotonic() - tf
        t2 = time.monotonic()
        if prof:
            prof.disable()
            prof.dump_stats(args.profile)
        s.close()
        print(f"{args.n} cases (store filled in {setup:.1f} s, not timed; scipy/statsmodels imports "
              f"{imports:.2f} s, once per process, not counted)")
        print(f"statistics + report dict: {t1 - t0:.2f} s; rendering: {t2 - t1:.2f} s ("
              + ", ".join(f"{f} {took[f]:.2f} s, {sizes[f] / 1e6:.1f} MB" for f in took)
              + f"); total {t2 - t0:.2f} s (target < 2 s)")
