"""`abtest demo DIR`: the whole loop on the embedded model, no API key.

Leaves a normal working project in DIR (abtest.yaml, fixtures/, variants/,
results/) so every other command can be tried there afterwards.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from abtest.project import DEMO_DATA, init_project
from abtest.core.records import read_jsonl
from abtest.core.config import load_config
from abtest.capturing import capture, load_questions
from abtest.core.records import write_jsonl
from abtest.llm import preload
from abtest.reporting import render
from abtest.reporting.model import Report
from abtest.reporting.summary import report_and_summary
from abtest.retrieval import get_retriever
from abtest.retrieval.index import build_index
from abtest.running.runner import run
from abtest.llm import check_credentials
from abtest.core.fmt import num, pct
from abtest.livecheck.demo_server import DemoChatServer
from abtest.errors import IncompleteRunError
from abtest.livecheck import run_live
from abtest.reporting.live import render_live
from abtest.reporting.model import LiveReport

DEMO_CONFIG = """\
# abtest demo configuration: the embedded SmolLM2-135M model generates AND judges.
# A 135M model judging itself demonstrates the machinery; its verdicts are not evidence.
# Point generator/judge at any litellm model (and set allow_self_judge: false) for real use.
generator: {model: %(model)s, temperature: 0, max_tokens: 48}
judge:     {model: %(model)s, temperature: 0, max_tokens: 400}
concurrency: 2
timeout_s: 120
max_retries: 2
max_input_tokens: 2048
context_template: "[{{ chunk.id }}] {{ chunk.text }}"
store: results/abtest.duckdb
judges: [pairwise, faithfulness, coverage, abstention]
max_claims: 3
allow_self_judge: true
"""


def pick_questions(n: int) -> list[dict]:
    """Half answerable, half unanswerable, spread over the article (deterministic)."""

    rows = [row for _, row in read_jsonl(DEMO_DATA / "questions.jsonl")]
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    n_una = n // 2
    n_ans = n - n_una

    def spread(pool, k):
        if k <= 0:
            return []
        step = max(1, len(pool) // k)
        return pool[::step][:k]

    picked = spread(ans, n_ans) + spread(una, n_una)
    out = []
    for r in picked:
        q = {"id": r["id"], "question": r["question"], "answerable": r["answerable"],
             "category": "factual" if r["answerable"] else "out_of_scope",
             "relevant_chunk_ids": r.get("relevant_chunk_ids") or []}
        if r["answerable"]:
            q["reference_answer"] = r["reference_answer"]
            q["expected_citations"] = r.get("relevant_chunk_ids") or []
        out.append(q)
    return out


def run_demo(directory: str | os.PathLike, *, n_questions: int = 12, model: str | None = None,
             k: int = 2, live: bool = False, all_judges: bool = False, progress=print) -> int:

    t0 = time.monotonic()
    preload()
    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    cfg_path = d / "abtest.yaml"
    if not cfg_path.exists():
        text = DEMO_CONFIG % {"model": model or "local/smollm2"}
        if all_judges:
            text = text.replace("judges: [pairwise, faithfulness, coverage, abstention]",
                                "judges: [pairwise, faithfulness, coverage, abstention, quality, "
                                "relevance, keywords]")
        cfg_path.write_text(text, encoding="utf-8")
    init_project(d)
    data = d / "data"
    data.mkdir(exist_ok=True)
    for name in ("corpus.jsonl", "SOURCE.md", "LICENSE.md"):
        shutil.copyfile(DEMO_DATA / name, data / name)
    shutil.copyfile(DEMO_DATA / "plain.yaml", d / "variants" / "plain.yaml")
    shutil.copyfile(DEMO_DATA / "grounded.yaml", d / "variants" / "grounded.yaml")
    qpath = data / "questions.jsonl"
    write_jsonl(qpath, pick_questions(n_questions))
    lc = load_config(cfg_path)

    for where, spec in (("generator", lc.config.generator), ("judge", lc.config.judge)):
        check_credentials(spec, where=where)  # before indexing: nothing runs without them

    index_path = d / "results" / "index.duckdb"
    if not index_path.exists():
        progress(f"indexing {data / 'corpus.jsonl'} (SQuAD 2.0 'Normans', CC BY-SA 4.0)")
        build_index(data / "corpus.jsonl", index_path)
    fixture = d / "fixtures" / "normans"
    progress(f"capturing {n_questions} questions with the local BM25 retriever (k={k})")
    retriever = get_retriever("local:results/index.duckdb", base_dir=d, k=k)  # no machine path
    capture(load_questions(qpath), retriever, out=fixture, corpus_version="squad2-dev-normans",
            k=k, force=True, progress=progress)
    progress("running A = plain vs B = grounded on the embedded model (generate, check, judge)")
    res = run(lc, fixture, d / "variants" / "plain.yaml", d / "variants" / "grounded.yaml",
              progress=progress)
    report = report_and_summary(lc.store_path, res.run_id)  # and kept for `abtest view`
    assert isinstance(report, Report)
    out_md = d / "results" / f"report-{res.run_id}.md"
    out_json = d / "results" / f"report-{res.run_id}.json"
    out_md.write_text(render(report, "md"), encoding="utf-8")
    out_json.write_text(render(report, "json"), encoding="utf-8")
    paths = [out_md, out_json]
    try:
        out_html = d / "results" / f"report-{res.run_id}.html"
        out_html.write_text(render(report, "html"), encoding="utf-8")
        paths.append(out_html)
    except ImportError:
        pass

    rep = report.as_dict()
    pw = rep["metrics"].get("pairwise") or {}
    f = rep["metrics"].get("faithfulness") or {}
    print(f"run id: {res.run_id} ({rep['status']}, {rep['n_cases']} cases, "
          f"{time.monotonic() - t0:.0f} s)")
    for p in paths:
        print(f"report: {p}")
    if pw:
        print(f"pairwise: B wins {pw['b_wins']}, A wins {pw['a_wins']}, no preference "
              f"{pw['no_preference']}; sign test p = {pw['p_value']:.3f}")
    if f.get("difference") is not None:
        print(f"faithfulness: A {f['a']:.2f}, B {f['b']:.2f}, B − A {f['difference']:+.2f} "
              f"({pct(f.get('conf_level') or 0.95)} CI "
              f"{num(f['ci_low'], 2)} to {num(f['ci_high'], 2)})")
    print("claim: " + (rep["claim"]["sentence"] if rep["claim"]["licensed"]
                       else "not licensed — " + rep["claim"]["reasons"][0]))
    code = 0 if rep["status"] == "complete" else 3
    if live:
        code = max(code, _live_demo(lc, d, qpath, index_path, res.run_id, model, k, progress))
    print(f"note: the embedded 135M model generated and judged; this demonstrates the machinery, "
          f"it is not evidence. Try: cd {d} && abtest report {res.run_id}")
    return code


def _live_demo(lc, d: Path, qpath: Path, index_path: Path, frozen_run: str, model: str | None,
               k: int, progress) -> int:
    """Two demo chat servers on loopback (plain, grounded) and a live run beside the frozen one."""

    gen = lc.config.generator
    progress("live: starting two demo chat servers on 127.0.0.1 (plain, grounded)")
    with DemoChatServer(index_path, d / "variants" / "plain.yaml", model=model or gen.model, k=k,
                        max_tokens=gen.max_tokens) as sa, \
            DemoChatServer(index_path, d / "variants" / "grounded.yaml", model=model or gen.model, k=k,
                           max_tokens=gen.max_tokens) as sb:
        try:
            lr = run_live(lc, qpath, sa.url, sb.url, frozen_run=frozen_run, a_name="plain",
                          b_name="grounded", retriever_label=f"bm25@k={k} local:results/index.duckdb",
                          corpus_version="squad2-dev-normans", progress=progress)
            run_id, code = lr.run_id, 0 if lr.status == "complete" else 3
        except IncompleteRunError as exc:
            progress(f"live: incomplete: {exc}")
            return 3
    report = report_and_summary(lc.store_path, run_id)
    assert isinstance(report, LiveReport)
    out = d / "results" / f"live-{run_id}.md"
    out.write_text(render_live(report, "md"), encoding="utf-8")
    (d / "results" / f"live-{run_id}.json").write_text(render_live(report, "json"), encoding="utf-8")
    rep = report.as_dict()
    claims = rep.get("claims") or {}
    print(f"live run id: {run_id} ({rep['status']}); report: {out}")
    for key in ("frozen", "live"):
        c = claims.get(key) or {}
        print(f"{key} claim: {c.get('statement') or c.get('sentence') or 'n/a'}")
    return code
