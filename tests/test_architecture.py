"""The package's shape holds: no import circle between abtest's modules (lazy imports inside
functions count: a circle is a circle whenever it closes), no module imports another's
private name, one owner per outside system (litellm: llm/provider.py; click: cli/)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "abtest"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _imports(mods: dict[str, Path]):
    """(module, imported module, names, outside top-level package) for every import."""
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    yield m, (sub if sub in mods else target), a.name
            elif isinstance(node, ast.Import):
                for a in node.names:
                    yield m, a.name, None


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_abtest_modules():
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, target, _ in _imports(mods):
        if target in mods and target != m:
            edges[m].add(target)
    assert len(mods) > 80
    assert _cycles(edges) == []


def test_no_module_imports_another_modules_private_name():
    mods = _modules()
    bad = [(m, t, n) for m, t, n in _imports(mods)
           if n and n.startswith("_") and not n.startswith("__") and t != m and
           t.startswith("abtest")]
    assert bad == []


def test_one_owner_per_outside_system():
    mods = _modules()
    litellm = {m for m, t, _ in _imports(mods) if t.split(".")[0] == "litellm"}
    click = {m for m, t, _ in _imports(mods) if t.split(".")[0] == "click"}
    assert litellm == {"abtest.llm.provider"}
    assert click and all(m.startswith("abtest.cli") for m in click)
