"""`abtest live` (the end-to-end check) and `abtest serve-demo` (a demo assistant)."""

from __future__ import annotations

import sys

import click

from abtest.cli.common import EXIT_INCOMPLETE, Command, config_path, progress


@click.command("live", cls=Command)
@click.option("--golden", required=True, type=click.Path(dir_okay=False),
              help="Golden questions (JSONL or JSON) with relevant_chunk_ids / expected_citations.")
@click.option("--a", "a_target", required=True,
              help="Target A: http(s)://host[:port] (POST {endpoint}/chat) or python:pkg.module:fn.")
@click.option("--b", "b_target", required=True, help="Target B (same forms).")
@click.option("--frozen-run", default=None, help="Frozen run to report beside (how much survived).")
@click.option("--run-id", default=None)
@click.option("--resume", is_flag=True, help="Continue --run-id; answered items are not asked again.")
@click.option("--a-name", default=None, help="Label for A [the version A reports, else 'A'].")
@click.option("--b-name", default=None, help="Label for B [the version B reports, else 'B'].")
@click.option("--retriever", "retriever_label", default=None,
              help="Name of the live retriever, for the end-to-end claim.")
@click.option("--corpus-version", default=None, help="Corpus version the live system serves.")
@click.option("--auth-env", default=None,
              help="Environment variable holding the endpoint key (sent as Authorization: Bearer).")
@click.option("--auth-header", default="Authorization", show_default=True)
@click.option("--auth-scheme", default="Bearer", show_default=True)
@click.option("--chat-path", default="/chat", show_default=True, help="Path appended to an http target.")
@click.option("--request-template", default=None,
              help='JSON body with {question} {index} {id} {conversation_id} {variant}, or @FILE '
                   '[{"message": "{question}", "conversationId": "{conversation_id}"}].')
@click.option("--answer-path", default="answer", show_default=True)
@click.option("--chunks-path", default="chunks", show_default=True)
@click.option("--chunk-id-field", default="id", show_default=True)
@click.option("--chunk-text-field", default="text", show_default=True)
@click.option("--chunk-score-field", default="score", show_default=True)
@click.option("--scores-path", default=None, help="A separate score list aligned with the chunks.")
@click.option("--version-path", default="version", show_default=True,
              help="Assistant version in the reply (else the X-Assistant-Version header).")
@click.option("--delta-path", default="delta", show_default=True,
              help="Text delta in a streamed (text/event-stream) event.")
@click.option("--stream", is_flag=True, help='Ask for a stream ("stream": true in the default body); '
              "latency is then time to first token.")
@click.option("--timeout", "timeout_s", default=30.0, show_default=True, help="Seconds per call.")
@click.option("--retries", default=3, show_default=True, help="Retries on 429/5xx/connection errors.")
@click.option("--backoff", "backoff_s", default=0.5, show_default=True,
              help="First retry delay in seconds (doubles, with jitter).")
@click.option("--citation-pattern", default=None,
              help=r"Regex for citations in answers [\[([^\[\]]+)\]].")
@click.pass_context
def live(ctx, golden, a_target, b_target, frozen_run, run_id, resume, a_name, b_name,
         retriever_label, corpus_version, auth_env, auth_header, auth_scheme, chat_path,
         request_template, answer_path, chunks_path, chunk_id_field, chunk_text_field,
         chunk_score_field, scores_path, version_path, delta_path, stream, timeout_s, retries,
         backoff_s, citation_pattern):
    """End-to-end confirmation: ask live assistants A and B every golden question, judge.

    Prints the run id on stdout (progress on stderr); `abtest report RUN_ID` and
    `abtest gate RUN_ID` then work on it. Exit 3 when a target stops answering.
    """
    from pathlib import Path

    from abtest.api import live as do_live
    from abtest.core.config import load_config
    from abtest.errors import UserError
    from abtest.livecheck import LiveIncomplete

    lc = load_config(config_path(ctx))
    tpl = request_template
    if tpl and tpl.startswith("@"):
        p = Path(tpl[1:])
        try:
            tpl = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read request template ({exc.strerror})", file=str(p)) from None
    h = do_live(golden, a_target, b_target, config=lc, frozen_run=frozen_run,
                progress=progress, run_id=run_id, resume=resume, a_name=a_name,
                b_name=b_name, retriever_label=retriever_label,
                corpus_version=corpus_version, citation_pattern=citation_pattern,
                chat_path=chat_path, request_template=tpl, answer_path=answer_path,
                chunks_path=chunks_path, chunk_id_field=chunk_id_field or None,
                chunk_text_field=chunk_text_field,
                chunk_score_field=chunk_score_field or None, scores_path=scores_path,
                version_path=version_path or None, delta_path=delta_path, stream=stream,
                auth_env=auth_env, auth_header=auth_header, auth_scheme=auth_scheme,
                timeout_s=timeout_s, retries=retries, backoff_s=backoff_s)
    if isinstance(h.result, LiveIncomplete):
        stopped = h.result
        click.echo(stopped.run_id)
        progress(str(stopped))
        progress(f"report: abtest report {stopped.run_id}; finish later with `abtest live … "
                  f"--run-id {stopped.run_id} --resume`")
        sys.exit(EXIT_INCOMPLETE)
    res = h.result   # its summary is kept already
    progress(f"{res.status}: {res.n_items} answers from {res.n_cases} questions, "
              f"{res.seconds:.1f} s; report: abtest report {res.run_id}")
    click.echo(res.run_id)
    if res.status != "complete":
        progress(f"incomplete: unfinished questions: {', '.join(res.unfinished[:20])}"
                  + (f" ({res.judge_errors[0][:120]})" if res.judge_errors else ""))
        sys.exit(EXIT_INCOMPLETE)


@click.command("serve-demo")
@click.option("--index", "index_path", required=True, type=click.Path(dir_okay=False),
              help="Index built by `abtest index`.")
@click.option("--variant", required=True, type=click.Path(dir_okay=False), help="Prompt variant YAML.")
@click.option("--model", default=None,
              help="litellm model [the config's generator, with its api_base and key]")
@click.option("--api-base", default=None, help="OpenAI-compatible server for --model.")
@click.option("--k", default=3, show_default=True)
@click.option("--port", default=0, show_default=True, help="0 = any free port (on 127.0.0.1).")
@click.option("--max-seconds", default=600.0, show_default=True, help="Lifetime; 0 = unbounded.")
@click.option("--max-requests", default=None, type=int, help="Close after this many answers.")
@click.pass_context
def serve_demo(ctx, index_path, variant, model, api_base, k, port, max_seconds, max_requests):
    """A demo chat assistant (one variant) over the local index, as a target for `abtest live`.

    It answers with the config's generator (model, api_base, api_key_env, temperature), so
    a local OpenAI-compatible server configured there is the one it asks."""
    import time

    from abtest.livecheck.demo_server import DemoChatServer
    from abtest.llm import check_credentials
    from abtest.cli.common import load

    lc = load(ctx)
    spec = lc.config.generator
    updates = {k_: v for k_, v in (("model", model), ("api_base", api_base)) if v}
    if model and not api_base:
        updates["api_base"] = None  # another model: the config's server is not its server
    spec = spec.model_copy(update=updates)
    check_credentials(spec, where="generator")
    srv = DemoChatServer(index_path, variant, k=k, port=port, max_seconds=max_seconds or None,
                         max_requests=max_requests, spec=spec,
                         context_template=lc.config.context_template)
    click.echo(f"listening on {srv.url}")
    progress(f"serve-demo: variant {srv.version}, model {spec.model}"
             + (f" at {spec.api_base}" if spec.api_base else "") + f", index {srv.index_path}")
    t0 = time.monotonic()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:  # the way to stop a server: not an interrupted run
        pass
    finally:
        srv.stop()
    progress(f"serve-demo: stopped after {srv.served} answer(s), {time.monotonic() - t0:.1f} s")
