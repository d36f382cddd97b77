"""The command line as users meet it: output, the JSON contract, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_version():
    r = run_cli("--version")
    assert r.code == 0 and r.out.startswith("neuron-ready, version ")


def test_closed_pipe_is_quiet():
    p = subprocess.run(
        f"{sys.executable} -m neuron_ready rules | head -n 1", shell=True, capture_output=True, text=True, timeout=120
    )
    assert p.stdout.startswith("ID")
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr
