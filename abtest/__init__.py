"""abtest: did this prompt wording change help, given the same retrieved material?

The Python API (docs/python-api.md), imported lazily so that `import abtest` stays instant:

    run(fixture, a, b, config=…)      compare two variants over a fixture → RunHandle
    live(golden, a, b, config=…)      the end-to-end confirmation run → RunHandle
    merge(sources, into, config=…)    shards as one run → RunHandle
    capture(questions, retriever, out)  freeze retrieval into a sealed fixture → Fixture
    report(run="latest", config=…)    a run's typed Report
    get_run(run="latest", config=…)   a stored run's RunHandle, status = its state now
    list_runs(config=…)               every run: state, cases finished, gate, claim line
    export(run, out_dir, fmt=…)       a run's rows as Parquet/CSV/JSONL files, for DataFrames
    load_config, Config, open_store, Store, Report, load_fixture, load_variant, stats
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_FROM = {"run": "abtest.api", "live": "abtest.api", "merge": "abtest.api",
         "capture": "abtest.api", "report": "abtest.api", "export": "abtest.api",
         "load_config": "abtest.api", "open_store": "abtest.api", "RunHandle": "abtest.api",
         "get_run": "abtest.api", "list_runs": "abtest.api",
         "Config": "abtest.shapes",
         "Store": "abtest.store", "Report": "abtest.reporting.model",
         "load_fixture": "abtest.fixtures", "load_variant": "abtest.variants"}
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
