"""The command line as users meet it: output, the JSON contract, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli import run_cli


def test_text_report_groups_by_file_and_summarises(fixtures):
    r = run_cli("scan", str(fixtures / "mainstream"), "--no-color")
    assert r.code == 0, r.err
    assert "train.py\n" in r.out
    assert "NR1001" in r.out and "fix:" in r.out
    assert "Readiness" in r.out and "effort: days" in r.out
    assert r.err == ""


def test_json_contract(fixtures):
    r = run_cli("scan", str(fixtures / "cuda_extension"), "--format", "json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["schema_version"] == 1
    assert d["tool"]["name"] == "neuron-ready" and d["tool"]["version"]
    assert d["target"] == "native"
    assert set(d["summary"]) >= {"files_scanned", "findings", "score", "effort"}
    assert set(d["summary"]["effort"]) >= {"class", "person_days"}
    assert d["summary"]["effort"]["class"] in ("days", "weeks", "month-plus")
    assert set(d["summary"]["effort"]["person_days"]) == {"low", "likely", "high"}
    assert isinstance(d["tasks"], list) and isinstance(d["diagnostics"], list)
    for f in d["findings"]:
        assert set(f) >= {"rule", "category", "path", "line", "column", "message", "remedy", "fallback"}
        assert not f["path"].startswith("/") and "\\" not in f["path"]
        assert f["line"] >= 1 and f["column"] >= 1
    cu = [f for f in d["findings"] if f["path"] == "csrc/scan_kernel.cu"]
    assert cu and cu[0]["kernels"] == 2 and cu[0]["kernel_lines"] == [6, 22]


def test_output_file_and_target(tmp_path, fixtures):
    out = tmp_path / "reports" / "scan.json"
    r = run_cli("scan", str(fixtures / "mainstream"), "--format", "json", "--target", "xla", "-o", str(out))
    assert r.code == 0 and r.out == ""
    d = json.loads(out.read_text())
    assert d["target"] == "xla"
    assert any(f["category"] == "host-sync" for f in d["findings"])  # .item() in the step matters on XLA


@pytest.mark.parametrize(
    "args,code",
    [
        (["--fail-on", "days"], 1),
        (["--fail-on", "weeks"], 0),
        (["--fail-on", "NR1001"], 1),
        (["--fail-on", "NR19"], 0),
        (["--fail-on", "distributed"], 1),
        (["--fail-on", "any"], 1),
        (["--fail-on", "month-plus,NR17"], 0),
    ],
)
def test_fail_on(fixtures, args, code):
    r = run_cli("scan", str(fixtures / "mainstream"), "--format", "json", *args)
    assert r.code == code, r.err
    if code:
        assert r.err.startswith("neuron-ready: --fail-on met:")
    json.loads(r.out)  # the report is still written


@pytest.mark.parametrize(
    "args,needle",
    [
        (["scan", "no/such/dir"], "no such file or directory: no/such/dir"),
        (["scan", ".", "--fail-on", "soon"], "'soon' is not an effort class"),
        (["scan", ".", "--select", "NRX"], "is not a rule id"),
        (["scan", ".", "--max-file-size", "big"], "expected a size"),
        (["scan", ".", "--format", "pdf"], "Invalid value for '--format'"),
        (["rules", "NR9999"], "no rule 'NR9999'"),
        (["scan", ".", "--config", "missing.toml"], "missing.toml:1: config file not found"),
    ],
)
def test_usage_errors_exit_2_without_traceback(tmp_path, args, needle):
    r = run_cli(*args, cwd=tmp_path)
    assert r.code == 2, (r.code, r.err)
    assert needle in r.err
    assert "Traceback" not in r.err


def test_rules_list_page_and_formats():
    r = run_cli("rules")
    assert r.code == 0 and "NR1001" in r.out and "rules." in r.out
    page = run_cli("rules", "NR1703").out
    for heading in ("What it finds", "Why it matters", "Example (flagged)", "Remedy", "Source", "https://"):
        assert heading in page
    data = json.loads(run_cli("rules", "--format", "json", "--category", "triton").out)
    assert data and all(x["category"] == "triton" for x in data)
    md = run_cli("rules", "--format", "markdown", "--target", "xla").out
    assert md.startswith("| ID |") and "NR1030" in md


USER_RULES = '''
[[rule]]
id = "NR1098"
title = "Pinned CUDA device index"
category = "device"
targets = ["native"]
confidence = "high"
evidence = "derived"
effort = { low = 0.1, likely = 0.2, high = 0.5, per = "occurrence" }
why = "w"
remedy = "r"
source = "https://example.com"
invalid = ["import torch\\ntorch.cuda.set_device(0)  # flagged\\n", "import torch\\ntorch.cuda.set_device(1)\\n"]
valid = ["import torch\\ntorch.cuda.current_device()\\n"]
[[rule.match]]
kind = "call"
names = ["torch.cuda.set_device"]
'''


def test_rules_test_runs_a_catalogs_examples_through_the_scanner(tmp_path):
    good = tmp_path / "mine.toml"
    good.write_text(USER_RULES)
    r = run_cli("rules", "--test", str(good), cwd=tmp_path)
    assert r.code == 0, r.err
    assert r.out == f"3 examples of 1 rule in {good}: all pass\n"
    # an example marked on the wrong line, and a valid example the rule flags: each reported with its rule
    bad = tmp_path / "bad.toml"
    bad.write_text(USER_RULES.replace("set_device(0)  # flagged", "set_device(0)\\nx = 1  # flagged")
                   .replace("torch.cuda.current_device()", "torch.cuda.set_device(2)"))
    r = run_cli("rules", "--test", str(bad), cwd=tmp_path)
    assert r.code == 1, (r.code, r.err)
    assert "FAIL NR1098 invalid example 1: NR1098 (native) fired on lines [2], example marks [3]" in r.out
    assert "FAIL NR1098 valid example 1: NR1098 (native) fired on lines [2] of a valid example" in r.out
    assert "    torch.cuda.set_device(2)" in r.out
    assert r.out.endswith(f"3 examples of 1 rule in {bad}: 2 failed\n")


@pytest.mark.parametrize(
    "change,needle",
    [
        (("kind = \"call\"\nnames = [\"torch.cuda.set_device\"]", "kind = \"pattern\"\nmatcher = \"set_device\""), ":17: NR1098: field 'match[0].matcher'"),
        (("[[rule.match]]", "[[rule.match]"), ":15: invalid TOML"),
        (("NR1098", "NR1001"), ":3: NR1001: field 'id': duplicate of the rule in rules/device.toml"),
        (("likely = 0.2", "likely = 0.05"), ":9: NR1098: field 'effort': needs low <= likely <= high"),
        (("[[rule]]", "[[other]]"), ":1: unknown top-level key 'other'"),
        ((USER_RULES, "# nothing yet\n"), ":1: no rules to test"),
    ],
)
def test_rules_test_rejects_a_bad_file_with_its_line(tmp_path, change, needle):
    bad = tmp_path / "bad.toml"
    bad.write_text(USER_RULES.replace(*change))
    r = run_cli("rules", "--test", str(bad), cwd=tmp_path)
    assert r.code == 2, (r.code, r.out)
    assert r.err.startswith(f"neuron-ready: error: {bad}{needle}"), r.err
    assert len(r.err.splitlines()) == 1 and not r.out


def test_rules_test_passes_on_a_builtin_catalog_file():
    r = run_cli("rules", "--test", str(Path(__file__).resolve().parents[1] / "rules" / "triton.toml"))
    assert r.code == 0 and r.out.endswith(": all pass\n"), (r.out, r.err)


def test_version():
    r = run_cli("--version")
    assert r.code == 0 and r.out.startswith("neuron-ready, version ")


def test_closed_pipe_is_quiet():
    p = subprocess.run(
        f"{sys.executable} -m neuron_ready rules | head -n 1", shell=True, capture_output=True, text=True, timeout=120
    )
    assert p.stdout.startswith("ID")
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr
