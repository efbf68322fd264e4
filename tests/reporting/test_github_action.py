"""`abtest report --format github`, the comment poster and the GitHub Action's script, run
locally: a fake GITHUB_* environment and a loopback stand-in for GitHub's comments API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import Brain, install, make_project, send_json
from support.cli import abtest_run, python_run, with_abtest_on_path

# what `python -m abtest.reporting.pr_comment` runs (its `__main__` guard)
POSTER = "import sys; from abtest.reporting.pr_comment import main; sys.exit(main())"

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / ".github" / "actions" / "abtest"
RUN = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]
TOKEN = "ghs_fake_token_0123456789abcdef"


class FakeGitHub:
    """Issue comments of one repository, as GitHub's REST API serves them (paged by 100)."""

    def __init__(self, repo: str = "acme/rag"):
        self.repo, self.comments, self.next_id = repo, [], 1000
        self.calls: list[tuple[str, str]] = []
        self.foreign: set[int] = set()   # comments the token may not edit
        self.auth: list[str] = []
        gh = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                send_json(self, code, obj)

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def _route(self, method):
                gh.calls.append((method, self.path))
                gh.auth.append(self.headers.get("Authorization", ""))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"message": "Bad credentials"})
                u = urlparse(self.path)
                parts = u.path.strip("/").split("/")
                if parts[:3] != ["repos", *gh.repo.split("/")]:
                    return self._send(404, {"message": "Not Found"})
                if method == "GET" and parts[3:4] == ["issues"] and parts[5:] == ["comments"]:
                    q = parse_qs(u.query)
                    per, page = int(q["per_page"][0]), int(q["page"][0])
                    on = [c for c in gh.comments if c["issue"] == int(parts[4])]
                    return self._send(200, on[(page - 1) * per: page * per])
                if method == "POST" and parts[3:4] == ["issues"] and parts[5:] == ["comments"]:
                    gh.next_id += 1
                    c = {"id": gh.next_id, "issue": int(parts[4]), "body": self._body()["body"]}
                    gh.comments.append(c)
                    return self._send(201, c)
                if method == "PATCH" and parts[3:5] == ["issues", "comments"]:
                    cid = int(parts[5])
                    c = next((c for c in gh.comments if c["id"] == cid), None)
                    if c is None:
                        return self._send(404, {"message": "Not Found"})
                    if cid in gh.foreign:
                        return self._send(403, {"message": "Resource not accessible by integration"})
                    c["body"] = self._body()["body"]
                    return self._send(200, c)
                return self._send(404, {"message": "Not Found"})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def github():
    gh = FakeGitHub()
    yield gh
    gh.close()


def _env(gh, tmp_path, number=17, **extra):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": number}}))
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": gh.repo, "GITHUB_EVENT_PATH": str(event),
            "GITHUB_API_URL": gh.url, **extra}


# --------------------------------------------------------------------------- the comment text

def _report(tmp_path, monkeypatch):
    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    assert CliRunner().invoke(cli, RUN).exit_code in (0, 1)
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    return p, rep


def test_github_format_leads_with_the_claim_then_gate_metrics_and_flipped(tmp_path, monkeypatch):
    p, rep = _report(tmp_path, monkeypatch)
    r = CliRunner().invoke(cli, ["report", "latest", "--format", "github"])
    assert r.exit_code == 0, r.stderr
    md = r.stdout
    assert md.startswith("<!-- abtest-report -->\n### abtest: B `grounded` vs A `plain`")
    claim_at = md.index("No claim is licensed") if not rep["claim"]["licensed"] else \
        md.index("Licensed claim")
    assert claim_at < md.index("**Gate: " + rep["gate"]["decision"]) < md.index("| metric |")
    for reason in rep["claim"]["reasons"]:
        assert reason.replace("|", "&#124;")[:120] in md.replace("&#x27;", "'")
    pw = rep["metrics"]["pairwise"]
    assert f"| pairwise | {pw['n']} |" in md
    flipped = [x["case_id"] for x in rep["per_case"] if x.get("flipped")]
    if flipped:
        assert "<details><summary>Flipped cases" in md and md.count("</details>") == 1
    assert len(md) <= 60_000


def test_github_comment_stays_bounded_and_inert_whatever_the_text(tmp_path, monkeypatch):
    """Hostile or enormous text: no mention, no markup, never over 60,000 characters."""
    from abtest.reporting.github import render_github

    p, rep = _report(tmp_path, monkeypatch)
    worst = "@|<&" * 5000        # characters that escape longest, and a mention
    rep = json.loads(json.dumps(rep))
    rep["claim"] = {"licensed": False, "reasons": [worst] * 40}
    rep["gate"]["reasons"] = [worst] * 40
    rep["variants"]["a"]["name"] = rep["variants"]["b"]["name"] = worst
    rep["fixture"]["name"] = rep["run_id"] = worst
    rep["per_case"] = [{**rep["per_case"][0], "case_id": worst, "question": worst + "</details>",
                        "flipped": True, "checks_failed_b": [worst]} for _ in range(500)]
    md = render_github(rep)
    assert len(md) <= 60_000
    assert "@" not in md and "</details>" in md and md.count("</details>") == 1
    assert "<&" not in md
    assert md.count("Flipped cases (10 of 500 shown)") == 1


def test_github_format_is_refused_for_a_live_run_with_one_line(tmp_path, monkeypatch):
    from abtest.store import Store

    p, rep = _report(tmp_path, monkeypatch)
    s = Store(p / "results" / "abtest.duckdb")
    try:
        s.update_run(rep["run_id"], kind="live")
    finally:
        s.close()
    r = CliRunner().invoke(cli, ["report", rep["run_id"], "--format", "github"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "frozen runs" in r.stderr


# --------------------------------------------------------------------------- the poster

def _post(tmp_path, env, body="hello", key="fx"):
    f = tmp_path / "c.md"
    f.write_text(body)
    # `python -m abtest.reporting.pr_comment FILE --key KEY`, as the action runs it, in a
    # process forked from the preloaded interpreter (tests/support/cli.py)
    return python_run(POSTER, [f, "--key", key], env={**os.environ, **env}, timeout=60)


def test_comment_is_posted_once_then_updated_in_place(github, tmp_path):
    env = _env(github, tmp_path)
    # a busy pull request: 150 other comments, so ours is found on the second page
    github.comments = [{"id": i, "issue": 17, "body": f"review {i}"} for i in range(1, 151)]
    first = _post(tmp_path, env, "first report")
    assert first.returncode == 0, first.stderr
    ours = [c for c in github.comments if "first report" in c["body"]]
    assert len(ours) == 1 and "created" in first.stdout
    github.comments += [{"id": 2000 + i, "issue": 17, "body": "more"} for i in range(60)]
    second = _post(tmp_path, env, "second report")
    assert second.returncode == 0 and "updated" in second.stdout, second.stderr
    marked = [c for c in github.comments if "abtest-pr-comment:fx" in c["body"]]
    assert len(marked) == 1 and marked[0]["body"].endswith("second report")
    # another key (another fixture) gets its own comment
    assert _post(tmp_path, env, "other fixture", key="fy").returncode == 0
    assert len([c for c in github.comments if "abtest-pr-comment:" in c["body"]]) == 2
    assert all(a == f"Bearer {TOKEN}" for a in github.auth)


def test_a_marked_comment_the_token_cannot_edit_is_left_alone(github, tmp_path):
    from abtest.reporting.pr_comment import marker

    github.comments = [{"id": 5, "issue": 17, "body": marker("fx") + "\nplanted by someone"}]
    github.foreign = {5}
    r = _post(tmp_path, _env(github, tmp_path), "ours")
    assert r.returncode == 0 and "created" in r.stdout, r.stderr
    assert github.comments[0]["body"].endswith("planted by someone")
    assert github.comments[-1]["body"].endswith("ours")


@pytest.mark.parametrize("change, says", [
    ({"GITHUB_TOKEN": ""}, "GITHUB_TOKEN is not set"),
    ({"GITHUB_REPOSITORY": "nope"}, "not owner/name"),
    ({"GITHUB_TOKEN": "ghs_wrong_token_xyz"}, "HTTP 401 Bad credentials"),
    ({"GITHUB_EVENT_PATH": "", "ABTEST_PR_NUMBER": "x1"}, "is not a number"),
    ({"GITHUB_API_URL": "http://127.0.0.1:9"}, "cannot reach"),
])
def test_poster_failures_are_one_line_and_never_show_the_token(github, tmp_path, change, says):
    env = {**_env(github, tmp_path), **change}
    r = _post(tmp_path, env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and says in r.stderr and "Traceback" not in r.stderr
    assert TOKEN not in r.stderr + r.stdout and "ghs_wrong_token_xyz" not in r.stderr


# --------------------------------------------------------------------------- the action

def test_action_declares_what_its_script_reads():
    yaml = pytest.importorskip("yaml")
    spec = yaml.safe_load((ACTION / "action.yml").read_text())
    steps = spec["runs"]["steps"]
    assert spec["runs"]["using"] == "composite"
    env = steps[-1]["env"]
    script = (ACTION / "run.sh").read_text() + (ROOT / "abtest" / "reporting" / "pr_comment.py").read_text()
    for name in env:   # every value the step is given is read by its script or the poster
        assert name in script, name
    for name in ("fixture", "a", "b"):
        assert spec["inputs"][name]["required"] is True
    assert os.access(ACTION / "run.sh", os.X_OK)


def test_action_script_posts_one_comment_updates_it_and_exits_with_the_gate(github, tmp_path):
    """The action's run.sh end to end: a real `abtest run` on a loopback fake provider, the
    comment posted, then updated by a second run, and the job's exit code the gate's."""
    from support.fakes import brain_llm_server as FakeLLMServer, llm_config as config, many_cases

    if not shutil.which("bash"):
        pytest.skip("bash not installed")
    srv = FakeLLMServer(latency=0.0, max_seconds=300)
    url = srv.start()
    try:
        proj = make_project(tmp_path / "p", many_cases(8), config=config(url))
        out, summary = tmp_path / "gh_output", tmp_path / "gh_summary"
        env = {**os.environ, **_env(github, tmp_path),
               "FAKE_LLM_KEY": "sk-x-123456789", "ABTEST_SKIP_INSTALL": "1",
               "INPUT_FIXTURE": "fixtures/small", "INPUT_A": "variants/a.yaml",
               "INPUT_B": "variants/b.yaml", "INPUT_WORKING_DIRECTORY": str(proj),
               "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary),
               "RUNNER_TEMP": str(tmp_path),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        # the step's `abtest` commands: real processes, forked from the preloaded interpreter
        # (tests/support/forkserver.py); `python` is the venv's
        env = with_abtest_on_path(env)
        codes = []
        for _ in range(2):
            r = subprocess.run(["bash", str(ACTION / "run.sh")], capture_output=True, text=True,
                               env=env, timeout=600)
            codes.append(r.returncode)
            assert "Traceback" not in r.stderr, r.stderr
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
        run_id = outputs["run-id"]
        rep = json.loads(abtest_run(["report", run_id, "--format", "json"], cwd=proj, env=env,
                                    timeout=120).stdout)
        assert codes == [rep["gate"]["exit_code"]] * 2
        assert outputs["gate"] == str(rep["gate"]["exit_code"])
        marked = [c for c in github.comments if "abtest-pr-comment:fixtures/small" in c["body"]]
        assert len(marked) == 1                      # posted once, then updated
        body = marked[0]["body"]
        assert run_id in body and f"**Gate: {rep['gate']['decision']}**" in body
        assert ("GET" in {m for m, _ in github.calls} and
                [m for m, _ in github.calls].count("POST") == 1 and
                [m for m, _ in github.calls].count("PATCH") == 1)
        assert summary.read_text().count("### abtest:") == 2
    finally:
        srv.stop()
