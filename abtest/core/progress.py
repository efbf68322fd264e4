"""Progress for the Python API: `progress=None` (the default) shows tqdm bars where someone
is watching (a terminal, a notebook), `False` shows nothing, a callable gets every line the
command line prints (its own UI), and an object with `step(stage, done, total, stats)` gets
the counts as well. The command line passes its stderr printer, so it prints as it always did.

The bars are tqdm's (widgets in a notebook with ipywidgets, text elsewhere), one per stage: `run`
counts cases (generated, checked and judged) with the provider calls, tokens and cost so far;
`capture` counts questions retrieved; `live` counts the golden items asked.
"""

from __future__ import annotations

import re
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol, Union
import importlib.util

# a sink for the lines a command prints (the CLI passes its stderr printer)
Progress = Callable[[str], None]
# what the Python API takes: None bars where someone watches, False nothing, a sink every line
ProgressArg = Union[Progress, bool, None]
STATS_EVERY_S = 1.0
# "[i/n] …": a line saying one more of n is done (live runs say their items this way)
STEP_LINE = re.compile(r"^\[(\d+)/(\d+)\] ")


class Steps(Protocol):
    """A progress sink that takes counts as well as lines (a custom UI)."""

    def __call__(self, line: str) -> None: ...

    def step(self, stage: str, done: int, total: int,
             stats: Callable[[], dict[str, Any]] | None = None) -> None: ...


def watched() -> bool:
    """Someone sees stderr: a terminal, or a notebook kernel (whose stderr is no tty)."""
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Bars:
    """tqdm.auto bars, one per stage; lines that are not counts print above them."""

    def __init__(self, line_stage: str = "items") -> None:
        self.bars: dict[str, Any] = {}
        self.line_stage = line_stage
        self.stats_at = 0.0

    def __call__(self, line: str) -> None:
        m = STEP_LINE.match(line)
        if m:
            self.step(self.line_stage, int(m.group(1)), int(m.group(2)))
            return
        _tqdm().write(f"abtest: {line}", file=sys.stderr)

    def step(self, stage: str, done: int, total: int,
             stats: Callable[[], dict[str, Any]] | None = None, desc: str | None = None
             ) -> None:
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = _tqdm()(total=total, desc=desc or stage, unit="case",
                                             file=sys.stderr, dynamic_ncols=True, leave=True)
        elif desc and bar.desc != desc:   # one bar over a sequential run: the look in its name
            bar.set_description(desc, refresh=False)
        bar.total = total
        bar.n = done
        now = time.monotonic()
        if stats is not None and (now - self.stats_at >= STATS_EVERY_S or done >= total):
            self.stats_at = now
            bar.set_postfix(stats(), refresh=False)
        bar.refresh()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def _tqdm() -> Any:
    """tqdm.auto's bar (a widget) in a notebook that has ipywidgets, else the text bar: tqdm.auto
    without ipywidgets warns "IProgress not found" and falls back to text anyway."""

    if "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm


def step(progress: Progress | None, stage: str, done: int, total: int, line: str,
         stats: Callable[[], dict[str, Any]] | None = None, desc: str | None = None) -> None:
    """One more of `total` done: counts to a sink that takes them, else the line. `desc`
    names the bar (a sequential run's look) where the sink is abtest's own bars."""
    if progress is None:
        return
    steps = getattr(progress, "step", None)
    if steps is None:
        progress(line)
    elif isinstance(progress, Bars):
        progress.step(stage, done, total, stats, desc=desc)
    else:
        steps(stage, done, total, stats)


@contextmanager
def sink(progress: ProgressArg, stage: str = "items") -> Iterator[Progress | None]:
    """The sink a call reports to (see the module's docstring); bars close when it ends."""
    if progress is False:
        yield None
        return
    if progress is None or progress is True:
        if progress is None and not watched():
            yield None
            return
        bars = Bars(stage)
        try:
            yield bars
        finally:
            bars.close()
        return
    yield progress


def count_retrievals(retriever: Any, progress: Progress | None, total: int) -> None:
    """Count a capture's questions as its retriever answers them: this retriever's own
    `retrieve` reports each (a retriever that answers a batch at once fills the bar at the
    end, when capture reports the batch done)."""
    if progress is None or getattr(progress, "step", None) is None:
        return
    one, many = retriever.retrieve, retriever.retrieve_many
    done = 0

    def retrieve(question: str, k: int | None = None) -> Any:
        nonlocal done
        got = one(question, k)
        done += 1
        step(progress, "capture", min(done, total), total, "")
        return got

    def retrieve_many(questions: Any, k: int | None = None) -> Any:
        got = many(questions, k)
        step(progress, "capture", total, total, "")
        return got

    retriever.retrieve, retriever.retrieve_many = retrieve, retrieve_many
