#!/usr/bin/env python3
"""abtest's own error rates, measured in a synthetic world whose truth is known.

The world: depots whose opening hours are in the retrieved context (answerable) or not
(unanswerable). Per case and variant the generator gives a good answer (the right hour
and a second supported fact, cited), a refusal, or a hallucination (a wrong hour, and a
second sentence that is supported half the time), at rates set per variant; in the
SOFT_REFUSAL scenario B declines instead, softly ("The documents do not say when Depot 0007
opens. They do say that Depot 0007 is located on Elm Street [q0007-loc]."). Judges know
the truth and are honest unless a scenario makes them noisy (the claim verifier flips
verdicts), position-biased (the pairwise judge says "first") or length-biased (it picks
the longer answer). Humans label review items from the truth.

Two levels:

* score level: the world's verdicts go straight into abtest's metric and claim code
  (`abtest.reporting.metrics.compute_metrics`, `abtest.reporting.claim.licensed_claim`), with
  the judges taken as validated: thousands of experiments a minute, for the false-licence
  rate under no true difference and the power under a true one, N = 60 … 400; and, at
  score level only, cases repeated or correlated in groups (passed to compute_metrics as
  abtest.core.groups would give them, and also analysed ignoring them, as before groups) and the
  rules on thin evidence (few references, the claim cap, the pairwise rule);
* end to end: each experiment goes through the real path — `abtest capture` (jsonl
  import), `abtest run` against a loopback OpenAI-compatible fake (scripts/fake_llm_server.py)
  playing generator and judges, `abtest review export`, simulated humans,
  `abtest review import`, `abtest report`, `abtest gate` — for every trap scenario.

    python scripts/validity_sim.py                       # both levels, the docs' table
    python scripts/validity_sim.py --quick               # a minute: small counts (CI smoke)
    python scripts/validity_sim.py --level score --score-experiments 2000
    python scripts/validity_sim.py --group-size-check    # grouped tests' size, few groups
    python scripts/validity_sim.py --small-n             # 10–200 cases, ties, rare events

It prints one table and exits 1 when a scenario misses its sound result.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from validity_world import (ALPHA, GROUPED, HEDGE, NULL_TYPE, ROOT, SCENARIOS, TRAP_REASON,  # noqa: F401
                            Scenario, World, _median, fixture_view, judgments,
                            licensed_claim_of, population_truth, score_experiment,
                            validated_report)

# --------------------------------------------------------------------------- end to end

VARIANT = """\
name: sim-{v}
system: |
  [sim-variant {v}] Answer only from the context. Cite chunks as [chunk-id].
user: |
  <context>
  {{{{ context }}}}
  </context>
  <question>{{{{ question }}}}</question>
"""


def e2e_experiment(sc: Scenario, n: int, seed: int, server, workdir: Path) -> dict:
    """capture → run → review export → humans → review import → report → gate, through the
    CLI in this process, against the loopback fake provider `server`; or, when `server` is
    None, against the same world answering in this process through litellm's custom-provider
    path (`abtest.llm.register_scripted_provider`): the same answers through the same code
    from the CLI to litellm, without the HTTP round trip (6 s a scenario instead of 9–12 s)."""
    import csv

    from click.testing import CliRunner

    from abtest.cli import cli

    w = World(sc, n, seed)
    if server is None:
        from abtest.llm import register_scripted_provider

        register_scripted_provider(
            "sim", lambda messages, req: w.respond({"messages": messages, **req}))
        models = ("generator: {model: sim/sim-gen, max_tokens: 200}\n"
                  "judge: {model: sim/sim-judge}\n")
    else:
        server.responder = w.respond
        models = (f"generator: {{model: openai/sim-gen, api_base: '{server.base_url}', "
                  "api_key_env: SIM_KEY, max_tokens: 200}\n"
                  f"judge: {{model: openai/sim-judge, api_base: '{server.base_url}', "
                  "api_key_env: SIM_KEY}\n")
    d = workdir / f"{sc.name}-{seed}"
    (d / "variants").mkdir(parents=True)
    (d / "abtest.yaml").write_text(
        models +
        "concurrency: 16\ntimeout_s: 30\nmax_retries: 2\nretry_backoff_s: 0.01\n"
        "store: results/abtest.duckdb\njudges: [pairwise, faithfulness, coverage, abstention]\n")
    for v in "AB":
        (d / "variants" / f"{v.lower()}.yaml").write_text(VARIANT.format(v=v))
    with open(d / "questions.jsonl", "w") as fh:
        for c in w.cases:
            q = {"id": c.id, "question": c.question, "answerable": c.answerable}
            if c.answerable:
                q["key_points"] = [c.hour]
            fh.write(json.dumps(q) + "\n")
    with open(d / "captured.jsonl", "w") as fh:
        for c in w.cases:
            fh.write(json.dumps({"id": c.id, "question": c.question,
                                 "context": [{"id": i, "text": t} for i, t in c.chunks]}) + "\n")
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(d)
    try:
        def cli_(*args):
            r = runner.invoke(cli, list(args), catch_exceptions=False)
            return r.exit_code, r.stdout, r.stderr

        code, out, err = cli_("capture", "questions.jsonl", "--retriever", "jsonl:captured.jsonl",
                              "--out", "fixtures/sim", "--corpus-version", f"sim-{seed}", "--k", "5")
        assert code == 0, err
        code, out, err = cli_("run", "--fixture", "fixtures/sim", "--a", "variants/a.yaml",
                              "--b", "variants/b.yaml")
        assert code == 0, err
        run_id = out.strip().splitlines()[-1]
        code, out, err = cli_("review", "export", run_id, "--out", "pack", "--n", "40")
        assert code == 0, err
        items = [json.loads(x) for x in (d / "pack" / "items.jsonl").read_text().splitlines()]
        with open(d / "labels.csv", "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["item_id", "label"])
            for it in items:
                wr.writerow([it["item_id"], w.human_label(it)])
        code, out, err = cli_("review", "import", run_id, "labels.csv", "--reviewer", "sim")
        assert code == 0, err
        code, out, err = cli_("report", run_id, "--format", "json", "--out", "report.json")
        assert code == 0, err
        gate_code, _, _ = cli_("gate", run_id)
    finally:
        os.chdir(cwd)
    rep = json.loads((d / "report.json").read_text())
    return {"metrics": rep["metrics"], "claim": rep["claim"], "truth": w.true_rates(),
            "report": rep, "gate": gate_code}


# --------------------------------------------------------------------------- checks

def significant_any(m: dict) -> bool:
    fam = [m.get("pairwise"), m.get("faithfulness"), m.get("coverage"),
           (m.get("abstention") or {}).get("answerable"),
           (m.get("abstention") or {}).get("unanswerable")]
    return any(x and (x.get("significant") or x.get("p_holm") is not None and x["p_holm"] <= ALPHA)
               for x in fam)


def trap_ok(sc: Scenario, r: dict, pop: dict) -> tuple[bool, str]:
    """Did this experiment get the scenario's sound result? (False, why) otherwise."""
    m, t = r["metrics"], r["truth"]
    if sc.name == "selective_refusal" and r["claim"]["licensed"]:
        return False, "licensed"
    if sc.name in TRAP_REASON:
        if r["claim"]["licensed"]:
            return False, "licensed"
        if not any(TRAP_REASON[sc.name] in x for x in r["claim"]["reasons"]):
            return False, f"withheld without the reason '{TRAP_REASON[sc.name]}'"
    if sc.name == "hedged_hallucination":
        f = m["faithfulness"]
        if abs(f["b"] - t["faith_b"]) > 1e-9:
            return False, f"B faithfulness {f['b']:.3f} vs true {t['faith_b']:.3f}"
        inc = sum(1 for i in r["report"]["incidents"] if i["variant"] == "B")
        if inc != t["incidents_b"]:
            return False, f"{inc} B incidents vs {t['incidents_b']} true"
        if r.get("gate") != 1:
            return False, f"gate exit {r.get('gate')}"
    if sc.name == "noisy_verifier":
        if r["claim"]["licensed"]:
            return False, "licensed"
        val = r["report"]["judge_validation"]
        if (val.get("faithfulness") or val).get("validated"):  # schema 1 pooled every label
            return False, "faithfulness judge validated"
    if sc.name == "length_biased_judge":
        pw = m["pairwise"]
        b_win = pw.get("direction") == "B" or (  # schema 1 had no direction
            pw.get("p_holm") is not None and pw["p_holm"] <= ALPHA and pw["b_wins"] > pw["a_wins"])
        if b_win and not (pw.get("length_bias") or {}).get("caveat"):
            return False, "a significant B pairwise win without the length caveat"
    if sc.name == "position_biased_judge":
        pw = m["pairwise"]
        n = pw["n"]
        for key, got in (("position_consistency", pw["position_consistency"]["estimate"]),
                         ("first_position_win_rate", pw["first_position_win_rate"])):
            se = math.sqrt(pop[key] * (1 - pop[key]) / n)
            if abs(got - pop[key]) > 4 * se:
                return False, f"{key} {got:.3f} vs truth {pop[key]:.3f}"
    return True, ""


@dataclass
class Row:
    scenario: str
    level: str
    n: int
    experiments: int = 0
    licensed: int = 0
    significant: int = 0
    trap_fail: int = 0
    ci_cover: int = 0
    ci_total: int = 0
    rep: dict = field(default_factory=lambda: {k: [] for k in ("fa", "fb", "ca", "cb", "ra", "rb",
                                                                "pc", "fp")})
    tru: dict = field(default_factory=lambda: {k: [] for k in ("fa", "fb", "ca", "cb", "ra", "rb")})
    seconds: float = 0.0
    why: list = field(default_factory=list)
    # the same experiments under the inference before groups / the evidence floor
    old_licensed: int = 0
    old_significant: int = 0
    old_ci_cover: int = 0
    old_ci_total: int = 0
    old_n: int = 0
    width_ratio: list = field(default_factory=list)   # iid CI width / grouped CI width
    deff: list = field(default_factory=list)
    old_rb: list = field(default_factory=list)        # B's answerable refusal rate reported
    old_ni: int = 0                                   # answerable-refusal NI held

    def add(self, sc: Scenario, r: dict, pop: dict) -> None:
        m, t = r["metrics"], r["truth"]
        self.experiments += 1
        if r.get("old"):
            om = r["old"]["metrics"]
            self.old_n += 1
            self.old_licensed += bool(r["old"]["claim"]["licensed"])
            self.old_significant += significant_any(om)
            of, f = om.get("faithfulness") or {}, m.get("faithfulness") or {}
            if of.get("ci_low") is not None:
                self.old_ci_total += 1
                self.old_ci_cover += of["ci_low"] <= pop["faith_effect"] <= of["ci_high"]
                if f.get("ci_low") is not None and f["ci_high"] > f["ci_low"]:
                    self.width_ratio.append((of["ci_high"] - of["ci_low"])
                                            / (f["ci_high"] - f["ci_low"]))
            if f.get("design_effect") is not None:
                self.deff.append(f["design_effect"])
            oab = (om.get("abstention") or {}).get("answerable") or {}
            if oab.get("b") is not None:
                self.old_rb.append(oab["b"])
            self.old_ni += bool((oab.get("noninferiority") or {}).get("holds"))
        self.licensed += bool(r["claim"]["licensed"])
        self.significant += significant_any(m)
        ok, why = trap_ok(sc, r, pop)
        if not ok:
            self.trap_fail += 1
            self.why.append(why)
        f = m.get("faithfulness") or {}
        if f.get("ci_low") is not None:
            self.ci_total += 1
            self.ci_cover += f["ci_low"] <= pop["faith_effect"] <= f["ci_high"]
        c = m.get("coverage") or {}
        ab = (m.get("abstention") or {}).get("answerable") or {}
        for k, v in (("fa", f.get("a")), ("fb", f.get("b")), ("ca", c.get("a")), ("cb", c.get("b")),
                     ("ra", ab.get("a")), ("rb", ab.get("b"))):
            if v is not None:
                self.rep[k].append(v)
        for k, tk in (("fa", "faith_a"), ("fb", "faith_b"), ("ca", "cov_a"), ("cb", "cov_b"),
                      ("ra", "ref_a"), ("rb", "ref_b")):
            if t[tk] is not None:
                self.tru[k].append(t[tk])
        pw = m.get("pairwise") or {}
        if pw:
            self.rep["pc"].append(pw["position_consistency"]["estimate"])
            self.rep["fp"].append(pw["first_position_win_rate"])


def verdict(sc: Scenario, row: Row) -> tuple[bool, str]:
    """The scenario's sound result over all its experiments."""
    e = row.experiments
    rate = row.licensed / e if e else 0.0
    if row.trap_fail:
        return False, f"{row.trap_fail} experiment(s) wrong: {row.why[0]}"
    if sc.name in NULL_TYPE:
        # a binomial allowance: the observed rate may exceed α by sampling error alone
        lim = ALPHA + 2.33 * math.sqrt(ALPHA * (1 - ALPHA) / e)
        if rate > lim or row.significant / e > lim:
            return False, f"licence {rate:.3f} / significant {row.significant / e:.3f} > α"
        return True, "ok"
    if sc.name == "true_effect" and (row.level == "e2e" or row.n == 200):
        # the bar is at N = 200; other sizes are reported, not judged
        return (rate >= 0.80, "ok" if rate >= 0.80 else f"power {rate:.2f} < 0.80")
    if sc.name in ("selective_refusal", "noisy_verifier", *TRAP_REASON) and row.licensed:
        return False, "licensed"
    return True, "ok"


# --------------------------------------------------------------------------- main

def _fmt_pair(rep: list, tru: list) -> str:
    if not rep:
        return "n/a"
    r = sum(rep) / len(rep)
    t = sum(tru) / len(tru) if tru else float("nan")
    return f"{r:.3f} / {t:.3f}"


def run_all(args) -> int:
    from abtest.core.models import Config

    cfg = Config()
    rows: list[tuple[Scenario, Row, bool, str]] = []
    wanted = [sc for sc in SCENARIOS if args.level != "e2e" and sc.score_level
              and (not args.only_score or sc.name in args.only_score)
              or args.level != "score" and sc.e2e and (not args.only or sc.name in args.only)]
    pops = {sc.name: population_truth(sc) for sc in wanted}
    if args.level in ("score", "both"):
        for sc in SCENARIOS:
            if not sc.score_level or args.only_score and sc.name not in args.only_score:
                continue
            for n in sc.sizes or args.sizes:
                t0 = time.monotonic()
                k = args.score_experiments if sc.name in NULL_TYPE + ("true_effect",) else \
                    max(50, args.score_experiments // 5)
                row = Row(sc.name, "score", n)
                for i in range(k):
                    r = score_experiment(sc, n, 10_000 * n + i, cfg)
                    row.n = r["metrics"]["faithfulness"]["n"] + r["metrics"]["faithfulness"][
                        "n_dropped"]
                    row.add(sc, r, pops[sc.name])
                row.seconds = time.monotonic() - t0
                ok, why = verdict(sc, row)
                rows.append((sc, row, ok, why))
                print(f"  score {sc.name} N={n}: {row.experiments} in {row.seconds:.0f}s, "
                      f"licence {row.licensed / row.experiments:.3f}", file=sys.stderr)
    if args.level in ("e2e", "both"):
        from fake_llm_server import FakeLLMServer

        os.environ["SIM_KEY"] = "sk-sim-not-a-secret"
        scen = [sc for sc in SCENARIOS if sc.e2e and (not args.only or sc.name in args.only)]
        with FakeLLMServer(max_seconds=None, keep_alive=True) as srv, \
                tempfile.TemporaryDirectory(prefix="abtest-sim-") as tmp:
            for sc in scen:
                row = Row(sc.name, "e2e", args.e2e_n)
                t0 = time.monotonic()
                for i in range(args.e2e_experiments):
                    r = e2e_experiment(sc, args.e2e_n, 7_000 + i, srv, Path(tmp))
                    row.add(sc, r, pops[sc.name])
                row.seconds = time.monotonic() - t0
                ok, why = verdict(sc, row)
                rows.append((sc, row, ok, why))
                print(f"  e2e {sc.name}: {row.experiments} in {row.seconds:.0f}s, licence "
                      f"{row.licensed}/{row.experiments}", file=sys.stderr)
    print_table(rows, pops, args)
    return 0 if all(ok for _, _, ok, _ in rows) else 1


def print_table(rows, pops, args) -> None:
    head = ["scenario", "level", "N", "experiments", "licence rate", "significant rate",
            "faithfulness A rep/true", "faithfulness B rep/true", "coverage B rep/true",
            "refusal B (answerable) rep/true", "CI covers true effect", "sound result", "met"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sc, row, ok, why in rows:
        e = row.experiments or 1
        cover = f"{row.ci_cover / row.ci_total:.3f}" if row.ci_total else "n/a"
        extra = ""
        if sc.name == "position_biased_judge" and row.rep["pc"]:
            p = pops[sc.name]
            extra = (f" (consistency {sum(row.rep['pc']) / len(row.rep['pc']):.3f} vs "
                     f"{p['position_consistency']:.3f}; first-position "
                     f"{sum(row.rep['fp']) / len(row.rep['fp']):.3f} vs "
                     f"{p['first_position_win_rate']:.3f})")
        out.append("| " + " | ".join([
            sc.name, row.level, str(row.n), str(row.experiments), f"{row.licensed / e:.3f}",
            f"{row.significant / e:.3f}", _fmt_pair(row.rep["fa"], row.tru["fa"]),
            _fmt_pair(row.rep["fb"], row.tru["fb"]), _fmt_pair(row.rep["cb"], row.tru["cb"]),
            _fmt_pair(row.rep["rb"], row.tru["rb"]), cover, sc.sound + extra,
            "yes" if ok else f"**NO** ({why})"]) + " |")
    print("\n".join(out))
    for sc, row, _, _ in rows:
        if not row.old_n:
            continue
        e = row.old_n
        if sc.name in GROUPED:
            cover = f"{row.old_ci_cover / row.old_ci_total:.3f}" if row.old_ci_total else "n/a"
            ratio = (f"; the iid faithfulness CI is {_median(row.width_ratio):.2f}× as wide as "
                     f"the grouped one (median), design effect {_median(row.deff):.2f} (median)"
                     if row.width_ratio and row.deff else "")
            print(f"\n{sc.name} ignoring groups (the iid inference before groups, same "
                  f"experiments): licensed {row.old_licensed / e:.3f}, significant "
                  f"{row.old_significant / e:.3f}, CI covers true effect {cover}{ratio}.")
        elif sc.soft_refusal:
            rb = f"{sum(row.old_rb) / len(row.old_rb):.3f}" if row.old_rb else "n/a"
            print(f"\n{sc.name} under the rule before issue 43 (a soft refusal's claim overruled "
                  f"\"abstained\": counted as answered; same experiments): licensed "
                  f"{row.old_licensed / e:.3f}, significant {row.old_significant / e:.3f}, "
                  f"refusal B (answerable) reported {rb}, refusal non-inferiority held "
                  f"{row.old_ni / e:.3f}.")
        else:
            print(f"\n{sc.name} without the minimum-evidence floor (same experiments): licensed "
                  f"{row.old_licensed / e:.3f}.")
    effects = ", ".join(f"{k} {v['faith_effect']:+.4f}" for k, v in pops.items())
    print(f"\nα = {ALPHA}; rep/true = mean reported value / mean realised truth over the "
          "experiments; 'significant' = any Holm family member significant (either direction); "
          "CI coverage = share of faithfulness CIs containing the population effect "
          f"({effects}).")


def group_size_check(draws: int = 4000, seed: int = 43) -> str:
    """The size of abtest's grouped tests under no difference, with few groups
    (docs/CLAIM_STATISTICS.md §10): the cluster-robust t (CR2) read on G − 1 and on Bell–McCaffrey
    df, and Durkalski's McNemar, at G = 5 … 50 groups of unequal sizes."""
    import numpy as np

    from abtest import stats as S

    rng = np.random.default_rng(seed)
    designs = {"equal groups of 8": lambda g: np.full(g, 8),
               "sizes 1–12": lambda g: rng.integers(1, 13, g)}
    out = ["| design | groups | CR2, G − 1 df: 5 % / 1 % | CR2, Bell–McCaffrey df: 5 % / 1 % |",
           "|---|---|---|---|"]
    for name, skew in (("equal groups of 8", False), ("sizes 1–12", False),
                       ("sizes 1–12, skewed group effect", True)):
        sizes_of = designs["sizes 1–12" if skew else name]
        for g in (5, 10, 20, 30, 50):
            p = np.empty((draws, 2))
            for k in range(draws):
                sizes = sizes_of(g)
                lab = np.repeat(np.arange(g), sizes)
                u = (rng.choice([-0.3, 0.1], size=g, p=[0.25, 0.75]) if skew
                     else rng.normal(0, 0.2, g))
                x = rng.random(lab.size)
                d = np.clip(np.where(x < 0.15, -0.5, np.where(x < 0.3, 0.5, 0.0)) + u[lab], -1, 1)
                for j, dfm in enumerate(("G-1", "bm")):
                    r = S.clustered_paired_t(np.zeros(d.size), d, lab.tolist(), df_method=dfm)
                    p[k, j] = 1.0 if r.p_value is None else r.p_value
            out.append(f"| {name} | {g} | {np.mean(p[:, 0] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 0] <= 0.01):.3f} | {np.mean(p[:, 1] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 1] <= 0.01):.3f} |")
    out += ["", "| design | groups | Durkalski: 5 % / 1 % | McNemar ignoring groups: 5 % / 1 % |",
            "|---|---|---|---|"]
    for repeats in (False, True):
        for g in (10, 20, 30, 50, 100):
            p = np.empty((draws, 2))
            for k in range(draws):
                sizes = rng.integers(3, 7, g) if repeats else rng.integers(1, 13, g)
                b = np.zeros(g, int)
                c = np.zeros(g, int)
                for i, n_g in enumerate(sizes):
                    if repeats:   # a repeated case: all its copies discordant the same way, or none
                        if rng.random() < 0.15:
                            (b if rng.random() < 0.5 else c)[i] = n_g
                        continue
                    q = 0.5 + 0.35 * rng.choice([-1, 1])   # the group leans one way
                    disc = rng.random(n_g) < 0.15
                    side = rng.random(n_g) < q
                    b[i], c[i] = np.sum(disc & side), np.sum(disc & ~side)
                p[k, 0] = S.clustered_mcnemar(b.tolist(), c.tolist()).p_value
                p[k, 1] = S.mcnemar(int(b.sum()), int(c.sum()), method="chi2").p_value
            name = "repeats, 3–6 copies" if repeats else "sizes 1–12, group leans ±0.35"
            out.append(f"| {name} | {g} | {np.mean(p[:, 0] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 0] <= 0.01):.3f} | {np.mean(p[:, 1] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 1] <= 0.01):.3f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--level", choices=("score", "e2e", "both"), default="both")
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                   default=[60, 100, 200, 400], help="score-level N values")
    p.add_argument("--score-experiments", type=int, default=500)
    p.add_argument("--e2e-experiments", type=int, default=20)
    p.add_argument("--e2e-n", type=int, default=200)
    p.add_argument("--only", nargs="*", help="end-to-end scenarios to run (default: all)")
    p.add_argument("--only-score", nargs="*", help="score-level scenarios to run (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="small counts for a smoke run: 40 score experiments at N=200, 1 e2e "
                        "experiment per scenario at N=140")
    p.add_argument("--sequential", action="store_true",
                   help="sequential runs (anytime-valid looks): validity_sim_sequential.py")
    p.add_argument("--look", type=int, default=20, help="--sequential: units per look")
    p.add_argument("--sequential-experiments", type=int, default=1000,
                   help="--sequential: experiments for NULL and ALT (the others a fifth)")
    p.add_argument("--small-n", action="store_true",
                   help="the small-N family of issue 53 (tied scores, rare refusals, few groups, "
                        "anytime looks): validity_sim_small.py")
    p.add_argument("--group-size-check", action="store_true",
                   help="only the size of the grouped tests with few groups (CLAIM_STATISTICS.md §10)")
    args = p.parse_args(argv)
    if args.group_size_check:
        print(group_size_check())
        return 0
    if args.small_n:
        import validity_sim_small as small

        return small.run(200 if args.quick else 2000)
    if args.sequential:
        import validity_sim_sequential as seq

        k = 60 if args.quick else args.sequential_experiments
        return seq.run(k, max(20, k // 5), args.look, min(300, k), args.quick)
    if args.quick:
        # 140 cases: 35 unanswerable, enough for the 0.10 abstention margin's floor (33)
        args.sizes, args.score_experiments = [200], 40
        args.e2e_experiments, args.e2e_n = 1, 140
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
