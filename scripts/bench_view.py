#!/usr/bin/env python3
"""`abtest view` page times in Chromium over a store of R runs × N cases.

Fills a store through the Store API (not timed), serves it with `abtest.view.app.serve`,
and loads the runs page, a run page and a case page in Debian's Chromium through
Playwright: time to first byte and to DOMContentLoaded, as the browser measured them
(Navigation Timing). The runs page is loaded twice: first with no run summary in the store
(as a store from before summaries, or runs whose labels just changed: the claim cells fill
in afterwards, one report build per run), then after every run's summary is kept as
`abtest run` keeps it when a run finishes (not timed). The run page is loaded twice too:
first build of its report, then from the view's memory. The case page is loaded in a fresh
tab and again from the cases page (the browser then also unloads the 1,000-row table).

    python scripts/bench_view.py --runs 200 --cases 1000     # the issue's target store
    python scripts/bench_view.py --runs 20 --cases 1000      # quicker

Targets (issue 24): runs page and run page < 300 ms, case page < 100 ms.

With a running run writing beside it (issue 33, the default; `--no-writer` without): a second
process takes the store for writing, as `abtest run` does, and writes a running run's cases
(both answers, then each judgment, as the runner writes them: one case every 0.5 s by default,
`--writer-every`; bench_overhead.py's provider, 0.2 s a call at concurrency 4, finishes about
two cases a second) while the pages are timed, so every page reads through that process
(`store.readers`). The summaries the runs page reads are
stored by that process too (the file is its own), when the bench asks it to.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path


def fill(tmp: Path, runs: int, n: int) -> Path:
    from abtest.capturing import write_fixture
    from abtest.core.models import Case, Chunk, Config
    from abtest.store import Store

    rng = random.Random(0)
    cases = [Case(id=f"q{i:06d}", question=f"Question {i}?", answerable=i % 5 != 0,
                  corpus_version="bench", retriever="synthetic",
                  context=[Chunk(id=f"c{i}", text=f"Chunk {i} text.")]) for i in range(n)]
    fx = write_fixture(tmp / "fx", cases, corpus_version="bench", retriever="synthetic")
    path = tmp / "s.duckdb"
    s = Store(path)
    now = datetime.now()
    for r in range(runs):
        rid = f"bench-{r:04d}"
        s.create_run({"run_id": rid, "fixture_name": "fx", "fixture_path": str(fx.path),
                      "fixture_sha256": fx.cases_sha256, "n_cases": n, "variant_a_name": "a",
                      "variant_a_sha256": "0" * 64, "variant_b_name": "b",
                      "variant_b_sha256": "1" * 64, "generator_model": "gen",
                      "judge_model": "judge", "comparison_kind": "prompt",
                      "config_json": Config().model_dump_json(), "info_json": "{}",
                      "status": "complete"})
        gens, judg = [], []
        for c in cases:
            for v in ("A", "B"):
                gens.append({"run_id": rid, "case_id": c.id, "variant": v, "answer": f"ans {v}",
                             "context_sha256": "x", "created_at": now,
                             "messages_json": json.dumps([{"role": "user", "content": v}])})
                judg.append({"run_id": rid, "case_id": c.id, "judge": "faithfulness",
                             "subject": v, "sample": 0, "verdict": "scored",
                             "score": rng.random(), "created_at": now})
            for o in ("AB", "BA"):
                judg.append({"run_id": rid, "case_id": c.id, "judge": "pairwise", "subject": o,
                             "sample": 0, "verdict": rng.choice(["A", "B", "tie"]),
                             "score": None, "created_at": now})
        s.bulk_insert("generations", gens)
        s.bulk_insert("judgments", judg)
    s.close()
    return path


def writer(path: Path, every: float) -> None:
    """The process that writes beside the view: a running run, one case at a time; on a line
    'summaries' from stdin it keeps every finished run's summary, on 'stop' it ends the run."""
    import sys

    from abtest.core.models import Config
    from abtest.reporting.summary import refresh_summary
    from abtest.store import Store

    s = Store(path)
    first = s.get_run("bench-0000")
    rid = "bench-live"
    s.create_run({**{k: first[k] for k in ("fixture_name", "fixture_path", "fixture_sha256",
                                           "n_cases", "variant_a_name", "variant_a_sha256",
                                           "variant_b_name", "variant_b_sha256",
                                           "generator_model", "judge_model", "comparison_kind")},
                  "run_id": rid, "config_json": Config().model_dump_json(), "info_json": "{}",
                  "status": "running"})
    stop = threading.Event()

    def write_cases() -> None:
        rng = random.Random(1)
        for i in range(first["n_cases"]):
            if stop.wait(every):
                return
            cid = f"q{i:06d}"
            s.put_generations([{"run_id": rid, "case_id": cid, "variant": v, "answer": f"ans {v}",
                                "context_sha256": "x", "messages_json": json.dumps(
                                    [{"role": "user", "content": v}])} for v in ("A", "B")], [])
            for v in ("A", "B"):
                s.put_judgment({"run_id": rid, "case_id": cid, "judge": "faithfulness",
                                "subject": v, "verdict": "scored", "score": rng.random()})
            for o in ("AB", "BA"):
                s.put_judgment({"run_id": rid, "case_id": cid, "judge": "pairwise", "subject": o,
                                "verdict": rng.choice(["A", "B", "tie"])})

    t = threading.Thread(target=write_cases, daemon=True)
    t.start()
    print("writing", flush=True)
    for line in sys.stdin:
        if line.strip() == "summaries":
            for run in s.list_runs():
                if run["status"] != "running":
                    refresh_summary(s, run["run_id"])
            print("done", flush=True)
        elif line.strip() == "stop":
            break
    stop.set()
    t.join()
    s.close()


def keep_summaries(path: Path) -> None:
    from abtest.reporting.summary import refresh_summary
    from abtest.store import Store

    from abtest.errors import UserError

    for _ in range(100):  # the view may still be answering a summary the page asked for
        try:
            s = Store(path, create=False)
            break
        except UserError:
            time.sleep(0.2)
    try:
        for run in s.list_runs():
            refresh_summary(s, run["run_id"])
    finally:
        s.close()


def timing(page, url: str) -> tuple[float, float]:
    page.goto(url, wait_until="domcontentloaded")
    t = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                      " return [n.responseStart - n.requestStart,"
                      " n.domContentLoadedEventEnd - n.startTime]; }")
    return float(t[0]), float(t[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--no-writer", action="store_true",
                    help="no running run writing beside the view")
    ap.add_argument("--writer-every", type=float, default=0.5,
                    help="seconds between the running run's cases (default 0.5)")
    ap.add_argument("--writer", help=argparse.SUPPRESS)   # the writing process itself
    args = ap.parse_args()
    if args.writer:
        writer(Path(args.writer), args.writer_every)
        return
    from playwright.sync_api import sync_playwright

    from abtest.view.app import serve

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        path = fill(Path(tmp), args.runs, args.cases)
        print(f"store: {args.runs} runs × {args.cases} cases, filled in "
              f"{time.monotonic() - t0:.0f} s (not timed)")
        proc = None
        if not args.no_writer:
            import subprocess
            import sys

            proc = subprocess.Popen([sys.executable, __file__, "--writer", str(path),
                                     "--writer-every", str(args.writer_every)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert proc.stdout.readline().strip() == "writing"
            print(f"a running run writes beside the view (a case every {args.writer_every} s); "
                  "every page reads through its process")
        box, ready = {}, threading.Event()

        def on_ready(url, srv):
            box.update(url=url, srv=srv)
            ready.set()

        threading.Thread(target=serve, args=(path,), kwargs={"on_ready": on_ready},
                         daemon=True).start()
        ready.wait(30)
        url = box["url"]
        import urllib.request

        for warm in ("", "runs/bench-0002/cases/q000000"):  # templates compiled, imports done
            urllib.request.urlopen(url + warm).read()
        rows = []
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            ctx = b.new_context()  # one browser profile: assets cached as a user's would be
            page = ctx.new_page()
            page.goto(url + "runs/no-such-run")  # the browser started, the page's assets cached
            ttfb, dom = timing(page, url)
            rows.append(("runs page, no summary stored (claims fill in after)", ttfb, dom, 300))
            page.goto("about:blank")  # stop the page asking for the missing summaries
            t1 = time.monotonic()
            if proc is not None:
                proc.stdin.write("summaries\n")
                proc.stdin.flush()
                assert proc.stdout.readline().strip() == "done"
            else:
                keep_summaries(path)
            print(f"summaries kept for {args.runs} runs in {time.monotonic() - t1:.0f} s "
                  "(as `abtest run` does at the end of each run; not timed)")
            for label, target, goal in (
                    ("runs page, summaries kept by `abtest run`", url, 300),
                    ("run page, first view (builds its report)", f"{url}runs/bench-0000", 300),
                    ("run page, again", f"{url}runs/bench-0000", 300),
                    ("another run page, first view", f"{url}runs/bench-0001", 300),
                    ("cases page", f"{url}runs/bench-0000/cases", 300),
                    ("case page, from the cases page", f"{url}runs/bench-0000/cases/q000001", 100),
                    ("case page, from another case", f"{url}runs/bench-0000/cases/q000003", 100)):
                ttfb, dom = timing(page, target)
                rows.append((label, ttfb, dom, goal))
            fresh = ctx.new_page()
            ttfb, dom = timing(fresh, f"{url}runs/bench-0000/cases/q000002")
            rows.append(("case page, fresh tab", ttfb, dom, 100))
            b.close()
        box["srv"].should_exit = True
        if proc is not None:
            proc.stdin.write("stop\n")
            proc.stdin.flush()
            proc.wait(timeout=120)
    print(f"{'page':54} {'first byte':>12} {'DOM ready':>12} {'target':>8}  met")
    for label, ttfb, dom, goal in rows:
        print(f"{label:54} {ttfb:10.0f} ms {dom:10.0f} ms {goal:6d} ms  {'yes' if dom < goal else 'no'}")


if __name__ == "__main__":
    main()
