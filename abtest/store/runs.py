"""A stored run, loaded for everything that reads one (report, review, live, history).

It sits below report and review so neither imports the other for it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from abtest.errors import UserError
from abtest.store.state import state_of
from shlex import quote
from abtest.core.names import check_id
from abtest.core.fixture_set import sha256_bytes
from abtest.core.models import Config
from abtest.core.fixture_set import load_fixture
from abtest.store.state import run_progress

if TYPE_CHECKING:
    from abtest.store import Store


def load_run(store: Store, run_id: str) -> dict:
    run = store.get_run(run_id)
    if run is None:
        known = [r["run_id"] for r in store.list_runs()][-5:]
        hint = f" (recent: {', '.join(known)})" if known else ""
        raise UserError(f"no run {run_id!r} in the store{hint}", file=str(store.path))
    return run


def activity(store: Store, run: dict, writing: set[str] | None | Literal[False] = False) -> str:
    """What a run is doing now (runstate.state_of): running only while a live process writes
    it; interrupted when that process died; stopped, incomplete or complete as it ended."""

    return state_of(store, run, writing)


def resume_hint(run: dict, batch: bool = False) -> str:
    """The command that continues this run, pasteable from any folder: absolute fixture and
    variant paths, the config file the run was started with (which names its store), or,
    when it ran on defaults (the store under the folder it started in), a `cd` there first;
    every word shell-quoted; --shard and --batch as the run needs them."""

    info = json.loads(run.get("info_json") or "{}")
    if run.get("kind") == "live":
        return f"abtest live … --run-id {quote(run['run_id'])} --resume"
    cwd = info.get("cwd")

    def absolute(p: object) -> str:
        if not p:
            return "…"
        path = Path(str(p))
        if not path.is_absolute() and cwd:
            path = Path(cwd) / path
        return quote(str(path))

    parts = []
    cfg = info.get("config_path")
    if not cfg and cwd:   # defaults: the store is results/ under the folder it started in
        parts += ["cd", quote(cwd), "&&"]
    parts += ["abtest", "run", "--fixture", absolute(run.get("fixture_path")),
              "--a", absolute(run.get("variant_a_path")),
              "--b", absolute(run.get("variant_b_path"))]
    if cfg:
        parts += ["--config", quote(cfg)]
    parts += ["--run-id", quote(run["run_id"]), "--resume"]
    shard = info.get("shard")
    if shard:
        parts += ["--shard", f"{int(shard[0])}/{int(shard[1])}"]
    if batch:
        parts.append("--batch")
    return " ".join(parts)


def resolve_run(store: Store, ref: str, kind: str | None = None) -> str:
    """A run named by id, by a unique id prefix, or as `latest` (the newest run, of `kind`
    when given); a ref that matches nothing is returned as it is, for `load_run` to refuse."""
    if ref in ("latest", "last"):
        rid = store.latest_run_id(kind)
        if rid is None:
            raise UserError(f"no {kind + ' ' if kind else ''}runs in the store yet; start one "
                            "with `abtest run`", file=str(store.path))
        return rid

    check_id(ref, field="RUN_ID")  # a run id becomes a folder and file names: never a path
    if store.get_run(ref) is not None:
        return ref
    found = store.run_ids_starting(ref)
    if len(found) > 1:
        raise UserError(f"run id prefix {ref!r} is ambiguous: {', '.join(found[:4])}"
                        + (" …" if len(found) > 4 else ""), file=str(store.path))
    return found[0] if found else ref


def check_fixture_unchanged(run: dict) -> None:
    """A re-reported run whose fixture changed on disk is refused."""


    p = Path(run["fixture_path"] or "")
    if run["kind"] != "frozen" or not (p / "cases.jsonl").exists():
        return
    if sha256_bytes((p / "cases.jsonl").read_bytes()) != run["fixture_sha256"]:
        raise UserError(f"fixture changed since run {run['run_id']} (cases_sha256 "
                        f"{run['fixture_sha256'][:12]}…); the stored "
                        "results no longer describe it", file=str(p))


def run_config(run: dict):

    try:
        return Config.model_validate(json.loads(run.get("config_json") or "{}"))
    except Exception:
        return Config()


def verified_cases(run: dict) -> dict[str, Any]:
    """The run's cases, verified: reviewers must see the contexts the judges saw, so a fixture
    edited, or re-captured at the same path, since the run is refused."""

    raw = run.get("fixture_path")
    p = Path(raw or "")
    if not raw or not p.exists():
        raise UserError("fixture not found; the review pack shows each case's question and "
                        "retrieved context from it", file=str(raw or "(no fixture path recorded)"))
    fx = load_fixture(p)
    want = run.get("fixture_sha256")
    if want and fx.cases_sha256 != want:
        raise UserError(f"fixture changed since run {run['run_id']} (cases sha256 {want[:12]}… "
                        f"then, {fx.cases_sha256[:12]}… now); the review pack must show the "
                        "contexts the judges saw: restore that version of the fixture",
                        file=str(p / "manifest.json"))
    return {c.id: c for c in fx.cases}


def pairwise_verdicts(store: Store, run_id: str) -> dict[str, tuple[str | None, str | None]]:
    by: dict[str, dict[str, str | None]] = defaultdict(dict)
    for j in store.judgments(run_id, judge="pairwise"):
        if j["sample"] == 0 and j["subject"] in ("AB", "BA"):
            by[j["case_id"]][j["subject"]] = None if j["error"] else j["verdict"]
    return {cid: (d.get("AB"), d.get("BA")) for cid, d in by.items() if "AB" in d and "BA" in d}


def finished_cases(store: Store, run_id: str) -> set[str]:
    """Cases the report scores, by the one rule (runstate.run_progress)."""

    return set(run_progress(store, load_run(store, run_id)).finished)
