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
    from abtest import stats as stats
    from abtest.api import RunHandle as RunHandle
    from abtest.api import acapture as acapture
    from abtest.api import arun as arun
    from abtest.api import capture as capture
    from abtest.api import compare as compare
    from abtest.api import export as export
    from abtest.api import review_export as review_export
    from abtest.api import get_run as get_run
    from abtest.api import list_runs as list_runs
    from abtest.api import live as live
    from abtest.api import load_config as load_config
    from abtest.api import merge as merge
    from abtest.api import open_store as open_store
    from abtest.api import report as report
    from abtest.api import run as run
    from abtest.reporting.comparison import CaseChange as CaseChange
    from abtest.reporting.comparison import Comparison as Comparison
    from abtest.errors import AbtestError as AbtestError
    from abtest.errors import AbtestWarning as AbtestWarning
    from abtest.errors import DriftError as DriftError
    from abtest.errors import IncompleteRunError as IncompleteRunError
    from abtest.errors import ProviderError as ProviderError
    from abtest.errors import RunStopped as RunStopped
    from abtest.errors import UserError as UserError
    from abtest.core.fixture_set import Fixture as Fixture
    from abtest.core.fixture_set import load_fixture as load_fixture
    from abtest.reporting.model import Report as Report
    from abtest.core.models import Config as Config
    from abtest.core.models import Variant as Variant
    from abtest.store import Store as Store
    from abtest.prompts.variants import load_variant as load_variant

from abtest.version import __version__ as __version__

_FROM = {"run": "abtest.api", "live": "abtest.api", "merge": "abtest.api",
         "capture": "abtest.api", "report": "abtest.api", "export": "abtest.api",
         "review_export": "abtest.api",
         "load_config": "abtest.api", "open_store": "abtest.api", "RunHandle": "abtest.api",
         "get_run": "abtest.api", "list_runs": "abtest.api", "compare": "abtest.api",
         "arun": "abtest.api", "acapture": "abtest.api",
         "Comparison": "abtest.reporting.comparison", "CaseChange": "abtest.reporting.comparison",
         "Config": "abtest.core.models", "Variant": "abtest.core.models",
         "Store": "abtest.store", "Report": "abtest.reporting.model",
         "Fixture": "abtest.capturing", "load_fixture": "abtest.capturing",
         "load_variant": "abtest.prompts.variants",
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
