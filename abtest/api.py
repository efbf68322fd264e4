"""The public Python API: what the CLI calls, for notebooks and scripts.

Every function here takes paths or loaded objects, reads `abtest.yaml` the way the CLI does
(`config=` a path, a `Config`, a dict, or None for ./abtest.yaml, else the defaults), and
does everything the command does, the run's stored summary for `abtest view` included. A
run, live run or merge returns a `RunHandle`: its id and status, and `.report()`, the typed
`Report`. Errors are `abtest.errors.UserError` (bad input; the CLI's exit 2) and
`IncompleteRunError` (a provider failed; exit 3), never half-written results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, Coroutine, Iterable, ParamSpec, Sequence,
                    Generic, TypedDict, TypeVar, cast)

if TYPE_CHECKING:
    from abtest.reporting.comparison import Comparison
    from abtest.core.config import LoadedConfig
    from abtest.core.fixture_set import Fixture
    from abtest.core.models import Question, Variant
    from abtest.reporting.model import Report
    from abtest.retrieval.base import Retriever
    from abtest.store import Store
    from abtest.livecheck.run import LiveIncomplete, LiveResult
    from abtest.running.execute import RunResult
    from abtest.store.state import RunProgress
    from abtest.prompts.variants import LoadedVariant

from abtest.core.progress import Progress, ProgressArg

# a merge's summary: the merged run, its status, how many sources and cases it took
MergeSummary = dict[str, Any]


class RunRow(TypedDict):
    """One run as `list_runs()` (and `abtest runs`, and the view's list) gives it."""

    run_id: str
    kind: str
    status: str           # the run's state now (abtest.store.state)
    created_at: str
    fixture: str | None
    corpus_version: str | None
    a: str | None
    b: str | None
    generator: str | None
    judge: str | None
    n_cases: int | None   # the fixture's cases
    n_finished: int | None
    n_used: int | None    # a sequential run's cases taken so far
    n_not_needed: int | None   # a stopped sequential run's cases never taken
    counts: str | None    # the counts as every surface prints them
    resume: str | None    # the command that continues an unfinished run
    licensed: bool
    claim: str
    reasons: list[str]
    resolved: str | None
    gate: str
    pairwise: dict[str, Any] | None
    faithfulness: dict[str, Any] | None


def load_config(path: str | os.PathLike | None = None) -> LoadedConfig:
    """`abtest.yaml` (or `path`) validated, with the folder its relative paths resolve from;
    the defaults when there is no file and no path was given."""
    from abtest.core.config import load_config as load

    return load(path)


def _config(config: Any) -> LoadedConfig:
    from abtest.core.config import LoadedConfig, load_config as load
    from abtest.core.models import Config

    if config is None:
        return load(None)
    if isinstance(config, LoadedConfig):
        return config
    if isinstance(config, Config):
        return LoadedConfig(config, Path.cwd(), None)
    if isinstance(config, dict):
        from pydantic import ValidationError

        from abtest.errors import pydantic_error_line

        try:
            return LoadedConfig(Config.model_validate(config), Path.cwd(), None)
        except ValidationError as exc:
            raise pydantic_error_line(exc, file="config") from None
    return load(config, required=True)


Result = TypeVar("Result")


@dataclass
class RunHandle(Generic[Result]):
    """A stored run: its id, its status, what made the handle, and its report.

    `result` is, typed as such: a run's `RunResult` (`run`: its counts, calls and time), a
    stored run's `RunProgress` (`get_run`: its state and finished cases now), a live run's
    `LiveResult` (or its `LiveIncomplete` when it stopped short), a merge's summary."""

    run_id: str
    status: str
    store_path: Path
    result: Result

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def report(self) -> Report:
        return report(self.run_id, store=self.store_path)

    def progress(self) -> RunProgress:
        """Its state and finished cases now, by the rule every surface uses (a handle's
        `status` is what it was when the handle was made)."""
        from abtest.store import Store

        st = Store(self.store_path, read_only=True, create=False)
        try:
            return run_progress_of(st, self.run_id)
        finally:
            st.close()


def run_progress_of(store: Store, run_id: str) -> RunProgress:
    from abtest.store.runs import load_run
    from abtest.store.state import run_progress

    return run_progress(store, load_run(store, run_id))


def get_run(run: str = "latest", *, config: Any = None) -> RunHandle[RunProgress]:
    """A stored run as a `RunHandle`, its `status` the run's state now (running, interrupted,
    stopped, incomplete or complete): `run` is an id, a unique prefix or "latest"."""
    from abtest.store.runs import resolve_run

    lc = _config(config)
    st = open_store(lc)
    try:
        rid = resolve_run(st, run)
        prog = run_progress_of(st, rid)
    finally:
        st.close()
    return RunHandle(rid, prog.state, Path(lc.store_path), prog)


def list_runs(*, config: Any = None, progress: Progress | None = None) -> list[RunRow]:
    """Every run, newest first, as `abtest runs` and the view list them: state, its counts
    (`n_cases` the fixture's, `n_finished`, a sequential run's `n_used` and, once stopped,
    `n_not_needed`; `counts` as every surface prints them), gate, claim line, and the
    command that resumes an unfinished run (a summary missing from the store is built now)."""
    from abtest.view import data

    st = open_store(config)
    try:
        rows = data.runs_overview(st)
        pending = [r for r in rows if r.get("pending")]
        if pending and progress:
            progress(f"building the summary of {len(pending)} run(s) the store has none for")
        out: list[RunRow] = []
        for r in rows:
            if r.get("pending"):
                from abtest.store.runs import load_run

                r = data.run_row(st, load_run(st, r["run_id"]))
            out.append(cast(RunRow, {k: r.get(k) for k in RunRow.__annotations__}))
        return out
    finally:
        st.close()


def _keep(store_path: str | os.PathLike, run_id: str, warn: Progress | None) -> None:
    from abtest.reporting.summary import keep_summary

    keep_summary(store_path, run_id, warn)


def run(fixture: str | os.PathLike | Fixture, a: str | os.PathLike | Variant | LoadedVariant,
        b: str | os.PathLike | Variant | LoadedVariant, *, config: Any = None,
        run_id: str | None = None, resume: bool = False, retry_errors: bool = False,
        max_cost_usd: float | None = None, shard: str | tuple[int, int] | None = None,
        batch: bool = False, wait: bool = True, sequential: bool | dict | None = None,
        progress: ProgressArg = None) -> RunHandle[RunResult]:
    """Compare variants A and B over the fixture's frozen contexts: generate, check, judge;
    every row stored as it exists. A variant is a YAML path, an in-memory `Variant` (checked
    as its file would be) or a `LoadedVariant`. An incomplete run is returned too (status
    "incomplete", finished work kept); `resume=True` with its `run_id` continues it.
    `sequential=True` (or the `sequential:` settings as a dict) stops as soon as the answer
    is known, with anytime-valid inference (docs/CLAIM_STATISTICS.md §11)."""
    from abtest.core.progress import sink
    from abtest.running.runner import run as do_run

    lc = _config(config)
    if sequential is not None:
        lc = with_sequential(lc, sequential)
    with sink(progress, "run") as say:
        res = do_run(lc, fixture, a, b, run_id=run_id, resume=resume,
                     retry_errors=retry_errors, progress=say, max_cost_usd=max_cost_usd,
                     shard=shard, batch=batch, wait=wait)
        _keep(lc.store_path, res.run_id, say)
    return RunHandle(res.run_id, res.status, Path(lc.store_path), res)


def with_sequential(lc: LoadedConfig, sequential: bool | dict) -> LoadedConfig:
    """The config with `sequential` on (True), off (False) or set (a dict of its keys)."""
    import copy

    from abtest.core.models import SequentialConfig

    given = {"enabled": sequential} if isinstance(sequential, bool) else \
        {"enabled": True, **sequential}
    from pydantic import ValidationError

    from abtest.errors import pydantic_error_line

    try:
        settings = SequentialConfig.model_validate({**lc.config.sequential.model_dump(),
                                                    **given})
    except ValidationError as exc:
        raise pydantic_error_line(exc, file="sequential") from None
    out = copy.copy(lc)
    out.config = lc.config.model_copy(update={"sequential": settings})
    return out


def live(golden: str | os.PathLike, a: str, b: str, *, config: Any = None,
         frozen_run: str | None = None, progress: ProgressArg = None,
         **options: Any) -> RunHandle[LiveResult | LiveIncomplete]:
    """Ask live targets A and B (an http(s) endpoint or `python:module:function`) every
    golden question, end to end, and judge; `options` are `run_live`'s (run_id, resume,
    a_name, b_name, retriever_label, corpus_version, citation_pattern) and the target
    options of `abtest live` (`live.TargetOptions` fields)."""
    from abtest.livecheck import LiveIncomplete, TargetOptions, run_live

    lc = _config(config)
    target_fields = set(TargetOptions.__dataclass_fields__)
    opts = TargetOptions(**{k: v for k, v in options.items() if k in target_fields})
    rest = {k: v for k, v in options.items() if k not in target_fields}
    from abtest.core.progress import sink

    with sink(progress, "live") as say:
        try:
            res = run_live(lc, golden, a, b, frozen_run=frozen_run, options=opts,
                           progress=say, **rest)
        except LiveIncomplete as exc:
            return RunHandle(exc.run_id, "incomplete", Path(lc.store_path), exc)
        _keep(lc.store_path, res.run_id, say)
    return RunHandle(res.run_id, res.status, Path(lc.store_path), res)


def merge(sources: Sequence[str], into: str, *, config: Any = None,
          progress: ProgressArg = None) -> RunHandle[MergeSummary]:
    """Shards (`run(..., shard="i/n")`) as one run: sources are run ids, `OTHER.duckdb:RUN_ID`
    or export folders; refused unless they are one comparison with no case twice."""
    from abtest.running.shards import merge_runs
    from abtest.store import Store

    from abtest.core.progress import sink

    lc = _config(config)
    store = Store(lc.store_path)
    try:
        res = merge_runs(store, list(sources), into)
    finally:
        store.close()
    with sink(progress) as say:
        if say:
            say(f"merged {res['sources']} run(s): {res['cases']} of {res['n_cases']} cases, "
                f"{res['status']}")
        _keep(lc.store_path, res["run_id"], say)
    return RunHandle(res["run_id"], res["status"], Path(lc.store_path), res)


def capture(questions: str | os.PathLike | Iterable[Question | dict],
            retriever: str | Retriever | Callable[[str, int], Any], out: str | os.PathLike, *,
            config: Any = None, k: int | None = None, corpus_version: str | None = None,
            force: bool = False, refresh_every_days: int = 30,
            question_var: str | None = None, answer_is: str | None = None,
            progress: ProgressArg = None, **retriever_options: Any) -> Fixture:
    """Freeze what retrieval returns for the questions into a sealed fixture at `out`.

    `questions`: a file in any shape `abtest capture` reads (RAGAS, promptfoo, DeepEval,
    Inspect, Phoenix, LlamaIndex: docs/DESIGN.md), or Question objects or dicts.
    `retriever`: a spec (`local:…`, `jsonl:…`, `python:…`, an http(s) URL), a Retriever, or
    a function `fn(question, k)` returning chunks (dicts or objects with id and text).
    `question_var`: a promptfoo test's question var; `answer_is`: "reference" or "response",
    what a file's `answer` column holds when the file cannot say."""
    from abtest.core.progress import sink

    with sink(progress, "capture") as say:
        return _capture(questions, retriever, out, config=config, k=k,
                        corpus_version=corpus_version, force=force,
                        refresh_every_days=refresh_every_days, question_var=question_var,
                        answer_is=answer_is, progress=say, **retriever_options)


def _capture(questions: str | os.PathLike | Iterable[Question | dict],
             retriever: str | Retriever | Callable[[str, int], Any], out: str | os.PathLike,
             *, config: Any, k: int | None, corpus_version: str | None, force: bool,
             refresh_every_days: int, progress: Progress | None,
             question_var: str | None = None, answer_is: str | None = None,
             **retriever_options: Any) -> Fixture:
    from abtest.capturing import capture as do_capture
    from abtest.capturing import load_questions, validate_question_rows
    from abtest.core.progress import count_retrievals
    from abtest.retrieval import get_retriever
    from abtest.retrieval.base import Retriever
    from abtest.retrieval.pycall import PythonRetriever

    lc = _config(config)
    same = False
    if isinstance(questions, (str, os.PathLike)):
        spec = retriever if isinstance(retriever, str) else ""
        same = spec.startswith("jsonl:") and \
            Path(spec[len("jsonl:"):]).resolve() == Path(questions).resolve()
        qs = load_questions(Path(questions), warn=progress, contexts_used=same,
                            question_var=question_var, answer_is=answer_is)
    else:
        from abtest.core.models import Question

        rows = [(f"item {i}", q.model_dump(exclude_none=True) if isinstance(q, Question) else q)
                for i, q in enumerate(questions)]
        qs = [q for _, q in validate_question_rows(rows, Path("questions"))]
    if isinstance(retriever, Retriever):
        r = retriever
    elif callable(retriever):
        r = PythonRetriever.of(retriever, k=k or 5, **retriever_options)
    else:
        spec = str(retriever)
        kk = k or lc.config.retriever.k or (None if spec.startswith("jsonl:") else 5)
        if same and question_var is not None:   # a promptfoo file, its own capture input
            retriever_options = {**retriever_options, "question_var": question_var}
        r = get_retriever(spec, base_dir=str(Path.cwd()), k=kk, **retriever_options)
    count_retrievals(r, progress, len(qs))
    return do_capture(qs, r, out=out, corpus_version=corpus_version, k=k or r.k, force=force,
                      refresh_every_days=refresh_every_days, progress=progress)


def review_export(run: str = "latest", out: str | os.PathLike | None = None, *, n: int = 40,
                  seed: int = 0, config: Any = None, progress: ProgressArg = None
                  ) -> dict[str, Any]:
    """`abtest review export`: a blind review pack for `run` (items.jsonl, labels.csv,
    review.html) in `out` (default results/review/RUN_ID), `n` items per judge; returns its
    paths, item count and counts per judge."""
    from abtest.core.progress import sink
    from abtest.review import export_pack
    from abtest.store.runs import load_run, resolve_run
    from abtest.store import Store

    lc = _config(config)
    st = Store(lc.store_path, create=False)
    try:
        rid = resolve_run(st, run)
        load_run(st, rid)
        target = Path(out) if out is not None else lc.store_path.parent / "review" / rid
        with sink(progress, "review export") as say:
            return export_pack(st, rid, target, n=n, seed=seed, progress=say)
    finally:
        st.close()


def export(run: str | None, out_dir: str | os.PathLike, *, fmt: str = "parquet",
           config: Any = None) -> list[Path]:
    """A run's rows (or, with run=None, every run's), one file per table (`parquet`, `csv` or
    `jsonl`), for DataFrames and BI tools: what `abtest export` writes."""
    from abtest.errors import UserError
    from abtest.store.runs import resolve_run

    if fmt not in ("parquet", "csv", "jsonl"):
        raise UserError(f"unknown format {fmt!r} (parquet, csv or jsonl)", field="fmt")
    from abtest.store.runs import load_run

    st = open_store(config)
    try:
        rid = resolve_run(st, run) if run is not None else None
        if rid is not None:
            load_run(st, rid)
        return st.export_run(rid, Path(out_dir), fmt)
    finally:
        st.close()


def open_store(config: Any = None, *, read_only: bool = True) -> Store:
    """The results store of the config (read-only by default: it works while a run writes)."""
    from abtest.store import Store

    return Store(_config(config).store_path, read_only=read_only, create=False)


def report(run: str = "latest", *, config: Any = None,
           store: str | os.PathLike | Store | None = None) -> Report:
    """A run's report (frozen or live) as the typed `Report`: what `abtest report RUN
    --format json` prints. `run` is an id, a unique prefix or "latest"."""
    from abtest.reporting.model import Report
    from abtest.reporting.summary import build_any
    from abtest.store.runs import load_run, resolve_run
    from abtest.store import Store

    own = not isinstance(store, Store)
    st = store if isinstance(store, Store) else Store(
        store if store is not None else _config(config).store_path, read_only=True,
        create=False)
    try:
        rid = resolve_run(st, run)
        built = build_any(st, load_run(st, rid))
        # a frozen run's report is the built one, key order and all (what the CLI renders)
        out = built if isinstance(built, Report) else Report.model_validate(built.as_dict())
        out._store_path = str(st.path)   # where its frames read their rows
        return out
    finally:
        if own:
            st.close()


def compare(run_a: str, run_b: str, *, config: Any = None) -> Comparison:
    """Two stored runs on one fixture side by side (`abtest compare`): which cases flipped,
    each run's headline. Runs are ids, unique prefixes or "latest"."""
    from abtest.reporting.comparison import Comparison
    from abtest.reporting.compare import compare_runs
    from abtest.store.runs import resolve_run

    st = open_store(config)
    try:
        return Comparison.of(compare_runs(st, resolve_run(st, run_a), resolve_run(st, run_b)))
    finally:
        st.close()


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _in_a_thread(fn: Callable[_P, _R]) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """`fn` as a coroutine for code that already runs an event loop (Jupyter, a web app): the
    same synchronous call, in a worker thread (`asyncio.to_thread`), so no loop is nested and
    the loop stays free while the run works. Cancelling the await does not stop the run."""
    import asyncio
    import functools

    @functools.wraps(fn)
    async def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return call


arun = _in_a_thread(run)
arun.__name__ = arun.__qualname__ = "arun"
arun.__doc__ = "`run`, awaitable inside a running event loop (the same code, in a worker thread)."
acapture = _in_a_thread(capture)
acapture.__name__ = acapture.__qualname__ = "acapture"
acapture.__doc__ = ("`capture`, awaitable inside a running event loop (the same code, in a "
                    "worker thread).")
