"""The typed report model: the contract the builder is held to and readers can rely on."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from abtest.reporting.model import Report, report_schema, undeclared, validate_report
from support.fakes import ROOT

ROOT = ROOT
SAMPLE = json.loads((ROOT / "tests" / "data" / "sample_report.json").read_text())


def test_the_sample_report_is_a_valid_report_and_round_trips():
    model = validate_report(SAMPLE)
    assert model.metrics.pairwise.b_wins == SAMPLE["metrics"]["pairwise"]["b_wins"]
    assert model.gate.decision == "INCOMPLETE" and model.claim.licensed is False
    assert model.per_case[0].case_id == SAMPLE["per_case"][0]["case_id"]
    # nothing is lost or invented: the JSON form equals the input, key for key
    dumped = model.model_dump(mode="json", exclude_unset=True)
    assert dumped == SAMPLE
    assert list(dumped) == list(SAMPLE)  # top-level keys in the contract's order


def test_a_key_the_model_does_not_declare_is_the_builders_bug():
    r = copy.deepcopy(SAMPLE)
    r["metrics"]["faithfulness"]["p_vlaue"] = 0.5
    r["per_case"][2]["faithfulnes_b"] = 0.9
    with pytest.raises(ValueError, match=r"metrics\.faithfulness\.p_vlaue.*per_case\[2\]\."
                                         r"faithfulnes_b"):
        validate_report(r)
    # a reader keeps it (a newer abtest may add keys) and can list it
    m = Report.model_validate(r)
    assert undeclared(m) == ["metrics.faithfulness.p_vlaue", "per_case[2].faithfulnes_b"]
    assert m.model_dump(mode="json", exclude_unset=True)["metrics"]["faithfulness"]["p_vlaue"] \
        == 0.5


@pytest.mark.parametrize("path, value", [
    (("gate", "decision"), "MAYBE"),
    (("gate", "exit_code"), 2),
    (("status",), "done"),
    (("claim", "licensed"), "yes"),
    (("metrics", "pairwise", "b_wins"), "five"),
    (("per_case", 0, "flipped"), None),
])
def test_a_wrong_type_or_value_is_refused(path, value):
    r = copy.deepcopy(SAMPLE)
    node = r
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    with pytest.raises(ValidationError):
        validate_report(r)


def test_a_missing_stable_key_is_refused():
    for key in ("claim", "gate", "metrics", "per_case", "judge_validation"):
        r = copy.deepcopy(SAMPLE)
        del r[key]
        with pytest.raises(ValidationError, match=key):
            validate_report(r)


def test_the_published_schema_is_the_models():
    published = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    assert published == report_schema(), (
        "docs/report.schema.json is stale: regenerate it with "
        "python -c 'import json; from abtest.reporting.model import report_schema; "
        "print(json.dumps(report_schema(), indent=2))' > docs/report.schema.json")


def test_a_built_reports_shape_is_the_dict_it_was_built_from_and_the_suite_proves_it(monkeypatch):
    """Renderers read the dict the builder made (no dump per rendering); that is only right
    while the builder writes each value in its contract type, which the suite's
    ABTEST_CHECK_REPORT_SHAPE checks on every report it builds: an int in a float field
    would be written 1.0 by the model and 1 from the dict."""
    from abtest.reporting.model import CHECK_SHAPE, json_shape, shape_difference

    r = copy.deepcopy(SAMPLE)
    monkeypatch.setenv(CHECK_SHAPE, "1")
    assert json_shape(validate_report(r)) is r
    r["metrics"]["faithfulness"]["a"] = 1  # the model makes it 1.0
    with pytest.raises(AssertionError, match=r"metrics\.faithfulness\.a \(int vs float\)"):
        validate_report(r)
    monkeypatch.delenv(CHECK_SHAPE)
    assert json_shape(validate_report(r)) is r
    # the comparison itself: type, order and value, NaN equal to itself
    assert shape_difference({"a": 1, "b": 2}, {"b": 2, "a": 1}) == ". (keys ['a', 'b'] vs ['b', 'a'])"
    assert shape_difference([1.0, float("nan")], [1.0, float("nan")]) is None
    assert shape_difference({"x": [1, 2]}, {"x": [1, 3]}) == ".x[1] (2 vs 3)"


def test_a_report_is_frozen_and_a_read_reports_shape_is_taken_once():
    from abtest.reporting.model import json_shape

    m = Report.model_validate(copy.deepcopy(SAMPLE))
    with pytest.raises(ValidationError, match="frozen"):
        m.status = "complete"
    with pytest.raises(ValidationError, match="frozen"):
        m.claim.licensed = True
    shape = json_shape(m)
    assert shape == SAMPLE and json_shape(m) is shape
    assert m.as_dict() == shape and m.as_dict() is not shape  # a copy to change


def test_rendering_every_format_leaves_the_shared_shape_as_it_was_built(ran):
    """Every renderer reads the one dict a built report keeps (json_shape), so none may change
    it: after all of them, and the stored summary, it is still the model's dump."""
    from abtest.reporting import build_report, render
    from abtest.reporting.model import json_shape, shape_difference
    from abtest.reporting.summary import summarize
    from abtest.store import Store

    with Store(Path("results") / "abtest.duckdb", read_only=True) as s:
        rep = build_report(s, ran)
    shape = json_shape(rep)
    first = {fmt: render(rep, fmt) for fmt in ("json", "md", "html", "github")}
    summarize(rep)
    assert json_shape(rep) is shape
    assert shape_difference(shape, rep.as_dict(), ordered=False) is None
    assert {fmt: render(rep, fmt) for fmt in first} == first
    assert json.loads(first["json"]) == json.loads(json.dumps(rep.as_dict(), default=str))
