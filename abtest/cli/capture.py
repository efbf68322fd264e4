"""Capture and its local retriever: `abtest index`, `abtest search`, `abtest capture`."""

from __future__ import annotations


import click

from abtest.cli.common import load, progress


# --------------------------------------------------------------------------- retrieval
@click.command()
@click.argument("corpus", type=click.Path(dir_okay=False))
@click.option("--index", "index_path", default=None, help="Index file [results/index.duckdb].")
@click.pass_context
def index(ctx, corpus, index_path):
    """Build the local BM25 index from CORPUS.jsonl ({"id", "text", "title"?, "metadata"?})."""
    import time

    from abtest.retrieval.index import build_index

    lc = load(ctx)
    target = index_path or str(lc.resolve("results/index.duckdb"))
    t0 = time.monotonic()
    st = build_index(corpus, target)
    click.echo(f"indexed {st['n_docs']} chunks ({st['n_terms']} terms, {st['n_postings']} "
               f"postings) in {time.monotonic() - t0:.1f} s → {target}")
    if st["format"] != "abtest":
        left = st["not_imported"]
        click.echo(f"abtest: {corpus}: read as {st['format']}"
                   + ("; not kept (an index has no place for them): "
                      + ", ".join(f"{k} ({n})" for k, n in sorted(left.items())) if left
                      else ""), err=True)


@click.command()
@click.argument("index_path", type=click.Path(dir_okay=False))
@click.argument("query")
@click.option("--k", default=10, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def search(index_path, query, k, fmt):
    """Try the local retriever's boolean grammar: AND, OR, NOT, parentheses."""
    import json

    from abtest.retrieval.index import search as do_search

    hits = do_search(index_path, query, k)
    for h in hits:
        row = h if isinstance(h, dict) else {"id": h[0], "score": h[1], "title": h[2], "snippet": h[3]}
        if fmt == "json":
            click.echo(json.dumps(row, ensure_ascii=False))
        else:
            click.echo(f"{row['score']:8.3f}  {row['id']}  {(row.get('snippet') or '')[:100]}")
    if not hits and fmt == "text":
        click.echo("no matches", err=True)


@click.command()
@click.argument("questions", type=click.Path(dir_okay=False), required=False)
@click.option("--from-traces", "traces", type=click.Path(dir_okay=False), default=None,
              help="Freeze what a trace export recorded instead of asking a retriever: "
                   "OTLP JSON (OpenInference), Phoenix spans, or Langfuse traces.")
@click.option("--trace-format", type=click.Choice(["auto", "otlp", "phoenix", "langfuse"]),
              default="auto", show_default=True, help="With --from-traces.")
@click.option("--retriever", "spec", default=None,
              help="local:INDEX | http(s)://URL | python:pkg.mod:fn | jsonl:FILE (a capture "
                   "file, or an eval set's own contexts: jsonl:QUESTIONS) "
                   "[retriever.spec in abtest.yaml].")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="fixtures/NAME")
@click.option("--corpus-version", default=None,
              help="Version label of the corpus, for cases whose source gives none [today's date].")
@click.option("--k", type=click.IntRange(min=1), default=None, help="Chunks per question [retriever.k, else 5].")
@click.option("--question-var", default=None, metavar="NAME",
              help="promptfoo tests: the var that holds the question [question, query, "
                   "user_input, input, prompt, or the one text var].")
@click.option("--answer-is", type=click.Choice(["reference", "response"]), default=None,
              help="A file's `answer` column: the expected answer or the app's own "
                   "[beside a reference: the app's; alone: the expected one; said either way].")
@click.option("--refresh-every-days", default=30, show_default=True)
@click.option("--force", is_flag=True, help="Replace an existing fixture.")
@click.option("--keywords-llm", is_flag=True,
              help="Local retriever: let the judge model extract search keywords.")
@click.option("--max-chars", type=click.IntRange(min=1), default=None,
              help="Truncate each captured chunk to this many characters.")
@click.option("--chunks-path", default=None, help="HTTP: where the chunk list is in the answer (dotted) [chunks].")
@click.option("--id-field", default=None, help="HTTP: chunk id field (dotted) [id].")
@click.option("--text-field", default=None, help="HTTP: chunk text field (dotted) [text].")
@click.option("--score-field", default=None, help="HTTP: chunk score field (dotted) [score].")
@click.option("--body-template", default=None,
              help='HTTP: request body as JSON, or @FILE ["{\"query\": \"{query}\", \"k\": \"{k}\"}"].')
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="HTTP: a request header; the value may name $ENV_VARS, read at request time "
                   "and never stored. Repeatable.")
@click.option("--auth-env", default=None, help="HTTP: environment variable holding a bearer token.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="HTTP: seconds per request [30].")
@click.option("--retries", type=click.IntRange(min=0, max=20), default=None,
              help="HTTP: retries on 429/5xx/timeouts [2].")
@click.pass_context
def capture(ctx, questions, traces, trace_format, spec, out, corpus_version, k, question_var,
            answer_is, refresh_every_days, force, keywords_llm, max_chars, chunks_path, id_field, text_field,
            score_field, body_template, headers, auth_env, timeout_s, retries):
    """Freeze what retrieval returns for QUESTIONS (or what traces recorded) into a sealed
    fixture (never during a run)."""
    from pathlib import Path

    from abtest.errors import UserError
    from abtest.capturing import capture as do_capture
    from abtest.capturing import load_questions
    from abtest.retrieval import get_retriever

    if traces:
        if questions or spec:
            raise UserError("--from-traces takes the questions and the chunks from the traces: "
                            "give no QUESTIONS file or --retriever with it", field="--from-traces")
        from abtest.imports.traces import capture_from_traces

        fx, _, counts = capture_from_traces(traces, out=out, fmt=trace_format,
                                            corpus_version=corpus_version,
                                            refresh_every_days=refresh_every_days, force=force,
                                            progress=progress)
        click.echo(f"captured {len(fx.cases)} cases → {fx.path} (cases_sha256 "
                   f"{fx.cases_sha256[:16]}…) from {counts['traces']} trace(s); "
                   f"{counts['repeated']} repeated question(s) kept once, {counts['skipped']} "
                   "skipped")
        return
    if not questions:
        raise UserError("give a QUESTIONS file (or --from-traces FILE)", field="QUESTIONS")
    lc = load(ctx)
    rc = lc.config.retriever
    # a spec from abtest.yaml resolves its relative paths against the config's folder
    base_dir = Path.cwd() if spec else lc.base_dir
    spec = spec or rc.spec
    if not spec:
        raise UserError("no retriever: give --retriever SPEC or set retriever.spec in "
                        "abtest.yaml", field="--retriever")
    # an import keeps every context it is given unless k is asked for; a search needs one
    k = k or rc.k or (None if spec.startswith("jsonl:") else 5)
    if Path(out).exists() and not force:
        raise UserError("fixture already exists; pass --force to replace it deliberately", file=out)
    same = spec.startswith("jsonl:") and _same_file(Path(base_dir) / spec[len("jsonl:"):],
                                                    Path(questions))
    qs = load_questions(Path(questions), contexts_used=same, question_var=question_var,
                        answer_is=answer_is)
    opts = rc.options()  # the config's options; the command's own win
    if same and question_var is not None:   # a promptfoo file, its own capture input
        opts["question_var"] = question_var
    given = {"chunks_path": chunks_path, "id_field": id_field, "text_field": text_field,
             "score_field": score_field, "auth_env": auth_env, "timeout": timeout_s,
             "retries": retries}
    opts.update({name: v for name, v in given.items() if v is not None})
    if body_template is not None:
        opts["body_template"] = _file_or_text(body_template, "--body-template")
    if headers:
        from abtest.retrieval.http_api import parse_header

        opts["headers"] = {**opts.get("headers", {}), **dict(parse_header(h) for h in headers)}
    if keywords_llm:
        from abtest.judges.keywords import llm_keywords_fn

        opts["keywords_fn"] = llm_keywords_fn(lc)
    if spec.startswith("local:"):
        from abtest import llm

        cfg = lc.config
        if cfg.embedding is not None:
            opts["embed_fn"] = lambda texts, s=cfg.embedding: llm.embed(s, texts, cfg.timeout_s)
            opts["embed_label"] = cfg.embedding.model
        if cfg.reranker is not None:
            opts["rerank_fn"] = lambda q, docs, s=cfg.reranker: llm.rerank(s, q, docs, cfg.timeout_s)
            opts["rerank_label"] = cfg.reranker.model
    if max_chars:
        opts["max_chars"] = max_chars
    retriever = get_retriever(spec, base_dir=base_dir, k=k, **opts)
    fx = do_capture(qs, retriever, out=out, corpus_version=corpus_version,
                    k=k, force=force, refresh_every_days=refresh_every_days, progress=progress)
    click.echo(f"captured {len(fx.cases)} cases → {fx.path} (cases_sha256 {fx.cases_sha256[:16]}…)")


def _same_file(a, b) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _file_or_text(value: str, option: str) -> str:
    """A value given inline, or read from @FILE."""
    from pathlib import Path

    from abtest.errors import UserError

    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {option} file ({getattr(exc, 'strerror', None) or exc})",
                        file=value[1:], field=option) from None
