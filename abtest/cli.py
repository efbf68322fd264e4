"""The command line: parse, call the library, format, map errors to exit codes.

Only click is imported at module level so `abtest --help` is instant; each command
imports what it needs when it runs.
"""

from __future__ import annotations

import os
import sys

import click

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 1, 2, 3


def _progress(msg: str) -> None:
    click.echo(f"abtest: {msg}", err=True)


def _config(ctx: click.Context):
    from .config import load_config

    return load_config(ctx.obj.get("config"))


class Main(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as exc:  # mapped to the exit codes of docs/DESIGN.md
            from .errors import IncompleteError, UserError

            if os.environ.get("ABTEST_DEBUG") == "1":
                raise
            if isinstance(exc, UserError):
                click.echo(f"abtest: error: {exc.line()}", err=True)
                ctx.exit(EXIT_BAD_INPUT)
            if isinstance(exc, IncompleteError):
                click.echo(f"abtest: incomplete: {exc}", err=True)
                ctx.exit(EXIT_INCOMPLETE)
            if isinstance(exc, KeyboardInterrupt):
                click.echo("abtest: interrupted; finished work is saved (use --resume)", err=True)
                ctx.exit(130)
            click.echo(f"abtest: internal error: {type(exc).__name__}: {exc} "
                       "(set ABTEST_DEBUG=1 for a traceback)", err=True)
            ctx.exit(EXIT_FAIL)


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="Config file (default: ./abtest.yaml, else built-in defaults).")
@click.version_option(package_name="abtest")
@click.pass_context
def cli(ctx, config):
    """abtest: did this prompt wording change help, given the same retrieved material?

    \b
    capture → run → report → gate → live:
      abtest capture questions.jsonl --retriever local:results/index.duckdb --out fixtures/NAME
      abtest run --fixture fixtures/NAME --a variants/a.yaml --b variants/b.yaml
      abtest report RUN_ID --format md|json|html
      abtest gate RUN_ID
    Exit codes: 0 ok/PASS, 1 gate FAIL, 2 bad input, 3 incomplete.
    """
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


# --------------------------------------------------------------------------- project
@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory):
    """Scaffold abtest.yaml, fixtures/, variants/, results/ in DIRECTORY."""
    from .project import init_project

    for line in init_project(directory):
        click.echo(line)


@cli.command()
@click.argument("directory", default="abtest-demo", type=click.Path(file_okay=False))
@click.option("--n", "n_questions", default=12, show_default=True,
              help="Questions in the demo fixture (half answerable, half not).")
@click.option("--model", default=None, help="Use this litellm model instead of the embedded one.")
@click.option("--live", is_flag=True,
              help="Then start two demo chat servers on loopback and run `abtest live` beside the frozen result.")
@click.option("--all-judges", is_flag=True,
              help="Also the quality, relevance and keyword-quality rubrics (slower).")
def demo(directory, n_questions, model, live, all_judges):
    """Whole loop on the embedded model, no API key: index, capture, run, judge, report."""
    from .demo import run_demo

    code = run_demo(directory, n_questions=n_questions, model=model, live=live,
                    all_judges=all_judges, progress=_progress)
    sys.exit(code)


# --------------------------------------------------------------------------- retrieval
@cli.command()
@click.argument("corpus", type=click.Path(dir_okay=False))
@click.option("--index", "index_path", default=None, help="Index file [results/index.duckdb].")
@click.pass_context
def index(ctx, corpus, index_path):
    """Build the local BM25 index from CORPUS.jsonl ({"id", "text", "title"?, "metadata"?})."""
    from .retrieval.index import build_index

    lc = _config(ctx)
    target = index_path or str(lc.resolve("results/index.duckdb"))
    stats = build_index(corpus, target)
    click.echo(f"indexed {stats.get('n_chunks', stats.get('chunks', '?'))} chunks → {target}")


@cli.command()
@click.argument("index_path", type=click.Path(dir_okay=False))
@click.argument("query")
@click.option("--k", default=10, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def search(index_path, query, k, fmt):
    """Try the local retriever's boolean grammar: AND, OR, NOT, parentheses."""
    import json

    from .retrieval.index import search as do_search

    hits = do_search(index_path, query, k)
    for h in hits:
        row = h if isinstance(h, dict) else {"id": h[0], "score": h[1], "title": h[2], "snippet": h[3]}
        if fmt == "json":
            click.echo(json.dumps(row, ensure_ascii=False))
        else:
            click.echo(f"{row['score']:8.3f}  {row['id']}  {(row.get('snippet') or '')[:100]}")
    if not hits and fmt == "text":
        click.echo("no matches", err=True)


@cli.command()
@click.argument("questions", type=click.Path(dir_okay=False))
@click.option("--retriever", "spec", required=True,
              help="local:INDEX | http(s)://URL | python:pkg.mod:fn | jsonl:FILE")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="fixtures/NAME")
@click.option("--corpus-version", default=None, help="Version label of the corpus [date of today].")
@click.option("--k", default=5, show_default=True)
@click.option("--refresh-every-days", default=30, show_default=True)
@click.option("--force", is_flag=True, help="Replace an existing fixture.")
@click.option("--keywords-llm", is_flag=True,
              help="Local retriever: let the judge model extract search keywords.")
@click.option("--max-chars", type=click.IntRange(min=1), default=None,
              help="Truncate each captured chunk to this many characters.")
@click.pass_context
def capture(ctx, questions, spec, out, corpus_version, k, refresh_every_days, force, keywords_llm,
            max_chars):
    """Freeze what retrieval returns for QUESTIONS into a sealed fixture (never during a run)."""
    from datetime import date
    from pathlib import Path

    from .errors import UserError
    from .fixtures import capture as do_capture
    from .fixtures import load_questions
    from .retrieval import get_retriever

    lc = _config(ctx)
    if Path(out).exists() and not force:
        raise UserError("fixture already exists; pass --force to replace it deliberately", file=out)
    qs = load_questions(Path(questions))
    opts = {}
    if keywords_llm:
        from .keywords import llm_keywords_fn

        opts["keywords_fn"] = llm_keywords_fn(lc)
    if spec.startswith("local:"):
        from . import llm

        cfg = lc.config
        if cfg.embedding is not None:
            opts["embed_fn"] = lambda texts, s=cfg.embedding: llm.embed(s, texts, cfg.timeout_s)
            opts["embed_label"] = cfg.embedding.model
        if cfg.reranker is not None:
            opts["rerank_fn"] = lambda q, docs, s=cfg.reranker: llm.rerank(s, q, docs, cfg.timeout_s)
            opts["rerank_label"] = cfg.reranker.model
    if max_chars:
        opts["max_chars"] = max_chars
    retriever = get_retriever(spec, base_dir=Path.cwd(), k=k, **opts)
    fx = do_capture(qs, retriever, out=out, corpus_version=corpus_version or date.today().isoformat(),
                    k=k, force=force, refresh_every_days=refresh_every_days, progress=_progress)
    click.echo(f"captured {len(fx.cases)} cases → {fx.path} (cases_sha256 {fx.cases_sha256[:16]}…)")


# --------------------------------------------------------------------------- fixtures
@cli.group()
def fixtures():
    """Fixture integrity, staleness and coverage, churn between captures."""


@fixtures.command("verify")
@click.argument("path", type=click.Path())
def fixtures_verify(path):
    """Recompute the sha256 seal; any edited byte exits 2 naming the case."""
    from .fixtures import load_fixture

    fx = load_fixture(path)
    click.echo(f"ok: {fx.path}: {len(fx.cases)} cases, cases_sha256 {fx.cases_sha256}")


@fixtures.command("seal")
@click.argument("path", type=click.Path())
@click.option("--refresh-every-days", default=30, show_default=True)
def fixtures_seal(path, refresh_every_days):
    """Seal a hand-written cases.jsonl (canonicalise, write manifest.json)."""
    from .fixtures import seal_fixture

    fx = seal_fixture(path, refresh_every_days=refresh_every_days)
    click.echo(f"sealed {len(fx.cases)} cases → {fx.path}/manifest.json")


@fixtures.command("status")
@click.argument("path", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def fixtures_status(path, fmt):
    """Age vs refresh schedule; coverage of categories and awkward cases (warnings, exit 0)."""
    import json

    from .fixtures import fixture_status, load_fixture

    st = fixture_status(load_fixture(path))
    if fmt == "json":
        click.echo(json.dumps(st, indent=2))
        return
    from tabulate import tabulate

    click.echo(f"{st['name']}: {st['n_cases']} cases ({st['answerable']} answerable, "
               f"{st['unanswerable']} unanswerable), captured {st['captured_at']} "
               f"({st['age_days']} days ago), next refresh {st['next_refresh']}")
    rows = [[k, v["n"], f"{v['share']:.0%}", f"{v['target_share']:.0%}" if v["target_share"] else "—"]
            for k, v in st["categories"].items()]
    click.echo(tabulate(rows, headers=["category", "n", "share", "target"]))
    click.echo("awkward cases: " + ", ".join(f"{k} {v}" for k, v in st["awkward_tags"].items()))
    for w in st["warnings"]:
        click.echo(f"warning: {w}", err=True)


@fixtures.command("diff")
@click.argument("old", type=click.Path())
@click.argument("new", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def fixtures_diff(old, new, fmt):
    """Churn between two captures: cases added/removed, chunks added/removed/changed."""
    import json

    from .fixtures import fixture_diff, load_fixture

    d = fixture_diff(load_fixture(old), load_fixture(new))
    if fmt == "json":
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(f"cases added {len(d['added'])}, removed {len(d['removed'])}; context changed in "
               f"{len(d['changed'])}/{d['n_common']} common cases ({d['context_changed_share']:.0%})")
    for c in d["changed"]:
        parts = [f"+{len(c['chunks_added'])}", f"-{len(c['chunks_removed'])}",
                 f"~{len(c['text_changed'])} text"]
        if c["order_changed"]:
            parts.append("order")
        click.echo(f"  {c['id']}: {' '.join(parts)}")


@fixtures.command("show")
@click.argument("path", type=click.Path())
@click.option("--case", "case_id", default=None)
def fixtures_show(path, case_id):
    """Print the manifest, or one case."""
    import json

    from .errors import UserError
    from .fixtures import load_fixture

    fx = load_fixture(path)
    if case_id is None:
        click.echo(json.dumps(fx.manifest.model_dump(mode="json", exclude={"cases"}), indent=2))
        for c in fx.cases:
            click.echo(f"{c.id}\t{'answerable' if c.answerable else 'unanswerable'}\t"
                       f"{len(c.context)} chunks\t{c.question[:80]}")
        return
    case = fx.by_id().get(case_id)
    if case is None:
        raise UserError(f"no case {case_id!r}", file=str(path))
    click.echo(json.dumps(case.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False))


@fixtures.command("add-unanswerable")
@click.argument("path", type=click.Path())
@click.option("--from-answerable", "n", type=int, required=True,
              help="How many answerable cases to turn into counterfactual refusal cases.")
@click.option("--seed", default=0, show_default=True)
def fixtures_add_unanswerable(path, n, seed):
    """Counterfactual refusal cases: drop the relevant chunks of N answerable cases."""
    from .fixtures import add_unanswerable, load_fixture

    fx = add_unanswerable(load_fixture(path), n=n, seed=seed)
    click.echo(f"{fx.path}: now {len(fx.cases)} cases (resealed)")


# --------------------------------------------------------------------------- run & report
@cli.command("run")
@click.option("--fixture", required=True, type=click.Path())
@click.option("--a", "a_path", required=True, type=click.Path(dir_okay=False))
@click.option("--b", "b_path", default=None, type=click.Path(dir_okay=False))
@click.option("--models", default=None,
              help="Model comparison: run variant A with each of m1,m2,… and print a leaderboard.")
@click.option("--run-id", default=None)
@click.option("--resume", is_flag=True, help="Continue an interrupted run; finished calls are not repeated.")
@click.option("--retry-errors", is_flag=True,
              help="With --resume: re-attempt the calls that ended in error (never the finished ones).")
@click.option("--dry-run", is_flag=True, help="Print calls, tokens and cost before spending anything.")
@click.option("--judge-repeats", type=click.IntRange(0, 10), default=None,
              help="Re-ask the pairwise judge K times on a seeded sample (test-retest noise).")
@click.option("--allow-self-judge", is_flag=True,
              help="Silence the self-judging error (demos); the claim is still withheld.")
@click.pass_context
def run_cmd(ctx, fixture, a_path, b_path, models, run_id, resume, retry_errors, dry_run,
            judge_repeats, allow_self_judge):
    """Generate A and B over the fixture's frozen contexts, check, judge; print the run id."""
    import json

    from .runner import dry_run as do_dry
    from .runner import plan_run, run

    lc = _config(ctx)
    updates = {}
    if judge_repeats is not None:
        updates["judge_repeats"] = judge_repeats
    if allow_self_judge:
        updates["allow_self_judge"] = True
    if updates:
        lc.config = lc.config.model_copy(update=updates)
    if models:
        from .leaderboard import run_models

        board = run_models(lc, fixture, a_path, models.split(","), progress=_progress)
        from tabulate import tabulate

        cols = ["model", "faithfulness", "coverage", "refusal_answerable", "refusal_unanswerable",
                "pairwise_vs_baseline", "run_id", "status"]
        click.echo(tabulate([[r.get(c) for c in cols] for r in board["rows"]], headers=cols,
                            floatfmt=".3f"))
        click.echo(f"cases that flip between models: {len(board['flipped'])}")
        for f in board["flipped"][:20]:
            click.echo(f"  {f['case_id']}: faithful with {', '.join(f['faithful'])}; not with "
                       f"{', '.join(f['not_faithful'])}")
        sys.exit(EXIT_INCOMPLETE if any(r["status"] != "complete" for r in board["rows"]) else 0)
    if b_path is None:
        from .errors import UserError

        raise UserError("--b is required (or --models m1,m2 for a model comparison)", field="--b")
    if dry_run:
        click.echo(json.dumps(do_dry(lc, plan_run(lc, fixture, a_path, b_path)), indent=2))
        return
    gen_models = {lc.config.generator.model}
    if lc.config.judge.model in gen_models and not lc.config.allow_self_judge:
        _progress(f"error: the judge model is the generator model ({lc.config.judge.model}): "
                  "self-judging; the run continues but the claim will be withheld "
                  "(--allow-self-judge or allow_self_judge: true silences this)")
    if retry_errors and not resume:
        from .errors import UserError

        raise UserError("--retry-errors goes with --resume", field="--retry-errors")
    res = run(lc, fixture, a_path, b_path, run_id=run_id, resume=resume, retry_errors=retry_errors,
              progress=_progress)
    _progress(f"{res.status}: {res.n_cases} cases, {res.provider_calls} provider calls, "
              f"{res.cache_hits} cache hits, {res.calls_per_case} LLM calls per case, "
              f"{res.seconds:.1f} s")
    if res.comparison_kind == "pipeline_change":
        _progress("this is a pipeline change, re-measure end to end; the frozen claim does not apply")
    click.echo(res.run_id)
    if res.status != "complete":
        _progress(f"incomplete: unfinished cases: {', '.join(res.unfinished[:20])}"
                  f"{' …' if len(res.unfinished) > 20 else ''} (fix the cause, then "
                  f"`abtest run … --run-id {res.run_id} --resume --retry-errors`)")
        sys.exit(EXIT_INCOMPLETE)


def _open_store(ctx, read_only=True):
    from .store import Store

    lc = _config(ctx)
    return lc, Store(lc.store_path, read_only=read_only, create=False)


def _report_for(ctx, run_id):
    from .report import build_report
    from .report.build import check_fixture_unchanged, load_run

    lc, store = _open_store(ctx)
    try:
        if run_id in ("latest", "last"):
            run_id = store.latest_run_id() or run_id
        run = load_run(store, run_id)
        if run["kind"] == "live":
            from .report.live import build_live_report

            return build_live_report(store, run_id)
        check_fixture_unchanged(run)
        return build_report(store, run_id)
    finally:
        store.close()


@cli.command()
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True)
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.pass_context
def report(ctx, run_id, fmt, out):
    """Paired statistics, the licensed claim (or why not), incidents, backlog. RUN_ID may be 'latest'."""
    from pathlib import Path

    from .report import render

    rep = _report_for(ctx, run_id)
    if rep.get("kind") == "live":
        from .report.live import render_live

        text = render_live(rep, fmt)
    else:
        text = render(rep, fmt)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
        _progress(f"wrote {out}")
    else:
        click.echo(text, nl=False)


@cli.command()
@click.argument("run_id")
@click.option("--thresholds", type=click.Path(dir_okay=False), default=None,
              help="YAML file of gate thresholds (keys of `gates:` in abtest.yaml).")
@click.pass_context
def gate(ctx, run_id, thresholds):
    """Release gate: exit 0 PASS, 1 FAIL, 3 INCOMPLETE."""
    from pathlib import Path

    from .gate import evaluate_gate

    rep = _report_for(ctx, run_id)
    gates = _config(ctx).config.gates
    if thresholds:
        from pydantic import ValidationError

        from .config import read_yaml
        from .errors import UserError, pydantic_error_line
        from .models import Gates

        data = read_yaml(Path(thresholds)) or {}
        if not isinstance(data, dict):
            raise UserError("expected a mapping of gate thresholds", file=thresholds)
        data = data.get("gates", data)
        try:
            gates = Gates.model_validate({**gates.model_dump(), **data})
        except ValidationError as exc:
            raise pydantic_error_line(exc, file=thresholds) from None
    g = evaluate_gate(rep, gates)
    for r in g["rules"]:
        val = "n/a" if r["value"] is None else f"{r['value']:.3f}"
        click.echo(f"{r['status']:>14}  {r['name']:<18} {val:>8}  (threshold {r['threshold']})"
                   + (f"  {r['note']}" if r.get("note") else ""))
    if g["incidents_b"]:
        click.echo(f"{'fail':>14}  hallucination incidents in B: {g['incidents_b']}")
    click.echo(f"{g['decision']}" + (f": {'; '.join(g['reasons'])}" if g["reasons"] else ""))
    sys.exit(g["exit_code"])


@cli.command()
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True)
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.pass_context
def export(ctx, run_id, fmt, out):
    """Write every table of one run for notebooks and BI tools."""
    from pathlib import Path

    from .report.build import load_run

    lc, store = _open_store(ctx)
    try:
        load_run(store, run_id)
        for p in store.export_run(run_id, Path(out), fmt):
            click.echo(str(p))
    finally:
        store.close()


@cli.command()
@click.argument("variant", type=click.Path(dir_okay=False))
@click.option("--fixture", required=True, type=click.Path())
@click.option("--case", "case_id", default=None, help="Case to render [first case].")
@click.option("--update", is_flag=True, help="Rewrite the stored snapshot.")
@click.pass_context
def snapshot(ctx, variant, fixture, case_id, update):
    """Compare the exact rendered messages with variants/__snapshots__/ (diff → exit 1)."""
    from .snapshots import snapshot as do_snapshot

    code, text = do_snapshot(_config(ctx), variant, fixture, case_id=case_id, update=update)
    click.echo(text, nl=not text.endswith("\n"))
    sys.exit(code)


@cli.command("judge-check")
@click.argument("judge", type=click.Choice(["pairwise", "faithfulness"]))
@click.option("--data", required=True, type=click.Path(dir_okay=False),
              help="LLMBar-format (pairwise) or FaithBench-format (faithfulness) JSONL.")
@click.option("--limit", type=int, default=None, help="Only the first N rows.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def judge_check(ctx, judge, data, limit, fmt):
    """Validate the configured judge against a human-labelled set: accuracy, consistency, kappa."""
    import json

    from . import judgecheck

    fn = judgecheck.check_pairwise if judge == "pairwise" else judgecheck.check_faithfulness
    res = fn(_config(ctx), data, limit=limit, progress=_progress)
    if fmt == "json":
        click.echo(json.dumps(res, indent=2))
        return
    for k, v in res.items():
        click.echo(f"{k:>24}: {v:.3f}" if isinstance(v, float) else f"{k:>24}: {v}")


# --------------------------------------------------------------------------- human review
@cli.group()
def review():
    """Blind human labels for judge validation: export a pack, import labels, status."""


def _resolve_run(store, run_id):
    if run_id in ("latest", "last"):
        return store.latest_run_id() or run_id
    return run_id


@review.command("export")
@click.argument("run_id")
@click.option("--n", default=40, show_default=True,
              help="Items per judge (pairwise, claims, coverage points, abstention), "
                   "stratified by the judge's verdict; plus up to N pairwise disagreements.")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Pack folder [results/review/RUN_ID].")
@click.pass_context
def review_export(ctx, run_id, n, seed, out):
    """Write a blind review pack (items.jsonl, labels.csv, review.html)."""
    from pathlib import Path

    from . import review as rv
    from .report.build import load_run

    lc, store = _open_store(ctx, read_only=False)
    try:
        run_id = _resolve_run(store, run_id)
        load_run(store, run_id)
        target = Path(out) if out else lc.store_path.parent / "review" / run_id
        res = rv.export_pack(store, run_id, target, n=n, seed=seed)
    finally:
        store.close()
    for p in res["paths"]:
        click.echo(str(p))
    c = res["counts"]
    _progress(f"{res['n_items']} items to label (pairwise {c['pairwise_flagged']} disagreements "
              f"+ {c['pairwise_sampled']}, claims {c['claims']}, coverage points "
              f"{c['coverage_points']}, abstention {c['abstention_answers']}); each judge is "
              f"validated on its own items. Then: abtest review import {run_id} FILE")


@review.command("import")
@click.argument("run_id")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--reviewer", default=None, help="Reviewer name [from the file, else the OS user].")
@click.pass_context
def review_import(ctx, run_id, file, reviewer):
    """Validate and store labels (all or nothing)."""
    from . import review as rv

    lc, store = _open_store(ctx, read_only=False)
    try:
        run_id = _resolve_run(store, run_id)
        n = rv.import_labels(store, run_id, file, reviewer=reviewer)
    finally:
        store.close()
    click.echo(f"imported {n} label(s)")


@review.command("status")
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def review_status(ctx, run_id, fmt):
    """Labels so far, agreement (kappa) per judge, and how many more the validation rule needs."""
    import json

    from . import review as rv

    lc, store = _open_store(ctx)
    try:
        run_id = _resolve_run(store, run_id)
        st = rv.status(store, run_id)
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps(st, default=str, indent=2))
    else:
        click.echo(rv.render_status(st), nl=False)


from .cli_live import live as _live_cmd  # noqa: E402  (click only)
from .cli_live import serve_demo as _serve_demo_cmd  # noqa: E402
from .cli_loop import compare, golden, history, suggest  # noqa: E402

for _cmd in (golden, suggest, history, compare, _live_cmd, _serve_demo_cmd):
    cli.add_command(_cmd)


def main() -> None:
    cli(prog_name="abtest")


if __name__ == "__main__":  # pragma: no cover
    main()
