"""docs/DESIGN.md is the contract users read: its command list and package map must be the
code's. Each side is read independently (the commands' own `--help`, the files on disk)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DESIGN = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "abtest"
COMMON = {"--config", "--help"}   # every command's; said once above the list


def _block_after(heading: str) -> str:
    rest = DESIGN.split(heading, 1)[1]
    return rest.split("```\n", 2)[1]


def _help(path: list[str]) -> str:
    got = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
    assert got.exit_code == 0, got.output
    return got.output


def _section(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"{name}:") + 1
    out = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break
        out.append(line)
    return out


def _subcommands(path: list[str]) -> list[str]:
    text = _help(path)
    if "Commands:" not in text.splitlines():
        return []
    return [ln.split()[0] for ln in _section(text, "Commands") if re.match(r"  \S", ln)]


def _options(path: list[str]) -> set[str]:
    got: set[str] = set()
    for ln in _section(_help(path), "Options"):
        if re.match(r"\s{2,}-", ln):
            head = re.split(r"\s{2,}", ln.strip())[0]
            got.update(re.findall(r"--[a-z][a-z0-9-]*", head))
    return got


def _commands(path: list[str] | None = None) -> list[list[str]]:
    """Every leaf command, walked through `abtest --help` and each group's help."""
    path = path or []
    subs = _subcommands(path)
    if not subs:
        return [path]
    return [leaf for s in subs for leaf in _commands([*path, s])]


LEAVES = _commands()
GROUPS = {tuple(p[:i]) for p in LEAVES for i in range(1, len(p))}


def _documented() -> dict[tuple[str, ...], set[str]]:
    """Command path → the options its entries in the synopsis name."""
    entries: list[str] = []
    for line in _block_after("## Commands").splitlines():
        if line.startswith("abtest "):
            entries.append(line)
        elif entries:
            entries[-1] += "\n" + line
    out: dict[tuple[str, ...], set[str]] = {}
    for entry in entries:
        words = entry.split()[1:]
        path: list[str] = []
        while words and (tuple([*path, words[0]]) in GROUPS or [*path, words[0]] in LEAVES):
            path.append(words.pop(0))
        assert path in LEAVES, f"DESIGN.md names a command abtest has not: {entry.splitlines()[0]}"
        out.setdefault(tuple(path), set()).update(re.findall(r"--[a-z][a-z0-9-]*", entry))
    return out


def test_every_command_is_in_the_synopsis_and_no_other():
    documented = _documented()
    assert sorted(documented) == sorted(tuple(p) for p in LEAVES)


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(p) for p in LEAVES])
def test_each_commands_options_are_the_synopsis_options(path):
    documented = _documented()[tuple(path)]
    actual = _options(path) - COMMON
    assert documented - actual == set(), f"documented but not in --help: {documented - actual}"
    assert actual - documented == set(), f"in --help but not in DESIGN.md: {actual - documented}"


def _package_map() -> dict[str, str]:
    """Entry name (`x.py` or `x/`) → its text, from the block under "The package"."""
    block = DESIGN.split("The package, in pipeline order", 1)[1].split("```\n", 2)[1]
    entries: dict[str, str] = {}
    name = None
    for line in block.splitlines()[1:]:
        m = re.match(r"  (\S+)\s*(.*)", line)
        if m:
            name = m.group(1)
            entries[name] = m.group(2)
        elif name and line.strip():
            entries[name] += " " + line.strip()
    return entries


def test_package_map_names_every_module():
    entries = _package_map()
    text = " ".join(f"{k} {v}" for k, v in entries.items())
    missing = []
    for path in sorted(PACKAGE.iterdir()):
        if path.suffix == ".py" and path.name != "__main__.py":
            if path.name not in entries and path.name not in text:
                missing.append(path.name)
        elif path.is_dir() and (path / "__init__.py").exists():
            if f"{path.name}/" not in entries:
                missing.append(f"{path.name}/")
                continue
            words = set(re.findall(r"[a-z_0-9]+", entries[f"{path.name}/"]))
            missing += [f"{path.name}/{m.name}" for m in sorted(path.glob("*.py"))
                        if m.stem not in ("__init__", "__main__") and m.stem not in words]
    assert missing == [], f"modules missing from DESIGN.md's package map: {missing}"


def test_package_map_names_only_modules_that_exist():
    entries = _package_map()
    named = set(entries) | set(re.findall(r"\b[a-z_0-9]+\.py\b", " ".join(entries.values())))
    gone = sorted(n for n in named if not (PACKAGE / n.rstrip("/")).exists())
    assert gone == [], f"DESIGN.md's package map names what is not there: {gone}"


def test_readme_is_under_ten_thousand_characters():
    assert len((ROOT / "README.md").read_text(encoding="utf-8")) < 10_000
