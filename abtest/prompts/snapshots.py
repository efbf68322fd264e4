"""Rendered-prompt snapshots: the exact messages for one case, byte for byte.

An accidental whitespace or ordering change in a prompt then shows up as a diff,
not as a mysterious quality movement.
"""

from __future__ import annotations

from pathlib import Path

from abtest.core.config import LoadedConfig
from abtest.errors import UserError
from abtest.core.fixture_set import load_fixture
from abtest.prompts.variants import load_variant, messages_text, render_context, render_messages, unified_diff
from abtest.core.names import file_stem


def snapshot_path(variant_path: Path, case_id: str) -> Path:

    return variant_path.parent / "__snapshots__" / f"{variant_path.stem}.{file_stem(case_id)}.txt"


def render_for_case(lc: LoadedConfig, variant_path, fixture, case_id: str | None = None) -> tuple[str, str]:
    lv = load_variant(variant_path)
    fx = load_fixture(fixture)
    if not fx.cases:
        raise UserError("fixture has no cases", file=str(fx.path))
    case = fx.cases[0] if case_id is None else fx.by_id().get(case_id)
    if case is None:
        raise UserError(f"no case {case_id!r} in the fixture", file=str(fx.path))
    tpl = lv.variant.context_template or lc.config.context_template
    ctx = render_context(case, tpl, lc.config.context_separator)
    return case.id, messages_text(render_messages(lv, case, ctx))


def snapshot(lc: LoadedConfig, variant_path, fixture, *, case_id: str | None = None,
             update: bool = False) -> tuple[int, str]:
    """(exit code, text): 0 same/updated/created, 1 differs (with a unified diff)."""
    cid, text = render_for_case(lc, variant_path, fixture, case_id)
    path = snapshot_path(Path(variant_path), cid)
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        path.write_bytes(text.encode("utf-8"))
        return 0, f"{'updated' if existed else 'created'} {path}"
    old = path.read_bytes().decode("utf-8")
    if old == text:
        return 0, f"ok: {path} matches"
    diff = unified_diff(old, text, f"{path} (stored)", f"{variant_path} (rendered)")
    return 1, diff + f"\nsnapshot differs: {path} (run with --update to accept)"
