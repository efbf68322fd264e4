"""`abtest init`: a working project skeleton with a config and two example variants."""

from __future__ import annotations

import shutil
from pathlib import Path

from abtest.core.config import DEFAULT_CONFIG_YAML
from abtest.errors import UserError

DEMO_DATA = Path(__file__).parent / "demo_data"


def init_project(directory: str | Path, *, config_text: str | None = None) -> list[str]:
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise UserError("exists and is not a directory", file=str(d))
    done = []
    for sub in ("fixtures", "variants", "results"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    keep = d / "results" / ".gitkeep"
    keep.touch(exist_ok=True)
    cfg = d / "abtest.yaml"
    if cfg.exists():
        done.append(f"kept existing {cfg}")
    else:
        cfg.write_text(config_text or DEFAULT_CONFIG_YAML, encoding="utf-8")
        done.append(f"wrote {cfg}")
    for name, target in (("plain.yaml", "a.yaml"), ("grounded.yaml", "b.yaml")):
        t = d / "variants" / target
        if not t.exists():
            shutil.copyfile(DEMO_DATA / name, t)
            done.append(f"wrote {t}")
    gi = d / "results" / ".gitignore"
    if not gi.exists():
        gi.write_text("*\n!.gitignore\n!.gitkeep\n", encoding="utf-8")
    done.append("next: abtest index CORPUS.jsonl && abtest capture QUESTIONS.jsonl --retriever "
                "local:results/index.duckdb --out fixtures/NAME")
    return done
