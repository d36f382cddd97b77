"""Every catalog rule with a static matcher and an aten clause (a trace twin) is found by both halves:
`neuron-ready trace --scan` on fixtures/trace_twins/twins.py (real PyTorch on the CPU) confirms the
static finding at the line the fixture marks for the rule. One trace per target serves every rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli import run_cli
from neuron_ready.catalog import load_catalog

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
TWINS = "fixtures/trace_twins"
SOURCE = REPO / TWINS / "twins.py"
CATALOG = load_catalog()
NATIVE = {r.id for r in CATALOG.select(target="native") if r.trace_twin}
XLA_ONLY = {r.id for r in CATALOG.select(target="xla") if r.trace_twin} - NATIVE
FACTORY = {"native": "build", "xla": "build_xla"}


def marked_lines() -> dict[str, list[int]]:
    """Rule id -> the lines whose comment names it (`...  # NR1601`)."""
    out: dict[str, list[int]] = {}
    for i, line in enumerate(SOURCE.read_text(encoding="utf-8").splitlines(), start=1):
        m = re.search(r"#\s*(NR\d{4})\s*$", line)
        if m:
            out.setdefault(m.group(1), []).append(i)
    return out


@pytest.fixture(scope="module")
def traced() -> dict[str, dict]:
    out = {}
    for target, factory in FACTORY.items():
        r = run_cli("trace", f"{TWINS}/twins.py:{factory}", "--scan", TWINS, "--format", "json", "--no-graph-breaks",
                    "--target", target, cwd=REPO)
        assert r.code == 0, r.err
        out[target] = json.loads(r.out)
    return out


def test_the_fixture_marks_each_twin_rule_once():
    lines = marked_lines()
    assert set(lines) == NATIVE | XLA_ONLY
    assert all(len(v) == 1 for v in lines.values()), lines
    assert len(NATIVE | XLA_ONLY) == sum(r.trace_twin for r in CATALOG)


@pytest.mark.parametrize("rule", sorted(NATIVE | XLA_ONLY))
def test_static_finding_is_confirmed_by_the_trace_at_its_line(traced, rule):
    target = "native" if rule in NATIVE else "xla"
    doc = traced[target]
    (line,) = marked_lines()[rule]
    here = [f for f in doc["findings"] + doc["off_path"] if f["rule"] == rule and f["path"] == "twins.py" and f["line"] == line]
    assert [(f["origin"], f["status"]) for f in here] == [("static", "confirmed")], here
    assert here[0]["trace"], "the aten ops that confirmed it"
