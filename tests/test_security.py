"""Keys stay in the environment: never in the store, a report, a log line or the review
pack, including when the provider echoes the key in an error. Every string a report shows is
escaped in its HTML."""

from __future__ import annotations

import copy
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import CONFIG, make_project

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-7Hq2cX9vLm4Tz8Rw1Kd5Np3Bs6Yf0Ga"


def test_a_key_never_leaves_the_environment_even_when_the_provider_echoes_it(tmp_path,
                                                                             monkeypatch):
    import fake_llm_server as fls  # scripts/ is on the tests' path (conftest)


    def responder(body):
        # judge calls about Rollo fail with the key echoed, placed so a plain cut at 300
        # characters would keep half of it; the rest answer normally
        text = json.dumps(body.get("messages"))
        if body.get("response_format") and "Rollo" in text:
            msg = "x" * 167 + f" Incorrect API key provided: {KEY}. See your dashboard."
            return {"status": 401, "body": {"error": {"message": msg, "type": "auth_error"}}}
        return {"status": 200, "body": {
            "id": "x", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model"), "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant",
                                                                 "content": fls.default_content(body)}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}}

    monkeypatch.setenv("MY_LLM_CRED", KEY)  # a variable name with no KEY/TOKEN in it
    p = make_project(tmp_path)
    monkeypatch.chdir(p)
    with fls.FakeLLMServer(max_seconds=120, responder=responder) as llm:
        base = f"http://127.0.0.1:{llm.port}/v1"
        (p / "abtest.yaml").write_text(
            CONFIG.replace("{model: fake/gen,", "{model: openai/gen, api_base: '%s', "
                           "api_key_env: MY_LLM_CRED," % base)
            .replace("judge: {model: fake/judge,", "judge: {model: openai/judge, api_base: '%s', "
                     "api_key_env: MY_LLM_CRED," % base)
            .replace("max_retries: 2", "max_retries: 0"))
        r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a",
                                     "variants/a.yaml", "--b", "variants/b.yaml"])
    assert r.exit_code == 3, r.output  # the failed judge calls leave their case unfinished
    outputs = [r.stdout, r.stderr]
    for fmt in ("json", "md", "html"):
        rr = CliRunner().invoke(cli, ["report", "latest", "--format", fmt])
        outputs += [rr.stdout, rr.stderr]
    rr = CliRunner().invoke(cli, ["review", "export", "latest", "--n", "5"])
    outputs += [rr.stdout, rr.stderr]
    rr = CliRunner().invoke(cli, ["export", "latest", "--out", "exported"])
    outputs += [rr.stdout, rr.stderr]
    errors = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
                        .stdout)["unfinished_reasons"]
    assert any("Incorrect API key provided: ***" in e for v in errors.values() for e in v)
    for text in outputs:
        assert KEY not in text and KEY[:12] not in text
    for f in p.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert KEY.encode() not in data and KEY[:12].encode() not in data, f


def _every_string_path(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _every_string_path(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _every_string_path(v, path + (i,))
    elif isinstance(node, str):
        yield path


def test_every_string_of_a_report_is_text_in_its_html():
    """Inject markup into every string field of the sample report: the page gains no element
    and no attribute, and each injected string reads back as text."""
    from abtest.reporting.html import render_html

    sample = json.loads((ROOT / "tests" / "data" / "sample_report.json").read_text())
    base = ET.fromstring(render_html(sample).split("\n", 1)[1])
    shape = sorted((e.tag, tuple(sorted(e.attrib))) for e in base.iter())
    evil = copy.deepcopy(sample)
    paths = list(_every_string_path(evil))
    assert len(paths) > 100
    for i, path in enumerate(paths):
        node = evil
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = f'{node[path[-1]]}<script>x{i}</script>"&\'<b onclick="y">'
    page = render_html(evil)
    root = ET.fromstring(page.split("\n", 1)[1])
    assert not list(root.iter("script")) and not [e for e in root.iter() if "onclick" in e.attrib]
    assert not [e for e in root.iter("b")] or \
        sorted((e.tag, tuple(sorted(e.attrib))) for e in root.iter() if e.tag == "b") == \
        sorted(x for x in shape if x[0] == "b")
    text = "".join(root.itertext())
    assert text.count("<script>x") > 50  # the injected strings are there, as text
