#!/usr/bin/env python3
"""Mutation check of the code that decides abtest's verdict.

Each mutant is a one-token change that could flip a verdict — a comparison (< ↔ <=,
== ↔ !=, is ↔ is not, in ↔ not in), a boolean operator (and ↔ or), a dropped `not`,
an arithmetic operator (+ ↔ −, * ↔ /), a number (n → n + 1, x → 2x), a boolean
constant, or the variant labels "A" ↔ "B" — made in one of the functions listed in
TARGETS. For each, the module is rewritten in a scratch copy of the repository and the
tests named for it run (first failure stops them). A mutant the tests do not kill is
printed with its place; messages and dictionary keys are not mutated. The last run and its
survivors, each classified, are in docs/CLAIM_STATISTICS.md §9.

    python scripts/mutation_check.py                  # every target, 2 workers
    python scripts/mutation_check.py --only gate claim --workers 1
    python scripts/mutation_check.py --list           # the mutants, without running them
    python scripts/mutation_check.py --pick 9,12,351- # some positions of that list
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CLAIM_GATE = ["tests/reporting/test_claim.py", "tests/reporting/test_gate.py", "tests/reporting/test_metrics.py",
              "tests/stats/test_sizing.py", "tests/review/test_validation_rule.py",
              "tests/reporting/test_report_markdown.py"]
FAST = CLAIM_GATE + ["tests/reporting/test_verdict_real_runs.py"]
SIM = ["tests/scripts/test_validity_sim.py::test_score_level_null_keeps_the_false_licence_rate_within_alpha",
       "tests/scripts/test_validity_sim.py::test_score_level_true_effect_keeps_its_power",
       "tests/scripts/test_validity_sim.py::test_score_level_selective_refusal_is_never_licensed"]

# name: (module file, functions, tests)
TARGETS = {
    "claim": ("abtest/reporting/claim.py",
              ["_faithfulness_reasons", "_binary_reason", "effect_reasons", "validation_reasons",
               "licensed_claim"], FAST + SIM),
    "sizing": ("abtest/stats/sizing.py", ["holm_family", "min_n_binary_noninferiority", "minimum_n"],
               FAST + SIM),
    "agreement": ("abtest/review/agreement.py", ["judge_validation", "run_judge_validation"],
                  FAST + ["tests/review"]),
    "gate": ("abtest/reporting/gate.py", ["_rule", "evaluate_gate"], FAST),
    "incidents": ("abtest/reporting/incidents.py", ["is_incident", "find", "of", "count", "by_case"],
                  FAST),
    "metrics": ("abtest/reporting/metrics.py",
                ["direction", "continuous", "drop_bound", "noninferiority_continuous",
                 "binary", "pairwise", "length_bias", "_logit", "compute_metrics",
                 "apply_holm"], FAST + SIM),
    "judges": ("abtest/judges/__init__.py",
               ["pairwise", "faithfulness", "abstention", "_abstention_row",
                "claims_and_abstention"], ["tests/judges/test_judges.py", "tests/reporting/test_verdict_real_runs.py",
                                          "tests/judges/test_soft_refusal.py",
                                          "tests/reporting/test_adversary.py"]),
    "build": ("abtest/reporting/build.py", ["_incidents", "checks_table", "_build_report"],
              ["tests/reporting/test_verdict_real_runs.py", "tests/running/test_run.py", *CLAIM_GATE,
               "tests/running/test_sequential_run.py::"
               "test_a_decided_run_stops_at_the_first_look_and_calls_nothing_more"]),
    "stats": ("abtest/stats/__init__.py",
              ["_flat", "_binom_two_sided", "sign_test", "win_rate", "pairwise_outcome",
               "pairwise_outcomes", "position_consistency", "paired_t", "wilcoxon",
               "noninferiority_paired_t", "mcnemar", "_tango_z", "tango_ci", "holm",
               "cohen_kappa_table", "cohen_kappa", "mde_paired_t"],
              ["tests/stats/test_stats.py", "tests/reporting/test_verdict_real_runs.py", *CLAIM_GATE]),
}

_CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
             ast.NotIn: ast.In}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


@dataclass
class Mutant:
    target: str
    index: int
    function: str
    line: int
    before: str
    after: str

    @property
    def name(self) -> str:
        return f"{self.target}:{self.function}:{self.line}#{self.index}"


def _sites(tree: ast.Module, functions: set[str]):
    """(node, function, apply) for every mutation site, in a stable order; `apply(node)`
    returns the mutated replacement node."""
    out = []

    def visit(node, fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = node.name if node.name in functions else (fn if fn else None)
        if fn is not None:
            if isinstance(node, ast.Compare):
                for i, op in enumerate(node.ops):
                    if type(op) in _CMP_SWAP:
                        out.append((node, fn, lambda n, i=i: _with_op(n, i)))
            elif isinstance(node, ast.BoolOp):
                out.append((node, fn, lambda n: ast.BoolOp(
                    ast.Or() if isinstance(n.op, ast.And) else ast.And(), n.values)))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                out.append((node, fn, lambda n: n.operand))
            elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
                out.append((node, fn, lambda n: ast.BinOp(n.left, _BIN_SWAP[type(n.op)](), n.right)))
            elif isinstance(node, ast.Constant):
                v = node.value
                if isinstance(v, bool):
                    out.append((node, fn, lambda n: ast.Constant(not n.value)))
                elif isinstance(v, int):
                    out.append((node, fn, lambda n: ast.Constant(n.value + 1)))
                elif isinstance(v, float):
                    out.append((node, fn, lambda n: ast.Constant(n.value * 2 if n.value else 1.0)))
                elif v in ("A", "B"):
                    out.append((node, fn, lambda n: ast.Constant("B" if n.value == "A" else "A")))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.JoinedStr):
                continue  # message text: not a verdict
            visit(child, fn)

    visit(tree, None)
    return out


def _with_op(node: ast.Compare, i: int) -> ast.Compare:
    ops = list(node.ops)
    ops[i] = _CMP_SWAP[type(ops[i])]()
    return ast.Compare(node.left, ops, node.comparators)


def mutants(target: str) -> tuple[list[Mutant], str]:
    path, functions, _ = TARGETS[target]
    src = (ROOT / path).read_text()
    tree = ast.parse(src)
    out = []
    for i, (node, fn, apply) in enumerate(_sites(tree, set(functions))):
        new = apply(copy.deepcopy(node))
        out.append(Mutant(target, i, fn, getattr(node, "lineno", 0), ast.unparse(node),
                          ast.unparse(new)))
    return out, src


def mutated_source(target: str, index: int, src: str) -> str:
    """`src` with mutant `index` of `target` applied (sites are counted in `src` itself, so
    editing the working tree during a run changes nothing)."""
    _, functions, _ = TARGETS[target]
    tree = ast.parse(src)
    node, _, apply = _sites(tree, set(functions))[index]
    new = apply(copy.deepcopy(node))

    class Swap(ast.NodeTransformer):
        def generic_visit(self, n):
            if n is node:
                return ast.copy_location(new, n)
            return super().generic_visit(n)

        def visit(self, n):
            if n is node:
                return ast.copy_location(new, n)
            return super().visit(n)

    tree = Swap().visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def run_one(m: Mutant, workdir: Path, timeout: int) -> tuple[Mutant, str]:
    path, _, tests = TARGETS[m.target]
    target = workdir / path
    original = target.read_text()
    target.write_text(mutated_source(m.target, m.index, original))
    try:
        env = {**os.environ, "PYTHONPATH": str(workdir), "PYTHONDONTWRITEBYTECODE": "1"}
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                            "--timeout", str(timeout), *tests], cwd=workdir, env=env,
                           capture_output=True, text=True, timeout=timeout * 3)
        status = "survived" if r.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        status = "killed (timeout)"
    finally:
        target.write_text(original)
    return m, status


def _positions(spec: str, n: int) -> list[int]:
    """'9,12,36-39,351-' → 1-based positions, in the order given, each once."""
    out: list[int] = []
    for part in filter(None, (x.strip() for x in spec.split(","))):
        lo, dash, hi = part.partition("-")
        first = int(lo)
        last = (int(hi) if hi else n) if dash else first
        out += [i for i in range(first, min(last, n) + 1) if i not in out]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", choices=sorted(TARGETS), help="targets (default: all)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=int, default=300, help="seconds per test run")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--pick", help="run only these positions of the list, e.g. 9,12,36-39,351-")
    args = p.parse_args(argv)
    todo: list[Mutant] = []
    for t in args.only or TARGETS:
        todo += mutants(t)[0]  # counted in the working tree, which the scratch copies snapshot
    if args.pick:
        todo = [todo[i - 1] for i in _positions(args.pick, len(todo))]
    if args.list:
        for m in todo:
            print(f"{m.name}: {m.before}  →  {m.after}")
        print(f"{len(todo)} mutants")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="abtest-mut-"))
    dirs = []
    for w in range(args.workers):
        d = tmp / f"w{w}"
        shutil.copytree(ROOT, d, ignore=shutil.ignore_patterns(".venv", ".git", "results",
                                                                "__pycache__", "*.egg-info"))
        dirs.append(d)
    # the unmutated copy must pass every test list, or a "kill" would mean nothing
    for t in sorted({m.target for m in todo}):
        env = {**os.environ, "PYTHONPATH": str(dirs[0]), "PYTHONDONTWRITEBYTECODE": "1"}
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                            *TARGETS[t][2]], cwd=dirs[0], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"the unmutated tests of {t} fail in the scratch copy:\n{r.stdout[-2000:]}",
                  file=sys.stderr)
            return 2
    t0 = time.monotonic()
    survived = []
    counts: dict[str, int] = {}
    free = list(dirs)
    import threading

    lock = threading.Lock()

    def job(m):
        with lock:
            d = free.pop()
        try:
            return run_one(m, d, args.timeout)
        finally:
            with lock:
                free.append(d)

    with ThreadPoolExecutor(args.workers) as pool:
        for i, (m, status) in enumerate(pool.map(job, todo), 1):
            counts[status.split()[0]] = counts.get(status.split()[0], 0) + 1
            if status == "survived":
                survived.append(m)
            print(f"[{i}/{len(todo)}] {status:>8}  {m.name}: {m.before}  →  {m.after}",
                  file=sys.stderr, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{len(todo)} mutants in {time.monotonic() - t0:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    by_target: dict[str, list] = {}
    for m in todo:
        by_target.setdefault(m.target, []).append(m)
    for t, ms in by_target.items():
        s = [m for m in survived if m.target == t]
        print(f"  {t}: {len(ms)} mutants, {len(s)} survived")
    if survived:
        print("\nsurvivors:")
        for m in survived:
            print(f"  {m.name}: {m.before}  →  {m.after}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
