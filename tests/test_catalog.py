"""The built-in catalog: every rule valid, every example run through the real scanner, and loading
errors that name file, rule and field."""

from __future__ import annotations

import pytest

from neuron_ready.catalog import CatalogError, load_catalog, load_text, selector_matches
from neuron_ready.model import CATEGORIES
from neuron_ready.ruletest import example_problem

CATALOG = load_catalog()
RULES = list(CATALOG)


def test_catalog_loads_and_covers_every_category():
    assert len(CATALOG) >= 80
    assert {r.category for r in RULES} == set(CATEGORIES)


def _examples(kind):
    for r in RULES:
        for i, ex in enumerate(getattr(r, kind)):
            yield pytest.param(r, ex, id=f"{r.id}-{kind}{i}")


@pytest.mark.parametrize("rule,example", list(_examples("invalid")))
def test_invalid_example_is_flagged_on_marked_lines(rule, example):
    problem = example_problem(rule, example, "invalid")
    assert problem is None, problem


@pytest.mark.parametrize("rule,example", list(_examples("valid")))
def test_valid_example_is_not_flagged(rule, example):
    problem = example_problem(rule, example, "valid")
    assert problem is None, problem


def test_every_rule_has_a_source_and_remedy():
    for r in RULES:
        assert r.source.startswith("https://"), r.id
        assert r.remedy and r.why, r.id
        assert r.targets and set(r.targets) <= {"native", "xla"}, r.id


BASE = '''
[[rule]]
id = "NR1099"
title = "t"
category = "device"
targets = ["native"]
confidence = "high"
evidence = "doc"
effort = { low = 1, likely = 2, high = 3, per = "task" }
why = "w"
remedy = "r"
source = "https://example.com"
invalid = ["import torch\\nx.cuda()  # flagged\\n"]
[[rule.match]]
kind = "method"
names = ["cuda"]
'''


def test_minimal_rule_loads():
    (rule,) = load_text(BASE, "extra.toml")
    assert rule.id == "NR1099" and rule.effort.per == "task"


@pytest.mark.parametrize(
    "change,expected",
    [
        (('id = "NR1099"', 'id = "X1"'), "extra.toml: rule #1: field 'id'"),
        (('id = "NR1099"', 'id = "NR1299"'), "extra.toml: NR1299: field 'id': rules of category 'device' use ids NR10xx"),
        (('category = "device"', 'category = "gpu"'), "extra.toml: NR1099: field 'category'"),
        (('targets = ["native"]', 'targets = ["tpu"]'), "extra.toml: NR1099: field 'targets'"),
        (("low = 1, likely = 2", "low = 3, likely = 2"), "extra.toml: NR1099: field 'effort': needs low <= likely <= high"),
        (("likely = 2", 'likely = "two"'), "extra.toml: NR1099: field 'effort.likely'"),
        (('per = "task"', 'per = "week"'), "extra.toml: NR1099: field 'effort.per'"),
        (('source = "https://example.com"', 'source = "see docs"'), "extra.toml: NR1099: field 'source'"),
        (('kind = "method"', 'kind = "magic"'), "extra.toml: NR1099: field 'match[0].kind'"),
        (('names = ["cuda"]', 'names = ["*"]'), "extra.toml: NR1099: field 'match[0].names'"),
        (('names = ["cuda"]', 'names = ["cuda"]\nbogus = 1'), "extra.toml: NR1099: field 'match[0].bogus': unknown field"),
        (('why = "w"', ''), "extra.toml: NR1099: field 'why': is required"),
        (('invalid = ["import torch\\nx.cuda()  # flagged\\n"]', ''), "extra.toml: NR1099: field 'invalid'"),
        (('confidence = "high"', 'confidence = "sure"'), "extra.toml: NR1099: field 'confidence'"),
        (('confidence = "high"', 'confidence = "high"\ncosting = "cuda"'),
         "extra.toml: NR1099: field 'costing': expected one of catalog, cuda-kernel"),
        (('kind = "method"\nnames = ["cuda"]', 'kind = "pattern"\nmatcher = "device_strings"'),
         "extra.toml: NR1099: field 'match[0].matcher': expected one of "),
    ],
)
def test_invalid_entries_name_file_rule_and_field(change, expected):
    old, new = change
    assert old in BASE
    with pytest.raises(CatalogError) as e:
        load_text(BASE.replace(old, new), "extra.toml")
    assert str(e.value).startswith(expected), str(e.value)


def test_bad_regex_and_toml_syntax_are_reported():
    bad = BASE.replace('kind = "method"\nnames = ["cuda"]', 'kind = "environ"\npattern = "NCCL_(["')
    with pytest.raises(CatalogError, match=r"NR1099: field 'match\[0\].pattern': invalid regular expression"):
        load_text(bad, "extra.toml")
    with pytest.raises(CatalogError, match=r"^extra.toml: invalid TOML"):
        load_text("[[rule]\nid=", "extra.toml")


def test_duplicate_ids_are_rejected(tmp_path):
    extra = tmp_path / "dup.toml"
    extra.write_text(BASE.replace("NR1099", "NR1001"))
    with pytest.raises(CatalogError, match=r"NR1001: field 'id': duplicate of the rule in rules/device.toml"):
        load_catalog([extra])


def test_costing_defaults_to_catalog_numbers_and_names_the_measured_rules():
    (rule,) = load_text(BASE, "extra.toml")
    assert rule.costing == "catalog"
    costed = {r.id: r.costing for r in RULES if r.costing != "catalog"}
    assert costed["NR1703"] == "cuda-kernel" and costed["NR1801"] == "triton-kernel"
    assert CATALOG.costed("cuda-host").id == "NR1704" and CATALOG.costed("triton-launch").id == "NR1803"
    assert {r.category for r in RULES if r.costing == "kernel"} <= {"custom-cuda", "triton"}


def test_every_matcher_name_in_the_catalog_is_known():
    (rule,) = load_text(BASE.replace('kind = "method"\nnames = ["cuda"]', 'kind = "pattern"\nmatcher = "device_string"'),
                        "extra.toml")
    assert rule.match[0].matcher == "device_string"


def test_selectors_match_ids_prefixes_and_categories():
    rule = ("NR1001", "device")
    assert selector_matches("NR1001", *rule)
    assert selector_matches("NR10", *rule)
    assert selector_matches("nr1", *rule)
    assert selector_matches("device", *rule)
    assert selector_matches("ALL", *rule)
    assert not selector_matches("NR11", *rule)
    assert not selector_matches("precision", *rule)


def test_target_selection():
    native = CATALOG.select(target="native")
    xla = CATALOG.select(target="xla")
    assert "NR1030" in xla.rules and "NR1030" not in native.rules
    assert "NR1001" in native.rules and "NR1001" in xla.rules
