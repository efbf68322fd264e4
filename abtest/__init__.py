"""abtest: did this prompt wording change help, given the same retrieved material?

The Python API (docs/python-api.md), imported lazily so that `import abtest` stays instant:

    run(fixture, a, b, config=…)      compare two variants over a fixture → RunHandle
    live(golden, a, b, config=…)      the end-to-end confirmation run → RunHandle
    merge(sources, into, config=…)    shards as one run → RunHandle
    arun(…), acapture(…)              run and capture, awaitable inside a running event loop
    capture(questions, retriever, out)  freeze retrieval into a sealed fixture → Fixture
    report(run="latest", config=…)    a run's typed Report (.to_markdown(), .to_html(), .to_json())
    review_export(run="latest", …)    the blind review pack for human labels
    compare(run_a, run_b, config=…)   two runs side by side → Comparison
    get_run(run="latest", config=…)   a stored run's RunHandle, status = its state now
    list_runs(config=…)               every run: state, cases finished, gate, claim line
    export(run, out_dir, fmt=…)       a run's rows as Parquet/CSV/JSONL files, for DataFrames
    load_config, Config, open_store, Store, Report, load_fixture, load_variant, stats
    AbtestError and its kinds UserError, IncompleteRunError, DriftError, ProviderError

Every public name is also imported under `TYPE_CHECKING`, so type checkers and editors see
the real signatures (the package ships `py.typed`) while the interpreter imports nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # what a type checker sees; at run time `__getattr__` loads each on use
    from . import stats as stats
    from .api import RunHandle as RunHandle
    from .api import acapture as acapture
    from .api import arun as arun
    from .api import capture as capture
    from .api import compare as compare
    from .api import export as export
    from .api import review_export as review_export
    from .api import get_run as get_run
    from .api import list_runs as list_runs
    from .api import live as live
    from .api import load_config as load_config
    from .api import merge as merge
    from .api import open_store as open_store
    from .api import report as report
    from .api import run as run
    from .comparison import CaseChange as CaseChange
    from .comparison import Comparison as Comparison
    from .errors import AbtestError as AbtestError
    from .errors import AbtestWarning as AbtestWarning
    from .errors import DriftError as DriftError
    from .errors import IncompleteRunError as IncompleteRunError
    from .errors import ProviderError as ProviderError
    from .errors import RunStopped as RunStopped
    from .errors import UserError as UserError
    from .fixtures import Fixture as Fixture
    from .fixtures import load_fixture as load_fixture
    from .reporting.model import Report as Report
    from .shapes import Config as Config
    from .shapes import Variant as Variant
    from .store import Store as Store
    from .variants import load_variant as load_variant

from .version import __version__ as __version__

_FROM = {"run": "abtest.api", "live": "abtest.api", "merge": "abtest.api",
         "capture": "abtest.api", "report": "abtest.api", "export": "abtest.api",
         "review_export": "abtest.api",
         "load_config": "abtest.api", "open_store": "abtest.api", "RunHandle": "abtest.api",
         "get_run": "abtest.api", "list_runs": "abtest.api", "compare": "abtest.api",
         "arun": "abtest.api", "acapture": "abtest.api",
         "Comparison": "abtest.comparison", "CaseChange": "abtest.comparison",
         "Config": "abtest.shapes", "Variant": "abtest.shapes",
         "Store": "abtest.store", "Report": "abtest.reporting.model",
         "Fixture": "abtest.fixtures", "load_fixture": "abtest.fixtures",
         "load_variant": "abtest.variants",
         "AbtestError": "abtest.errors", "UserError": "abtest.errors",
         "AbtestWarning": "abtest.errors",
         "IncompleteRunError": "abtest.errors", "DriftError": "abtest.errors",
         "ProviderError": "abtest.errors", "RunStopped": "abtest.errors"}
_MODULES = ("stats",)

__all__ = sorted([*_FROM, *_MODULES])


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(_FROM[name]), name)
    if name in _MODULES:
        return importlib.import_module(f"abtest.{name}")
    raise AttributeError(f"module 'abtest' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
