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


# The pipeline, in order: a folder (stage) may import only the stages before it, lazy imports
# inside functions and imports for type checkers included (docs/DESIGN.md, "Layout"). `api`
# and `cli` are the faces; `errors` and `version` sit under everything.
STAGES = ("core", "store", "llm", "stats", "prompts", "imports", "retrieval", "judges",
          "review", "capturing", "running", "reporting", "livecheck", "view", "project", "api",
          "cli")
BASE = ("errors", "version")
TOP = {"abtest", "abtest.api", "abtest.errors", "abtest.version"}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "abtest"


def test_every_module_lives_in_a_stage_folder_but_the_faces():
    mods = _modules()
    loose = sorted(m for m, f in mods.items()
                   if m.count(".") == 1 and m not in TOP and f.name != "__init__.py")
    assert loose == []
    assert {_stage(m) for m in mods} - {"abtest", *BASE} == set(STAGES)
    assert len(list(PKG.glob("*.py"))) <= 6


def test_no_stage_imports_a_later_one_lazy_imports_included():
    rank = {s: i for i, s in enumerate(STAGES)}
    mods = _modules()
    against = sorted({(m, t) for m, t, _ in _imports(mods)
                      if t.startswith("abtest.") and _stage(m) in rank and _stage(t) in rank
                      and rank[_stage(t)] > rank[_stage(m)]})
    assert against == []


def test_the_stage_order_test_sees_an_import_inside_a_function(tmp_path):
    """The rule reads every import node, not only the module's top: a lazy import against the
    order is caught too."""
    src = "def f():\n    from abtest.reporting import build\n"
    tree = ast.parse(src)
    found = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found == ["abtest.reporting"]
    assert _stage("abtest.reporting.build") == "reporting" and _stage("abtest.core.fmt") == "core"


def test_class_names_are_unique_across_the_package():
    seen: dict[str, list[str]] = {}
    for m, f in _modules().items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(m)
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


def test_no_import_circle_among_the_scripts():
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    names = {f.stem for f in scripts.glob("*.py")}
    edges: dict[str, set[str]] = {n: set() for n in names}
    for f in scripts.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges[f.stem] |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom) and node.module in names:
                edges[f.stem].add(node.module)
    assert _cycles(edges) == []


# exceptions that never reach a user: signals between two parts of abtest, each caught by the
# part that waits for it (a deferred batch call, a stopping run, a cut-short embedded call, a
# store closing under a reader, a trace value that is not text), and click's usage error
INTERNAL_SIGNALS = {"Deferred", "Stopping", "Interrupted", "StoreClosing", "NotText",
                    "OneLineUsageError"}


def test_one_error_tree_every_error_a_user_sees_is_an_abtest_error():
    import importlib

    from abtest.errors import AbtestError

    outside = []
    for m, f in _modules().items():
        tree = ast.parse(f.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        if not names:
            continue
        mod = importlib.import_module(m)
        for name in names:
            cls = getattr(mod, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException) and \
                    not issubclass(cls, AbtestError) and name not in INTERNAL_SIGNALS and \
                    not issubclass(cls, (KeyboardInterrupt, Warning)):   # RunStopped: Ctrl-C's
                outside.append(f"{m}.{name}")                      # own kind; warnings warn
    assert outside == []
    import abtest.errors as E

    assert not hasattr(E, "IncompleteError")   # one name per kind


# Imports sit at the module's top, where a reader sees what a module needs, except at the
# seams that keep `abtest --help` and `import abtest` instant: CLI command bodies, the API's
# functions, the package's face; and third parties that are optional extras or chosen as the
# program runs (litellm inside llm/, pandas, xllamacpp, tqdm's widget or text bar).
LAZY_OK = {"litellm", "pandas", "xllamacpp", "tqdm", "playwright", "ipywidgets", "pyarrow"}


def _seam(module: str) -> bool:
    return module.startswith("abtest.cli") or module in ("abtest.api", "abtest")


def test_imports_sit_at_the_top_outside_the_seams():
    lazy = []
    for m, f in _modules().items():
        if _seam(m):
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        typing_only = {id(x) for n in tree.body if isinstance(n, ast.If)
                       and getattr(n.test, "id", None) == "TYPE_CHECKING" for x in ast.walk(n)}
        guarded = {id(x) for n in ast.walk(tree) if isinstance(n, ast.Try)
                   and any(getattr(h.type, "id", None) in ("ImportError", "ModuleNotFoundError")
                           for h in n.handlers) for b in n.body for x in ast.walk(b)}
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top | typing_only \
                    | guarded:
                mod = n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
                if (mod or "").split(".")[0] not in LAZY_OK:
                    lazy.append(f"{m}:{n.lineno} {mod}")
    assert lazy == []


def test_the_lazy_import_rule_sees_an_import_inside_a_method():
    tree = ast.parse("class C:\n    def f(self):\n        import json\n")
    top = {id(n) for n in tree.body}
    assert [n.names[0].name for n in ast.walk(tree)
            if isinstance(n, ast.Import) and id(n) not in top] == ["json"]
