"""Shared helpers for the benchmark scripts: a synthetic project on the loopback fake server."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

VARIANT_A = """\
name: plain
system: You are a helpful assistant.
user: |
  Context:
  {{ context }}

  Question: {{ question }}
"""
VARIANT_B = """\
name: grounded
system: Answer only from the context. Cite chunks as [chunk-id].
user: |
  <context>
  {{ context }}
  </context>
  <question>{{ question }}</question>
"""


def config(url: str, concurrency: int, judges: str = "[pairwise, faithfulness, coverage, abstention]",
           store: str = "results/abtest.duckdb") -> str:
    return (f'generator: {{model: openai/bench-gen, api_base: "{url}", max_tokens: 64}}\n'
            f'judge: {{model: openai/bench-judge, api_base: "{url}"}}\n'
            f"concurrency: {concurrency}\ntimeout_s: 30\nmax_retries: 3\nretry_backoff_s: 0.05\n"
            f"store: {store}\njudges: {judges}\n")


FILLER = ("It was recorded in the archive together with the notes of the committee, the dates "
          "of each meeting and the names of everyone who took part in the work. ")


def make_project(root: Path, n: int, url: str, concurrency: int, filler: int = 0,
                 **kw) -> Path:
    """A project of n synthetic cases; `filler` sentences lengthen every chunk."""
    from abtest.capturing import write_fixture
    from abtest.core.models import Case, Chunk

    (root / "variants").mkdir(parents=True, exist_ok=True)
    (root / "variants" / "a.yaml").write_text(VARIANT_A)
    (root / "variants" / "b.yaml").write_text(VARIANT_B)
    (root / "abtest.yaml").write_text(config(url, concurrency, **kw))
    cases = [Case(id=f"q{i:06d}", question=f"What is fact number {i}?", answerable=i % 5 != 0,
                  corpus_version="bench", retriever="synthetic", reference_answer=f"fact {i}",
                  context=[Chunk(id=f"c{i}-{j}", text=(f"Fact number {i}.{j} says that {i} is "
                                 f"a number." + (" " + FILLER * filler).rstrip()))
                           for j in range(3)])
             for i in range(n)]
    write_fixture(root / "fixtures" / "bench", cases, corpus_version="bench", retriever="synthetic",
                  force=True)
    return root


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}>\n?(.*?)\n?</{name}>", text, re.S)
    return m.group(1) if m else ""


def responder(body: dict):
    """Answers like a cooperative model: valid judge JSON for abtest's schemas."""
    fmt = (body.get("response_format") or {}).get("json_schema") or {}
    name = fmt.get("name")
    prompt = body["messages"][-1]["content"]
    if name is None:  # the two variants answer differently, as real ones do
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        if "Cite chunks" in system:
            return "Fact number 1 says that 1 is a number. [c1-0]"
        return "It says that 1 is a number, as fact number 1 explains."
    if name == "pairwiseverdict":
        return json.dumps({"winner": "1" if "[" in _tag(prompt, "response_1") else "2",
                           "margin": 0.6, "rationale": "cites"})
    if name == "claims":
        return json.dumps({"claims": [_tag(prompt, "answer").split(" [")[0][:80]],
                           "rationale": "bench", "answers_question": True})
    if name == "claimverdicts":
        n = len(re.findall(r"^\d+\. ", _tag(prompt, "claims"), re.M))
        return json.dumps({"verdicts": {str(i + 1): {"verdict": "supported", "chunk_id": None}
                                        for i in range(n)}})
    if name == "coverage":
        n = len(re.findall(r"^\d+\. ", _tag(prompt, "key_points"), re.M))
        return json.dumps({"points": {str(i + 1): True for i in range(n)}})
    if name == "abstention":
        return json.dumps({"rationale": "bench", "answers_question": True})
    return json.dumps({"score": 0.8, "explanation": "ok"})


def rss_peak_mb(pid_usage) -> float:
    return pid_usage.ru_maxrss / 1024.0
