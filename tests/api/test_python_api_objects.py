"""In-memory objects (issue 45, item 2): `abtest.Variant(...)` wherever a variant path goes,
checked as its YAML file is (the same error line, the same sha256 for the same content), and
`abtest.Config(...)` beside dicts and files."""

from __future__ import annotations

import pytest

import abtest
from abtest.prompts.variants import load_variant
from support.fakes import VARIANT_A, VARIANT_B, Brain, install, make_project

GROUNDED = dict(
    name="grounded",
    system="Answer only from the context. Cite chunks as [chunk-id]. If the context does not\n"
           "contain the answer, say \"I don't know based on the provided documents.\"\n",
    user="<context>\n{{ context }}\n</context>\n<question>{{ question }}</question>\n")


def test_a_variant_in_memory_is_its_yaml_file(tmp_path):
    import yaml

    v = abtest.Variant(**GROUNDED, checks={"must_not_say": ["Normandy"]},
                       output={"format": "text"})
    lv = load_variant(v)
    f = tmp_path / "grounded.yaml"
    f.write_text(v.to_yaml(), encoding="utf-8")
    from_file = load_variant(f)
    assert from_file.variant == v and lv.variant == v
    assert lv.sha256 == from_file.sha256
    import hashlib

    assert lv.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()
    # the YAML holds what was given, nothing invented (defaults left out)
    assert yaml.safe_load(v.to_yaml()) == {**GROUNDED, "checks": {"must_not_say": ["Normandy"]}}
    # another wording is another version
    assert load_variant(abtest.Variant(**{**GROUNDED, "name": "g2"})).sha256 != lv.sha256


@pytest.mark.parametrize("fields, fails", [
    (dict(name="x", user="no context here: {{ question }}"),
     "field 'user': the prompt never shows the retrieved context"),
    (dict(name="x", user="{{ context }} {{ questoin }}"), "field 'user'"),
    (dict(name="x", user="{{ context }}", checks={"must_match": "("}), "must_match"),
])
def test_a_bad_variant_fails_with_the_line_its_file_fails_with(tmp_path, fields, fails):
    import yaml

    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(fields), encoding="utf-8")
    with pytest.raises(abtest.UserError) as from_file:
        load_variant(f)
    with pytest.raises(abtest.UserError) as in_memory:
        load_variant(abtest.Variant(**fields))
    assert fails in str(from_file.value)
    # the same line but for the name of the source
    assert str(from_file.value).replace(str(f), "SRC") == \
        str(in_memory.value).replace("Variant('x')", "SRC")


def test_a_malformed_variant_fails_at_construction_as_its_file_would(tmp_path):
    f = tmp_path / "v.yaml"
    f.write_text("name: x\nsystem: hi\n", encoding="utf-8")
    with pytest.raises(abtest.UserError) as from_file:
        load_variant(f)
    with pytest.raises(abtest.UserError) as in_memory:
        abtest.Variant(name="x", system="hi")
    assert str(from_file.value) == f"{f}: field 'user': required field is missing"
    assert str(in_memory.value) == "Variant('x'): field 'user': required field is missing"
    with pytest.raises(abtest.UserError, match="field 'temprature': unknown key"):
        abtest.Variant(name="x", user="{{ context }}", temprature=1)


def test_config_in_memory_fails_as_a_file_would(tmp_path):
    with pytest.raises(abtest.UserError) as e:
        abtest.Config(concurrency=0)
    assert str(e.value).startswith("Config(...): field 'concurrency': ")
    f = tmp_path / "abtest.yaml"
    f.write_text("concurrency: 0\n", encoding="utf-8")
    with pytest.raises(abtest.UserError) as from_file:
        abtest.load_config(f)
    assert str(from_file.value).split("field", 1)[1] == str(e.value).split("field", 1)[1]


def test_a_run_takes_variants_and_a_config_in_memory_and_matches_the_files(tmp_path,
                                                                            monkeypatch):
    import yaml

    install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    cfg_dict = yaml.safe_load((p / "abtest.yaml").read_text())
    a = abtest.Variant(**yaml.safe_load(VARIANT_A))
    b = abtest.Variant(**yaml.safe_load(VARIANT_B))
    h = abtest.run("fixtures/small", a, b, config=abtest.Config(**cfg_dict), run_id="mem")
    files = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml",
                       config=cfg_dict, run_id="file")
    assert h.status == files.status == "complete"
    rm, rf = h.report(), files.report()
    assert rm.variants.b.name == "grounded"
    assert rm.variants.b.sha256 == load_variant(b).sha256
    # the same prompts: the same answers, case for case
    assert [(c.case_id, c.answer_a, c.answer_b) for c in rm.per_case] == \
        [(c.case_id, c.answer_a, c.answer_b) for c in rf.per_case]
    # resuming with the same in-memory variant is the same version; a changed one is refused
    again = abtest.run("fixtures/small", a, b, config=cfg_dict, run_id="mem", resume=True)
    assert again.status == "complete"
    with pytest.raises(abtest.UserError, match="variant B changed since run mem started"):
        abtest.run("fixtures/small", a, abtest.Variant(**{**yaml.safe_load(VARIANT_B),
                                                          "system": "Be brief. {{ context }}"}),
                   config=cfg_dict, run_id="mem", resume=True)
