"""Golden reports: the whole text and JSON report of every fixture repository, and the break-even
report for fixed inputs, compared byte for byte with tests/golden/*.report.*. A change to the
effort model, a renderer or the pricing catalog shows up here as a diff to review; accept it
deliberately with `UPDATE_GOLDEN=1 python -m pytest tests/test_golden_reports.py`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli import run_cli
from conftest import FIXTURES
from goldens import golden_text
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.render import json as json_fmt
from neuron_ready.render import text as text_fmt

GOLDEN = Path(__file__).parent / "golden"
# The fixtures of issue 11 (fixtures/ctx_*) show the split: must-port, opt-in, evaluation, host, Neuron.
NAMES = ["cuda_extension", "fused_fallbacks", "mainstream", "notebook", "traps"] + sorted(
    p.name for p in FIXTURES.glob("ctx_*"))
WORKLOAD = {"gpu-instance": "p5.48xlarge", "trainium-instance": "trn1.32xlarge", "gpu-hours-per-run": 100,
            "relative-throughput": 0.8, "runs-per-month": 4}


def _report(name: str, monkeypatch, workload: dict | None = None):
    monkeypatch.chdir(FIXTURES)  # the report's root is as given: "cuda_extension", never an absolute path
    settings = Settings(root=Path(name))
    if workload:
        settings.workload = dict(workload)
    return run_scan(settings).report


@pytest.mark.parametrize("name", NAMES)
def test_golden_text_and_json_reports(name, monkeypatch):
    report = _report(name, monkeypatch)
    for suffix, got in (("txt", text_fmt.render(report, width=100)), ("json", json_fmt.render(report))):
        path = os.fspath(GOLDEN / f"{name}.report.{suffix}")
        assert got == golden_text(path, got), f"{path} differs (UPDATE_GOLDEN=1 accepts the new report)"


def test_golden_report_with_a_workload(monkeypatch):
    report = _report("cuda_extension", monkeypatch, WORKLOAD)
    got = json_fmt.render(report)
    path = os.fspath(GOLDEN / "cuda_extension.workload.report.json")
    assert got == golden_text(path, got)
    assert '"breakeven"' in got


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_golden_breakeven(fmt, tmp_path):
    r = run_cli("breakeven", "--person-days", "12.5", "--gpu-instance", "p4d.24xlarge", "--gpu-instances", "2",
                "--trainium-instance", "trn1.32xlarge", "--pricing", "reserved-3yr", "--gpu-hours-per-run", "72",
                "--relative-throughput", "0.9", "--runs-per-month", "3", "--format", fmt, "--isolated", cwd=tmp_path)
    assert r.code == 0, r.err
    path = os.fspath(GOLDEN / f"breakeven.{'txt' if fmt == 'text' else 'json'}")
    assert r.out == golden_text(path, r.out)
