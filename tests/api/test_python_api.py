"""The public Python API: docs/python-api.md runs as written (every code block, in order,
against the loopback fake OpenAI-compatible server), names every public name with its real
signature, and a run made from Python is stored like one made by the CLI (its summary kept
for `abtest view`)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"
DOC_URL = "http://127.0.0.1:8080/v1"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_every_code_block_of_the_python_api_page_runs(tmp_path, monkeypatch, capsys):
    import abtest

    blocks = _blocks()
    assert len(blocks) >= 6 and all(DOC_URL in b for b in blocks[:1])
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    with FakeLLMServer(max_seconds=300) as srv:
        for i, code in enumerate(blocks):
            exec(compile(code.replace(DOC_URL, srv.base_url), f"python-api.md block {i}",
                         "exec"), ns)
    h, rep = ns["h"], ns["rep"]
    assert h.status == "complete" and rep.run_id == h.run_id
    assert isinstance(rep, abtest.Report) and rep.n_finished == 3
    assert len(ns["generations"]) == 6                      # 3 cases x A and B
    assert ns["fixture"].cases[0].retriever.startswith("python@k=2 python:")
    # the run was stored as the CLI stores it: its summary is there for the view
    store = abtest.open_store(ns["config"])
    try:
        assert h.run_id in store.run_summaries()
    finally:
        store.close()


def _documented() -> dict[str, str]:
    rows = re.findall(r"^\| `([A-Za-z_]+)` \| `([^`]*)` \|", DOC.read_text(encoding="utf-8"),
                      re.M)
    return dict(rows)


def test_the_page_names_every_public_name_with_its_signature():
    import abtest

    doc = _documented()
    assert sorted(doc) == sorted(n for n in abtest.__all__ if n != "RunHandle")
    for name, sig in doc.items():
        obj = getattr(abtest, name)
        if inspect.ismodule(obj) and not callable(obj):
            assert sig == "module", name
            continue
        if inspect.isclass(obj) and name in ("Config", "Report", "Variant"):
            continue   # pydantic models: constructed from fields / JSON, as the row says
        if inspect.isclass(obj) and issubclass(obj, Warning):
            assert sig == f"{name}(message)", name   # a builtin's __init__: no signature
            continue
        assert sig.startswith(f"{name}({_params(obj)})"), (name, sig, _params(obj))


def _params(obj) -> str:
    """The parameter list as the page writes it: names, defaults, `*`, no annotations."""
    out, star = [], False
    for p in inspect.signature(obj).parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        else:
            out.append(p.name + ("" if p.default is p.empty else f"={p.default!r}"))
    return ", ".join(out)


def test_report_live_and_merge_are_the_functions_whatever_was_imported_first():
    import abtest
    import abtest.livecheck.run  # noqa: F401  the packages behind them, imported first
    import abtest.reporting.build  # noqa: F401
    import abtest.running.shards  # noqa: F401
    from abtest import api

    for name in ("report", "live", "merge", "run", "capture", "export"):
        assert getattr(abtest, name) is getattr(api, name), name


def test_import_abtest_loads_nothing_heavy():
    code = ("import sys, abtest; heavy = [m for m in ('litellm', 'duckdb', 'scipy', 'pydantic', "
            "'click', 'abtest.api') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out
