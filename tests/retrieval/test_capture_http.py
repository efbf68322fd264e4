"""`abtest capture` from an HTTP retrieval service, configured from the command line and from
abtest.yaml alike; credentials come from the environment and are never stored."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import CONFIG, make_project, send_json

TOKEN = "tok-7f3a9c51e2"
DOCS = {"d1": ("Normandy is a region in France.", "Normandie est une région."),
        "d2": ("Rollo founded Normandy.", "Rollon a fondé la Normandie."),
        "d3": ("The Normans spoke French.", "Les Normands parlaient français.")}


class Service:
    """A retrieval service with its own field names; it wants a key header and a bearer."""

    def __init__(self):
        self.seen: list[dict] = []
        svc = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                svc.seen.append({"body": body, "key": self.headers.get("X-Api-Key"),
                                 "auth": self.headers.get("Authorization")})
                if self.headers.get("X-Api-Key") != TOKEN or \
                        self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"error": "unauthorised"})
                hits = [{"doc_id": d, "content": en, "content_fr": fr, "rel": 1 - i / 10}
                        for i, (d, (en, fr)) in enumerate(DOCS.items())][: body["top_k"]]
                self._send(200, {"data": {"hits": hits}})

            def _send(self, code, obj):
                send_json(self, code, obj)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/search"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def service():
    s = Service()
    yield s
    s.server.shutdown()
    s.server.server_close()


def _project(tmp_path, monkeypatch, service, retriever_yaml: str):
    p = make_project(tmp_path / "p", config=CONFIG + retriever_yaml.format(url=service.url))
    (p / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "Where is Normandy?"}) + "\n"
        + json.dumps({"id": "q2", "question": "Who was Rollo?"}) + "\n")
    monkeypatch.chdir(p)
    return p


CONFIGURED = """
retriever:
  spec: {url}
  k: 2
  chunks_path: data.hits
  id_field: doc_id
  text_field: content
  score_field: rel
  body_template: {{"question": "{{query}}", "top_k": "{{k}}"}}
  headers: {{X-Api-Key: "$RAG_TOKEN", Authorization: "Bearer ${{RAG_TOKEN}}"}}
  timeout_s: 5
  retries: 0
"""


def test_capture_from_the_config_alone_reads_the_key_from_the_environment(tmp_path, monkeypatch,
                                                                           service):
    p = _project(tmp_path, monkeypatch, service, CONFIGURED)
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    r = CliRunner().invoke(cli, ["capture", "questions.jsonl", "--out", "fixtures/http1",
                                 "--corpus-version", "v7"])
    assert r.exit_code == 0, r.stderr
    cases = [json.loads(line) for line in (p / "fixtures/http1/cases.jsonl").read_text().splitlines()]
    assert [c["id"] for c in cases] == ["q1", "q2"]
    for c in cases:   # k = 2 from the config, in the service's rank order, its own fields
        assert [(ch["id"], ch["text"]) for ch in c["context"]] == \
            [("d1", DOCS["d1"][0]), ("d2", DOCS["d2"][0])]
    # (the questions are asked concurrently: in no fixed order)
    assert sorted((s["body"] for s in service.seen), key=lambda b: b["question"]) == [
        {"question": "Where is Normandy?", "top_k": 2}, {"question": "Who was Rollo?", "top_k": 2}]
    assert all(s["key"] == TOKEN and s["auth"] == f"Bearer {TOKEN}" for s in service.seen)
    for f in (p / "fixtures/http1").rglob("*"):   # the credential is in no file written
        assert not f.is_file() or TOKEN not in f.read_text(encoding="utf-8", errors="replace")
    assert TOKEN not in r.stderr + r.stdout


def test_command_line_options_win_over_the_config(tmp_path, monkeypatch, service):
    p = _project(tmp_path, monkeypatch, service, CONFIGURED)
    monkeypatch.setenv("OTHER_TOKEN", TOKEN)
    r = CliRunner().invoke(cli, [
        "capture", "questions.jsonl", "--out", "fixtures/fr", "--k", "3",
        "--text-field", "content_fr", "--header", "X-Api-Key: $OTHER_TOKEN",
        "--header", "Authorization: Bearer $OTHER_TOKEN"])
    assert r.exit_code == 0, r.stderr
    first = json.loads((p / "fixtures/fr/cases.jsonl").read_text().splitlines()[0])
    assert [ch["text"] for ch in first["context"]] == [fr for _, fr in DOCS.values()]


def test_capture_with_http_options_only_on_the_command_line(tmp_path, monkeypatch, service):
    p = _project(tmp_path, monkeypatch, service, "")
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    tpl = p / "body.json"
    tpl.write_text('{"question": "{query}", "top_k": "{k}"}')
    r = CliRunner().invoke(cli, [
        "capture", "questions.jsonl", "--retriever", service.url, "--out", "fixtures/cli",
        "--k", "1", "--chunks-path", "data.hits", "--id-field", "doc_id", "--text-field",
        "content", "--score-field", "rel", "--body-template", f"@{tpl}", "--header",
        "X-Api-Key: ${RAG_TOKEN}", "--auth-env", "RAG_TOKEN", "--timeout", "5", "--retries", "0"])
    assert r.exit_code == 0, r.stderr
    first = json.loads((p / "fixtures/cli/cases.jsonl").read_text().splitlines()[0])
    assert [ch["id"] for ch in first["context"]] == ["d1"] and first["retrieval_scores"] == [1.0]


@pytest.mark.parametrize("args, env, config, says", [
    (["--header", "X-Api-Key"], {"RAG_TOKEN": TOKEN}, CONFIGURED, "--header"),
    ([], {}, CONFIGURED, "RAG_TOKEN is not set"),
    ([], {"RAG_TOKEN": TOKEN}, CONFIGURED.replace("chunks_path", "chunk_path"), "chunk_path"),
    (["--retriever", "local:results/none.duckdb", "--chunks-path", "x"], {}, "", "chunks_path"),
    ([], {}, "", "no retriever: give --retriever"),
    (["--body-template", "@missing.json"], {"RAG_TOKEN": TOKEN}, CONFIGURED, "missing.json"),
])
def test_bad_retriever_settings_exit_2_with_one_line_and_no_fixture(tmp_path, monkeypatch,
                                                                    service, args, env, config,
                                                                    says):
    p = _project(tmp_path, monkeypatch, service, config)
    monkeypatch.delenv("RAG_TOKEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(cli, ["capture", "questions.jsonl", "--out", "fixtures/bad", *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and says in r.stderr and "Traceback" not in r.stderr
    assert not (p / "fixtures" / "bad").exists()
