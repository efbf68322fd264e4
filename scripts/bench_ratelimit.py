#!/usr/bin/env python3
"""How close abtest runs to a provider's rate limits, as ratios measured in one run.

A run of --n cases (the full default judge suite) against the loopback fake provider, whose
judge and generator have their own requests- and tokens-per-minute limits (answered 429 with
Retry-After past them, OpenAI's x-ratelimit-* headers on every reply), enforced one of two
ways (--providers):

  window      a sliding minute, a request's tokens its usage (the fake's first mode)
  bucket      as hosted providers do: continuous buckets refilled at the limit / 60 a second
              holding --burst seconds' worth, a request charged on arrival its prompt's
              characters / 4 + max_tokens

Five ways of running it, one after another, each against a fresh provider:

  adaptive    this code, no limit set anywhere (the default concurrency, 8 per model):
              paced by the provider's headers and 429s
  adaptive, no headers
              the same against a provider that sends no x-ratelimit-* headers (only 429s
              with Retry-After): the window and the pauses alone
  limits set  this code, each model's rpm and tpm in abtest.yaml
  fixed 4     the code before per-model limits (--baseline, a git ref), concurrency: 4
  fixed 32    the same, concurrency: 32

Time-scaled: with --scale S the provider's minute is 60/S seconds, every limit is S times
higher per real minute and the latency S times shorter, so the figures are those of the
stated limits (e.g. judge 600 rpm / 120,000 tpm) in 1/S of the time. Ratios do not depend
on S as long as abtest's own CPU is not the bottleneck (at S = 4 the run makes ~40
requests a second).

Printed per mode and model: requests/min ÷ the limit and tokens/min ÷ the limit over the run
(first request to last answer) and sustained (without the first and the last minute), the
share of requests answered 429, and the run's time ÷ its theoretical minimum (per model the
larger of requests ÷ rpm and tokens ÷ tpm; the slowest model sets it). Then cases finished,
and a resume check: a run with limits set, killed (SIGKILL) partway and resumed, must send
no call again whose answer was saved.

    python scripts/bench_ratelimit.py --n 400 --scale 4
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchlib import ROOT, make_project, responder
from fake_llm_server import FakeLLMServer

GEN, JUDGE = "bench-gen", "bench-judge"
RUN = ["run", "--fixture", "fixtures/bench", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]


def parse_limit(text: str) -> tuple[float, float]:
    rpm, _, tpm = text.partition("/")
    return float(rpm), float(tpm)


def config(url: str, *, concurrency: int | None, limits: dict | None, scale: float) -> str:
    """abtest.yaml for one mode; limits (bench units) become per real minute (x scale)."""
    def spec(model: str, extra: str) -> str:
        lim = ""
        if limits:
            rpm, tpm = limits[model]
            lim = f", rpm: {rpm * scale:g}, tpm: {tpm * scale:g}"
        return f'{{model: openai/{model}, api_base: "{url}"{extra}{lim}}}'

    text = (f"generator: {spec(GEN, ', max_tokens: 64')}\njudge: {spec(JUDGE, '')}\n"
            "timeout_s: 30\nmax_retries: 3\nretry_backoff_s: 0.05\n"
            "judges: [pairwise, faithfulness, coverage, abstention]\n")
    if concurrency is not None:
        text += f"concurrency: {concurrency}\n"
    return text


def baseline_tree(ref: str, into: Path) -> Path | None:
    """The package as it was at `ref` (git archive: the repository is only read)."""
    tar = into / "baseline.tar"
    with open(tar, "wb") as f:
        out = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "abtest"], stdout=f,
                             stderr=subprocess.PIPE)
    if out.returncode != 0:
        print(f"baseline {ref}: {out.stderr.decode().strip()}; the fixed rows are skipped")
        return None
    with tarfile.open(tar) as t:
        t.extractall(into / "baseline", filter="data")
    return into / "baseline"


def abtest_env(src: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(src), "PYTHONUNBUFFERED": "1"}


def scale_of(args, provider: str) -> float:
    """The time scale of a provider's rows (--bucket-scale for the bucket one)."""
    return args.bucket_scale if provider == "bucket" and args.bucket_scale else args.scale


def make_server(args, limits: dict, provider: str, headers: bool = True,
                max_seconds: float = 7200) -> FakeLLMServer:
    """The fake provider of one row: `window` (a sliding minute, usage) or `bucket`."""
    scale = scale_of(args, provider)
    extra: dict = {}
    if provider == "bucket":
        extra = {"bucket_s": args.burst / scale, "charge": "estimate"}
    return FakeLLMServer(latency=args.latency / scale, responder=responder, keep_alive=True,
                         max_seconds=max_seconds,
                         limits={m: {"rpm": r * scale, "tpm": t * scale}
                                 for m, (r, t) in limits.items()},
                         window_s=60.0 / scale, rate_headers=headers, **extra)


def analyse(srv: FakeLLMServer, limits: dict, scale: float, latency: float) -> dict:
    """Per model, from what the provider saw."""
    out = {}
    window = 60.0 / scale
    for model in (GEN, JUDGE):
        rows = [r for r in srv.requests if r.get("model") == model]
        if not rows:
            continue
        ok = [r for r in rows if r.get("status") == 200]
        first, last = rows[0]["ts"], max(r["ts"] for r in ok) + latency
        span = max(1e-9, last - first)
        rpm, tpm = (x * scale for x in limits[model])
        mid = [r for r in ok if first + window <= r["ts"] < last - latency - window]
        mid_span = last - latency - window - (first + window)
        n_ok, tok = len(ok), sum(r["tokens"] for r in ok)
        later = [r for r in rows if r["ts"] >= first + window]
        out[model] = {
            "requests": len(rows), "answered_429": len(rows) - n_ok, "tokens": tok,
            "late_429": (sum(r.get("status") == 429 for r in later) / len(later))
            if later else None,
            "span_s": span,
            "rpm_ratio": n_ok / span * 60 / rpm, "tpm_ratio": tok / span * 60 / tpm,
            "rpm_sustained": (len(mid) / mid_span * 60 / rpm) if mid_span > window else None,
            "tpm_sustained": (sum(r["tokens"] for r in mid) / mid_span * 60 / tpm)
            if mid_span > window else None,
            "min_s": max(n_ok / rpm, tok / tpm) * 60,
            "binds": "tpm" if tok / tpm >= n_ok / rpm else "rpm"}
    return out


def run_mode(name: str, args, src: Path, work: Path, limits: dict, *, concurrency,
             set_limits: bool, headers: bool = True, provider: str = "window") -> dict:
    scale = scale_of(args, provider)
    lat = args.latency / scale
    srv = make_server(args, limits, provider, headers)
    url = srv.start()
    try:
        proj = make_project(work / f"{provider}-{name}".replace(" ", "-").replace(",", ""),
                            args.n, url, 8, filler=args.filler)
        (proj / "abtest.yaml").write_text(config(url, concurrency=concurrency,
                                                 limits=limits if set_limits else None,
                                                 scale=scale))
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "abtest.cli", *RUN], cwd=proj,
                             env=abtest_env(src), capture_output=True, text=True)
        wall = time.monotonic() - t0
    finally:
        srv.stop()
    per = analyse(srv, limits, scale, lat)
    unfinished = 0
    for line in out.stderr.splitlines():
        if "unfinished cases:" in line:
            unfinished = len(line.split("unfinished cases:", 1)[1].split(","))
    rates = [ln.split("rate: ", 1)[1] for ln in out.stderr.splitlines() if "rate: " in ln]
    theo = max(m["min_s"] for m in per.values())
    span = max(r["ts"] for r in srv.requests) + lat - min(r["ts"] for r in srv.requests)
    return {"mode": name, "provider": provider, "rc": out.returncode, "unfinished": unfinished, "models": per,
            "span_s": span, "theoretical_s": theo, "wall_s": wall,
            "rate_lines": rates[-2:], "stderr": out.stderr[-1500:] if out.returncode not in
            (0, 3) else ""}


def resume_check(args, work: Path, limits: dict) -> dict:
    """Limits set; SIGKILL after a third of the requests; --resume; no saved call again."""
    from abtest.store import Store

    scale, n = args.scale, max(40, args.n // 4)
    srv = make_server(args, limits, "window", max_seconds=3600)
    url = srv.start()
    try:
        proj = make_project(work / "resume", n, url, 8, filler=args.filler)
        (proj / "abtest.yaml").write_text(config(url, concurrency=None, limits=limits,
                                                 scale=scale))
        env = abtest_env(ROOT)
        proc = subprocess.Popen([sys.executable, "-m", "abtest.cli", *RUN], cwd=proj, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        want = int(n * 9.6 / 3)
        while len(srv.requests) < want and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store_path = proj / "results" / "abtest.duckdb"

        def calls():
            s = Store(store_path, read_only=True)
            try:
                rows = s._rows("SELECT call_hash, error, cached FROM llm_calls ORDER BY id", [])
            finally:
                s.close()
            by: dict[str, list] = {}
            for r in rows:
                by.setdefault(r["call_hash"], []).append(r)
            return by

        before = calls()
        saved = {h for h, rows in before.items() if any(r["error"] is None for r in rows)}
        out = subprocess.run([sys.executable, "-m", "abtest.cli", *RUN, "--resume"], cwd=proj,
                             env=env, capture_output=True, text=True)
        after = calls()
        again = {h for h, rows in after.items() if h in saved
                 for r in rows[len(before.get(h, [])):] if not r["cached"]}
        rejected = sum(1 for r in srv.requests if r.get("status") == 429)
        return {"cases": n, "killed_after": want, "saved_before": len(saved),
                "sent_again": len(again), "rc": out.returncode, "answered_429": rejected,
                "requests": len(srv.requests)}
    finally:
        srv.stop()


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400, help="cases (at least 400 for the figures)")
    ap.add_argument("--scale", type=float, default=4.0, help="time scale (see above)")
    ap.add_argument("--latency", type=float, default=0.5,
                    help="the provider's latency in (unscaled) seconds")
    ap.add_argument("--judge", default="600/120000", help="judge RPM/TPM")
    ap.add_argument("--generator", default="300/60000", help="generator RPM/TPM")
    ap.add_argument("--filler", type=int, default=2,
                    help="filler sentences per chunk (longer prompts: tokens bind)")
    ap.add_argument("--baseline", default="cff7dc4",
                    help="git ref of the code before per-model limits (the fixed rows)")
    ap.add_argument("--concurrency", type=int, default=None,
                    help="top-level concurrency of the adaptive and limits rows (default: "
                         "not set, so 8 per model)")
    ap.add_argument("--modes", default="adaptive,noheaders,limits,fixed4,fixed32")
    ap.add_argument("--providers", default="window,bucket",
                    help="how the fake enforces its limits (see above); each mode runs against "
                         "each")
    ap.add_argument("--bucket-scale", type=float, default=None,
                    help="time scale of the bucket provider's rows (default --scale): its "
                         "estimate charging makes the tokens bind at far fewer requests a "
                         "second, so it can be scaled further for the same CPU")
    ap.add_argument("--burst", type=float, default=3.0,
                    help="seconds' worth a bucket provider holds (unscaled)")
    ap.add_argument("--no-resume", action="store_true")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    limits = {JUDGE: parse_limit(args.judge), GEN: parse_limit(args.generator)}
    modes = args.modes.split(",")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = baseline_tree(args.baseline, work) if any(m.startswith("fixed") for m in modes) \
            else None
        plan = [("adaptive", ROOT, args.concurrency, False, True),
                ("adaptive, no headers", ROOT, args.concurrency, False, False),
                ("limits set", ROOT, args.concurrency, True, True),
                ("fixed 4", base, 4, False, True), ("fixed 32", base, 32, False, True)]
        keys = {"adaptive": "adaptive", "adaptive, no headers": "noheaders",
                "limits set": "limits", "fixed 4": "fixed4", "fixed 32": "fixed32"}
        for provider in args.providers.split(","):
            for name, src, conc, set_limits, headers in plan:
                if keys[name] not in modes or src is None:
                    continue
                print(f"... {provider}: {name}", flush=True)
                results.append(run_mode(name, args, src, work, limits, concurrency=conc,
                                        set_limits=set_limits, headers=headers,
                                        provider=provider))
        resume = None if args.no_resume else resume_check(args, work, limits)

    print(f"\n{args.n} cases; judge {args.judge}, generator {args.generator} (rpm/tpm); "
          f"latency {args.latency} s; time scale x{args.scale:g} (the provider's minute is "
          f"{60 / args.scale:g} s); bucket provider: time scale "
          f"x{scale_of(args, 'bucket'):g}, holds {args.burst:g} s' worth; "
          f"baseline {args.baseline}\n")
    print("| provider | mode | model (binds) | requests | 429 | 429 after the first minute | "
          "req/min ÷ rpm: run / sustained | tok/min ÷ tpm: run / sustained | time ÷ minimum | "
          "cases finished |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for i, (model, m) in enumerate(sorted(r["models"].items(), key=lambda kv: kv[0] != JUDGE)):
            head = (r["provider"], r["mode"], f"{r['span_s'] / r['theoretical_s']:.3f}",
                    f"{args.n - r['unfinished']} / {args.n} (exit {r['rc']})") if i == 0 \
                else ("", "", "", "")
            late = "—" if m["late_429"] is None else f"{m['late_429']:.2%}"
            print(f"| {head[0]} | {head[1]} | {model} ({m['binds']}) | {m['requests']:,} | "
                  f"{m['answered_429'] / m['requests']:.2%} | {late} | {pct(m['rpm_ratio'])} / "
                  f"{pct(m['rpm_sustained'])} | {pct(m['tpm_ratio'])} / "
                  f"{pct(m['tpm_sustained'])} | {head[2]} | {head[3]} |")
    print()
    for r in results:
        print(f"{r['provider']}, {r['mode']}: provider busy {r['span_s']:.1f} s for a minimum of "
              f"{r['theoretical_s']:.1f} s; abtest process {r['wall_s']:.1f} s")
        for line in r["rate_lines"]:
            print(f"    rate: {line}")
        if r["stderr"]:
            print(r["stderr"])
    if resume:
        print(f"\nresume (window provider): {resume['cases']} cases, limits set, SIGKILL after "
              f"{resume['killed_after']} requests ({resume['saved_before']} answers saved); "
              f"--resume exit {resume['rc']}, calls sent again whose answer was saved: "
              f"{resume['sent_again']} (target 0); {resume['answered_429']} of "
              f"{resume['requests']} requests answered 429")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results,
                                               "resume": resume}, indent=1, default=str))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
