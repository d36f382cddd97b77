"""Golden findings for the fixture repositories (Infracost-style golden files).

Each fixture's findings are kept in tests/golden/<fixture>.<target>.txt, one `path:line RULE` per
line (with `fallback` where it is one, and `off-path` where no training entry point reaches it). A change in what the scanner reports shows as a diff of
these files; regenerate them deliberately with `UPDATE_GOLDEN=1 python -m pytest tests/test_fixtures.py`.
"""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES
from goldens import golden_text
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
CASES = [
    ("mainstream", "native"), ("mainstream", "xla"), ("fused_fallbacks", "native"),
    ("cuda_extension", "native"), ("traps", "native"), ("traps", "xla"), ("notebook", "native"),
]


def _lines(name: str, target: str) -> list[str]:
    report = run_scan(Settings(root=FIXTURES / name, target=target)).report
    out = []
    for f in sorted(report.findings + report.off_path, key=lambda f: f.sort_key()):
        where = f"{f.path}:cell{f.cell}:{f.line}" if f.cell is not None else f"{f.path}:{f.line}"
        out.append(f"{where} {f.rule}" + (" fallback" if f.fallback else "") + (" off-path" if f.on_path is False else ""))
    return out


@pytest.mark.parametrize("name,target", CASES)
def test_golden_findings(name, target):
    got = _lines(name, target)
    want = golden_text(os.path.join(GOLDEN, f"{name}.{target}.txt"), "\n".join(got) + ("\n" if got else ""))
    assert got == want.splitlines()


def test_traps_have_no_findings():
    assert _lines("traps", "native") == [] and _lines("traps", "xla") == []


def test_fallbacks_are_reported_and_cost_less():
    report = run_scan(Settings(root=FIXTURES / "fused_fallbacks")).report
    gpu = [f for f in report.findings if f.category in ("gpu-library", "triton", "custom-cuda")]
    assert gpu and all(f.fallback for f in gpu)


@pytest.mark.parametrize("name,expected", [("mainstream", "days"), ("cuda_extension", "month-plus")])
def test_effort_class_of_fixtures(name, expected):
    assert run_scan(Settings(root=FIXTURES / name)).report.estimate.effort_class == expected
